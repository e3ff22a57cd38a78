/**
 * The simulated registry's `_all_docs`: query parameters parsed and checked the way CouchDB does
 * (JSON keys, booleans, integers; 400 `query_parse_error` otherwise), and the rows of a listing
 * computed over {@linkcode RegistryData} with `offset` = the rank of the first row.
 *
 * @module
 */
import type { Context } from "hono";
import type { RegistryData } from "./registry_data.ts";

/** A listing request, parsed. */
export interface ListingQuery {
  /** First key (inclusive), or undefined. */
  start?: string;
  /** Last key, or undefined. */
  end?: string;
  /** Rows at most. */
  limit: number;
  /** Rows skipped first. */
  skip: number;
  /** Walk down from `start`. */
  descending: boolean;
  /** `end` itself is included. */
  inclusiveEnd: boolean;
  /** Each row carries its document. */
  includeDocs: boolean;
  /** `limit` was given (the cap applies to given limits only). */
  limitGiven: boolean;
  /** `skip` was given. */
  skipGiven: boolean;
  /** The answer carries the database's `update_seq` (CouchDB's `update_seq=true`). */
  updateSeq: boolean;
}

/** Parses a JSON-encoded string query parameter; `undefined` when absent, Error when malformed. */
function jsonKey(raw: string | undefined): string | undefined | Error {
  if (raw === undefined) return undefined;
  try {
    const v = JSON.parse(raw);
    if (typeof v !== "string") return new Error(`key must be a JSON string: ${raw.slice(0, 80)}`);
    return v;
  } catch {
    return new Error(`Invalid value for JSON: ${raw.slice(0, 80)}`);
  }
}

function boolParam(raw: string | undefined, dflt: boolean): boolean | Error {
  if (raw === undefined) return dflt;
  if (raw === "true") return true;
  if (raw === "false") return false;
  return new Error(`Invalid boolean parameter: ${raw.slice(0, 40)}`);
}

/** Parses a non-negative integer query parameter; Error when malformed. */
export function intParam(raw: string | undefined, dflt: number): number | Error {
  if (raw === undefined) return dflt;
  if (!/^\d+$/.test(raw)) return new Error(`Invalid integer parameter: ${raw.slice(0, 40)}`);
  return Number(raw);
}

/** Parses `_all_docs` query parameters; the first malformed one is returned as an Error. */
export function parseListingQuery(q: Record<string, string>): ListingQuery | Error {
  const start = jsonKey(q.startkey ?? q.start_key ?? q.startKey);
  const end = jsonKey(q.endkey ?? q.end_key ?? q.endKey);
  const limit = intParam(q.limit, Number.MAX_SAFE_INTEGER);
  const skip = intParam(q.skip, 0);
  const descending = boolParam(q.descending, false);
  const inclusiveEnd = boolParam(q.inclusive_end, true);
  const includeDocs = boolParam(q.include_docs, false);
  const updateSeq = boolParam(q.update_seq, false);
  for (const v of [start, end, limit, skip, descending, inclusiveEnd, includeDocs, updateSeq]) {
    if (v instanceof Error) return v;
  }
  return {
    start: start as string | undefined,
    end: end as string | undefined,
    limit: limit as number,
    skip: skip as number,
    descending: descending as boolean,
    inclusiveEnd: inclusiveEnd as boolean,
    includeDocs: includeDocs as boolean,
    limitGiven: q.limit !== undefined,
    skipGiven: q.skip !== undefined,
    updateSeq: updateSeq as boolean,
  };
}

/** `_all_docs` with `keys`: one row per key asked, in that order, `not_found` for missing ones. */
export function rowsForKeys(
  data: RegistryData,
  keys: unknown,
  includeDocs: boolean,
): { total_rows: number; offset: null; rows: unknown[] } {
  const list = Array.isArray(keys) ? keys : [];
  const rows = list.map((key) => {
    const rev = typeof key === "string" ? data.rev(key) : undefined;
    if (rev === undefined) return { key, error: "not_found" };
    return { id: key, key, value: { rev }, ...(includeDocs ? { doc: data.doc(key) } : {}) };
  });
  return { total_rows: data.size, offset: null, rows };
}

/**
 * The rows of a listing as JSON text, built by hand (revisions by rank, ids escaped once): the
 * simulated registry must not be the slowest part of a benchmark.
 */
export function rowsJson(
  data: RegistryData,
  q: ListingQuery,
  offset: number,
  ids: string[],
  byIndex = false,
): string {
  const parts: string[] = [];
  for (let j = 0; j < ids.length; j++) {
    const id = JSON.stringify(ids[j]);
    // The row's index in the key list: ascending rows start at `offset`; descending ones at the
    // row with `offset` rows above it (`byIndex`: `offset` is the row's own index).
    const at = byIndex ? offset : q.descending ? data.size - 1 - offset - j : offset + j;
    const rev = data.revAt(at);
    let row = `{"id":${id},"key":${id},"value":{"rev":"${rev}"}`;
    if (q.includeDocs) row += `,"doc":${JSON.stringify(data.doc(ids[j]))}`;
    parts.push(row + "}");
  }
  return parts.join(",");
}

/**
 * The ids a listing answers and the rank of the first (`offset`), as CouchDB computes them. Ids
 * for which `hidden` says true are left out of the rows (the next ones take their places, so the
 * page still looks full) while they still count in `offset` and `total_rows`: a registry whose
 * listing loses rows that its ranks still see.
 */
export function listIds(
  data: RegistryData,
  q: ListingQuery,
  hidden?: (id: string) => boolean,
): { ids: string[]; offset: number } {
  const keys = data.keys;
  const n = keys.length;
  if (!q.descending) {
    const from = q.start === undefined ? 0 : data.rank(q.start);
    let to = n;
    if (q.end !== undefined) {
      to = data.rank(q.end);
      if (q.inclusiveEnd && to < n && keys[to] === q.end) to++;
    }
    const offset = Math.min(from + q.skip, n);
    if (!hidden) {
      return { ids: data.slice(offset, Math.max(offset, Math.min(to, offset + q.limit))), offset };
    }
    const ids: string[] = [];
    for (let i = offset; i < to && ids.length < q.limit; i++) {
      if (!hidden(keys[i])) ids.push(keys[i]);
    }
    return { ids, offset };
  }
  // Descending: walk down from startkey; offset counts the rows above it.
  let from = n - 1;
  if (q.start !== undefined) {
    const r = data.rank(q.start);
    from = r < n && keys[r] === q.start ? r : r - 1;
  }
  let to = -1;
  if (q.end !== undefined) {
    const r = data.rank(q.end);
    to = q.inclusiveEnd ? r - 1 : (r < n && keys[r] === q.end ? r : r - 1);
  }
  const first = from - q.skip;
  const ids: string[] = [];
  for (let i = first; i > to && ids.length < q.limit && i >= 0; i--) {
    if (!hidden?.(keys[i])) ids.push(keys[i]);
  }
  return { ids, offset: Math.min(n - 1 - first, n) };
}

/** A CouchDB-shaped error answer. */
export function couchError(c: Context, status: 400 | 404, error: string, reason: string) {
  return c.json({ error, reason }, status);
}
