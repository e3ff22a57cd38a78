/**
 * The source interface: what the planner and the crawler need from a sorted registry listing.
 * Implemented over HTTP for CouchDB (`couch_source.ts`) and in memory for tests (`memory_source.ts`).
 *
 * @module
 */

/**
 * A key above every real key, for sources that need an explicit end: three U+10FFFF (the last code
 * point, a noncharacter); only ids starting with three of them could be missed. pouchdb-server
 * drops ids whose first character is above U+00FF from listings without an end key, so sources
 * whose offsets are not ranks (pouchdb's are not) are always listed with one.
 */
export const OPEN_END = "\u{10FFFF}\u{10FFFF}\u{10FFFF}";

/** One listed item. */
export interface Row {
  /** The item's id (= its key in `_all_docs`). */
  id: string;
  /** Its current revision. */
  rev: string;
}

/** A page of a listing. */
export interface Page {
  /** Rank of the first row: the number of keys that sort before it (or before `start`). */
  offset: number;
  /** The listing's total number of keys at the time of the answer. */
  total: number;
  /** Rows in listing order. */
  rows: Row[];
}

/** What a listing request asks for. */
export interface ListOptions {
  /** First key (inclusive); `null` or absent = from the beginning (or the end when descending). */
  start?: string | null;
  /** End key (exclusive); `null` or absent = to the end. */
  end?: string | null;
  /** Maximum number of rows. */
  limit: number;
  /** List in reverse order. @default false */
  descending?: boolean;
  /** Skip this many rows first (only where `capabilities.skip`). @default 0 */
  skip?: number;
}

/** A fetched document: its raw JSON text (stored byte-for-byte) or a permanent miss. */
export type DocResult =
  | { ok: true; json: string }
  | { ok: false; status: number; reason: string };

/** One entry of a change feed. */
export interface ChangeRow {
  /** Opaque sequence of the change. */
  seq: string;
  /** Document id. */
  id: string;
  /** Revision after the change. */
  rev: string;
  /** True for a deletion. */
  deleted: boolean;
}

/** What the source supports. */
export interface Capabilities {
  /** `skip` is accepted. */
  skip: boolean;
  /** Largest page size accepted. */
  maxPage: number;
}

/** A sorted, rank-aware registry listing. */
export interface Source {
  /** A human description (never contains credentials). */
  readonly description: string;
  /** Feature flags; `maxPage` may be lowered by the user. */
  readonly capabilities: Capabilities;
  /** Listing requests made so far (each logical request once, retries not counted). */
  readonly requests: number;
  /** A page of keys in `[start, end)` (or `(end, start]` descending). */
  list(options: ListOptions): Promise<Page>;
  /** One document by id. */
  doc(id: string): Promise<DocResult>;
  /** The database's current update sequence (opaque), or null when the source has no change feed. */
  updateSeq(): Promise<string | null>;
  /** Changes after `since`, oldest first. */
  changes(since: string, limit: number): Promise<{ rows: ChangeRow[]; lastSeq: string }>;
}

/**
 * The rank of `key`: the number of keys sorting before it. One listing request.
 *
 * @example
 * ```ts
 * const median = await rank(new CouchSource("http://127.0.0.1:5984/registry"), "m");
 * ```
 */
export async function rank(source: Source, key: string): Promise<number> {
  return (await source.list({ start: key, limit: 1 })).offset;
}
