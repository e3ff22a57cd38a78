/**
 * Plan reads: the rows the planner listed while it searched the boundaries, kept so that the
 * shards take them instead of listing them again. On a registry of a few hundred thousand keys the
 * planner's reads (1,000-row probes, the reads that finish a boundary) are a third as many rows as
 * the crawl itself, served by the same registry while the first shards list theirs.
 *
 * A read is kept as a segment: the rows from its start (or, read downwards, from its lowest row) up
 * to its last row, which are exactly the registry's rows in that span at the moment it answered.
 * A shard's request from a key inside a segment is answered from it ({@linkcode segmentAnswer}):
 * the first rows from that key as the registry would have listed them then, with `Page.limit` set
 * to their number when the segment ends before the request's limit and end (a full answer to a
 * smaller request: the shard goes on from its last row, and learns no cap from it). A request from
 * a key below a segment is sent with the segment's start as its end, and the segment's rows follow
 * the answer when the ranks agree that nothing lies between ({@linkcode PlanReads.answer}).
 *
 * Only reads sent after the crawl's start sequence was read are kept (as with early pages, catch-up
 * covers what changed since), only for crawls planned by ranks over `_all_docs` in code-point
 * order, and only for listings without documents. Bounded: at most `maxRows` rows over all
 * crawls (reads beyond it are not kept), each dropped `ttlMs` after it arrived.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { compareKeys } from "../../plan/keys.ts";
import {
  type Listing,
  listingWith,
  type ListOptions,
  type Page,
  type Row,
} from "../../plan/source.ts";

/** Rows an answer from a segment must have at least when it is cut short by the segment's end. */
const MIN_PARTIAL_ROWS = 3;

/** One kept read: the registry's rows in `[from, rows.at(-1).id]`, ascending. */
export interface Segment {
  /** The first key the segment speaks for ("" for a read from the first key). */
  from: string;
  /** Its rows, ascending, at least one. */
  rows: Row[];
  /** Rank of `rows[0]` when read. */
  offset: number;
  /** The listing's total when read. */
  total: number;
  /** The registry held no row after the last one (by ranks), when read. */
  toEnd: boolean;
  /** When it arrived, epoch ms. */
  at: number;
}

/** Options of {@linkcode PlanReads}. */
export interface PlanReadsOptions {
  /** Rows kept at once, over all crawls. @default 128512 */
  maxRows?: number;
  /** A segment is dropped this many milliseconds after it arrived. @default 60000 */
  ttlMs?: number;
  /** What segments are timed by (their ttl). @default SYSTEM_CLOCK */
  clock?: Clock;
}

/**
 * The segment a listing answer makes (see the module comment), or null when it cannot be one:
 * documents, `skip`, an update sequence, or no rows. A downward read's rows are turned around; its
 * offset is CouchDB's (rows above the first one listed).
 */
export function segmentOf(request: ListOptions, page: Page, at: number): Segment | null {
  if (request.includeDocs || request.skip || request.updateSeq || page.rows.length === 0) {
    return null;
  }
  const n = page.rows.length;
  if (request.descending) {
    const rows = page.rows.slice().reverse();
    return {
      from: rows[0].id,
      rows,
      offset: page.total - page.offset - n,
      total: page.total,
      toEnd: false,
      at,
    };
  }
  const from = request.start ?? "";
  if (compareKeys(page.rows[0].id, from) < 0) return null;
  const toEnd = (request.end ?? null) === null && page.offset + n === page.total;
  return { from, rows: page.rows, offset: page.offset, total: page.total, toEnd, at };
}

/**
 * What the registry answered, when it answered `segment`, to `request` (ascending, no documents)
 * from a key inside the segment: its first `limit` rows below `end` when the segment has them;
 * the rows up to the end with `ended` when the segment passes the end; the rows to the registry's
 * end when the segment reached it (a short answer, its ranks telling the end); else the segment's
 * rows from the start with `limit` set to their number when there are at least a few. Undefined:
 * the start is outside the segment, or too few rows are left in it.
 */
export function segmentAnswer(segment: Segment, request: ListOptions): Page | undefined {
  const start = request.start ?? "";
  const rows = segment.rows;
  if (compareKeys(start, segment.from) < 0) return undefined;
  if (compareKeys(start, rows[rows.length - 1].id) > 0 && !segment.toEnd) return undefined;
  const i = firstAtOrAbove(rows, start);
  const end = request.end ?? null;
  const stop = end === null ? rows.length : firstAtOrAbove(rows, end, i);
  const base = { offset: segment.offset + i, total: segment.total };
  if (stop - i >= request.limit) return { ...base, rows: rows.slice(i, i + request.limit) };
  const inRange = rows.slice(i, stop);
  if (stop < rows.length) return { ...base, rows: inRange, ended: true };
  if (segment.toEnd) return { ...base, rows: inRange };
  if (inRange.length < MIN_PARTIAL_ROWS) return undefined;
  return { ...base, rows: inRange, limit: inRange.length };
}

/** Index of the first row at or above `key` from `lo` on (rows ascending). */
function firstAtOrAbove(rows: Row[], key: string, lo = 0): number {
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareKeys(rows[mid].id, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The planner's reads of the crawls planned in this process (see the module comment). */
export class PlanReads {
  #byCrawl = new Map<string, Segment[]>();
  #held = 0;
  #maxRows: number;
  #ttlMs: number;
  #clock: Clock;

  /** An empty store with its bounds. */
  constructor(options: PlanReadsOptions = {}) {
    this.#maxRows = options.maxRows ?? 2 * (64_000 + 256);
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
  }

  /** Rows kept now. */
  get heldRows(): number {
    return this.#held;
  }

  /**
   * `source` with every answer to a request sent once `after` settled (the crawl's start sequence)
   * kept for `crawlId`; everything else passes through.
   */
  recording(source: Listing, crawlId: string, o: { after?: Promise<unknown> } = {}): Listing {
    let open = o.after === undefined;
    o.after?.then(() => open = true, () => open = true);
    return listingWith(source, {
      list: async (request) => {
        const sentOpen = open;
        const page = await source.list(request);
        if (sentOpen) this.#keep(crawlId, segmentOf(request, page, this.#clock.now()));
        return page;
      },
    });
  }

  /** The segment of `crawlId` holding `key` with the most rows from it, if any. */
  covering(crawlId: string, key: string): Segment | undefined {
    this.#sweep();
    let best: Segment | undefined;
    let bestLeft = 0;
    for (const s of this.#byCrawl.get(crawlId) ?? []) {
      if (compareKeys(key, s.from) < 0 || compareKeys(key, s.rows[s.rows.length - 1].id) > 0) {
        continue;
      }
      const left = s.rows.length - firstAtOrAbove(s.rows, key);
      if (left > bestLeft) [best, bestLeft] = [s, left];
    }
    return best;
  }

  /**
   * The answer to a shard's `request` (ascending, no documents) with the help of the segments of
   * `crawlId`: from a segment holding its start; else, when a segment starts between its start and
   * its end, `source`'s answer up to that segment followed by the segment's rows (when the answer
   * ended there and the ranks agree that nothing lies between; a segment they contradict is
   * dropped). Undefined: no segment helps, and nothing was asked of `source`.
   */
  async answer(
    crawlId: string,
    request: ListOptions,
    o: { source: Listing },
  ): Promise<Page | undefined> {
    if (request.descending || request.skip || request.updateSeq || request.includeDocs) {
      return undefined;
    }
    const start = request.start ?? "";
    const here = this.covering(crawlId, start);
    const direct = here && segmentAnswer(here, request);
    if (direct) return direct;
    const next = this.#nextAfter(crawlId, start, request.end ?? null);
    if (!next) return undefined;
    const page = await o.source.list({ ...request, end: next.from });
    const got = page.rows.length;
    const asked = Math.min(request.limit, page.limit ?? request.limit);
    if (got >= asked) return page;
    if (page.offset + got === next.offset) {
      const rest = segmentAnswer(next, {
        ...request,
        start: next.from,
        limit: request.limit - got,
      });
      if (rest) {
        const rows = [...page.rows, ...rest.rows];
        const base = { offset: page.offset, total: rest.total };
        // Cut short by the segment's end: a full answer to a request for as many rows.
        if (rest.limit !== undefined) return { ...base, rows, limit: rows.length };
        return { ...base, rows, ...(rest.ended ? { ended: true } : {}) };
      }
    } else {
      this.#remove(crawlId, next);
    }
    return got >= MIN_PARTIAL_ROWS ? { ...page, limit: got } : undefined;
  }

  /** Drops every segment of `crawlId`. */
  drop(crawlId: string): void {
    for (const s of this.#byCrawl.get(crawlId) ?? []) this.#held -= s.rows.length;
    this.#byCrawl.delete(crawlId);
  }

  /** The segment of `crawlId` starting first above `key`, below `end` (null: no end). */
  #nextAfter(crawlId: string, key: string, end: string | null): Segment | undefined {
    let best: Segment | undefined;
    for (const s of this.#byCrawl.get(crawlId) ?? []) {
      if (compareKeys(s.from, key) <= 0 || (end !== null && compareKeys(s.from, end) >= 0)) {
        continue;
      }
      if (!best || compareKeys(s.from, best.from) < 0) best = s;
    }
    return best;
  }

  #keep(crawlId: string, segment: Segment | null): void {
    this.#sweep();
    if (!segment || this.#held + segment.rows.length > this.#maxRows) return;
    this.#held += segment.rows.length;
    const list = this.#byCrawl.get(crawlId) ?? [];
    list.push(segment);
    this.#byCrawl.set(crawlId, list);
  }

  #remove(crawlId: string, segment: Segment): void {
    const list = this.#byCrawl.get(crawlId);
    const at = list?.indexOf(segment) ?? -1;
    if (at < 0) return;
    list!.splice(at, 1);
    this.#held -= segment.rows.length;
    if (list!.length === 0) this.#byCrawl.delete(crawlId);
  }

  #sweep(): void {
    const before = this.#clock.now() - this.#ttlMs;
    for (const [crawlId, list] of this.#byCrawl) {
      for (const s of list.filter((s) => s.at < before)) this.#remove(crawlId, s);
    }
  }
}
