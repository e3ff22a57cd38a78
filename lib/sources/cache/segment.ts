/**
 * Segments: what one listing answer says about the registry at the moment it answered, and which
 * other requests it answers exactly. A segment holds the rows from its first key (`from`: where the
 * answer was listed from, or, listed downwards, its lowest row) up to its last row, which are
 * exactly the registry's rows in that span then.
 *
 * A request from a key inside a segment is told from it ({@linkcode segmentAnswer}): its first
 * rows below the request's end when the segment has as many as the limit; every row up to the end
 * with `ended` when the segment passes the end; every row to the registry's end when the ranks say
 * the segment reached it (`toEnd`), or when the segment was the registry's whole answer from there
 * and came back short (`short`: its end, or a cap it did not say, as the request would have got);
 * else, when a few rows are left, as many as the segment holds with `Page.limit` set to their
 * number (a full answer to a smaller request: the caller goes on from its last row, and learns no
 * cap from it).
 *
 * @module
 */
import { compareKeys } from "../../plan/keys.ts";
import { type ListOptions, type Page, type Row, rowsDocBytes } from "../../plan/source.ts";

/** Rows an answer from a segment must have at least when it is cut short by the segment's end. */
export const MIN_PARTIAL_ROWS = 3;

/** One answer kept: the registry's rows in `[from, rows.at(-1).id]`, ascending. */
export interface Segment {
  /** The first key the segment speaks for ("" for an answer from the first key). */
  from: string;
  /** Its rows, ascending, at least one. */
  rows: Row[];
  /** Rank of `rows[0]` when listed. */
  offset: number;
  /** The listing's total when listed. */
  total: number;
  /** The registry held no row after the last one (by ranks), when listed. */
  toEnd: boolean;
  /**
   * Listed from `from` without an end, and answered with fewer rows than asked: the registry's
   * end, or a cap it did not say. A request whose answer starts at the first row gets them all.
   */
  short: boolean;
  /** The rows carry their documents (`includeDocs`). */
  docs: boolean;
  /** Bytes of the documents its rows hold (see `heldDocBytes`). */
  docBytes: number;
  /** When it arrived, epoch milliseconds. */
  atMs: number;
}

/**
 * The segment a listing answer makes, or null when it cannot be one: `skip`, an update sequence,
 * no rows, or rows below the start asked (a registry that does not honour it). A downward answer's
 * rows are turned around; its offset is CouchDB's (rows above the first one listed).
 */
export function segmentOf(
  request: ListOptions,
  page: Page,
  o: { atMs: number },
): Segment | null {
  if (request.skip || request.updateSeq || page.rows.length === 0) return null;
  const n = page.rows.length;
  const docs = request.includeDocs ?? false;
  const docBytes = docs ? rowsDocBytes(page.rows) : 0;
  const base = { total: page.total, docs, docBytes, atMs: o.atMs };
  if (request.descending) {
    const rows = page.rows.slice().reverse();
    const offset = page.total - page.offset - n;
    return { ...base, from: rows[0].id, rows, offset, toEnd: false, short: false };
  }
  const from = request.start ?? "";
  if (compareKeys(page.rows[0].id, from) < 0) return null;
  const open = (request.end ?? null) === null;
  const toEnd = open && page.offset + n === page.total;
  const short = open && n < Math.min(request.limit, page.limit ?? request.limit);
  return { ...base, from, rows: page.rows, offset: page.offset, toEnd, short };
}

/**
 * What the registry answered, when it answered `segment`, to `request` (ascending) from a key
 * inside the segment (see the module comment). Undefined: the start is outside the segment, or too
 * few rows are left in it to tell.
 */
export function segmentAnswer(segment: Segment, request: ListOptions): Page | undefined {
  const start = request.start ?? "";
  const rows = segment.rows;
  if (compareKeys(start, segment.from) < 0) return undefined;
  if (compareKeys(start, rows[rows.length - 1].id) > 0 && !segment.toEnd) return undefined;
  const i = firstAtOrAbove(rows, start);
  const end = request.end ?? null;
  const stop = end === null ? rows.length : firstAtOrAbove(rows, end, { from: i });
  const base = { offset: segment.offset + i, total: segment.total };
  if (stop - i >= request.limit) return { ...base, rows: rows.slice(i, i + request.limit) };
  const inRange = rows.slice(i, stop);
  if (stop < rows.length) return { ...base, rows: inRange, ended: true };
  if (segment.toEnd || (segment.short && i === 0)) return { ...base, rows: inRange };
  if (inRange.length < MIN_PARTIAL_ROWS) return undefined;
  return { ...base, rows: inRange, limit: inRange.length };
}

/** Index of the first row at or above `key` from index `o.from` on (rows ascending). @default 0 */
export function firstAtOrAbove(
  rows: readonly Row[],
  key: string,
  o: { from?: number } = {},
): number {
  let lo = o.from ?? 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareKeys(rows[mid].id, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * What is left of `segment` once its rows `[o.from, o.to)` (indices) were handed out: the rows
 * below `from` (a lower range's, perhaps) and those from `to` on (the answer's last row, where its
 * taker's next request starts, and what follows it), each a segment of its own, and only where it
 * can still tell an answer (at least {@linkcode MIN_PARTIAL_ROWS} rows, or the registry's end).
 */
export function remainsOf(segment: Segment, o: { from: number; to: number }): Segment[] {
  const { from: i, to: j } = o;
  const out: Segment[] = [];
  const bytes = (rows: Row[]) => segment.docs ? rowsDocBytes(rows) : 0;
  if (i >= MIN_PARTIAL_ROWS) {
    const rows = segment.rows.slice(0, i);
    out.push({ ...segment, rows, toEnd: false, short: false, docBytes: bytes(rows) });
  }
  const after = segment.rows.length - j;
  if (after >= MIN_PARTIAL_ROWS || (after > 0 && segment.toEnd)) {
    const rows = segment.rows.slice(j);
    out.push({
      ...segment,
      from: rows[0].id,
      rows,
      offset: segment.offset + j,
      short: false,
      docBytes: bytes(rows),
    });
  }
  return out;
}
