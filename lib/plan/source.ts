/**
 * The source interface: what the planner and the crawler need from a sorted registry listing.
 * Implemented over HTTP for CouchDB (`couch_source.ts`) and in memory for tests (`memory_source.ts`).
 *
 * @module
 */

import type { IdOrder } from "./id_order.ts";

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
  /**
   * A view row's value JSON, when too long to be its revision (which is then the value's digest:
   * `view/row_value.ts`); stored like a document. @default none: the revision is the value
   */
  value?: string;
  /**
   * Its document, when the listing was asked for documents (`includeDocs`). Absent on such a row
   * when the listing could not carry it (the answer would have been too large): fetch it by id.
   */
  doc?: DocResult;
}

/** A page of a listing. */
export interface Page {
  /** Rank of the first row: the number of keys that sort before it (or before `start`). */
  offset: number;
  /** The listing's total number of keys at the time of the answer. */
  total: number;
  /** Rows in listing order. */
  rows: Row[];
  /**
   * The limit the registry was really asked for, when the source asked for fewer rows than the
   * caller did (an answer too large for one request was asked again smaller). A page shorter than
   * the caller's limit but as long as this one is not short: more rows may follow.
   */
  limit?: number;
  /**
   * The database's update sequence this answer reflects, when asked for (`updateSeq`) and served:
   * two answers with the same one were computed on the same state of the registry.
   */
  seq?: string;
  /**
   * The range asked for ended within this answer: a row at or past `end` was listed with these
   * (an answer told from a listing without an end), so `[start, end)` holds exactly these rows.
   */
  ended?: boolean;
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
  /** Each row carries its document (only where `docModes` includes `include_docs`). */
  includeDocs?: boolean;
  /**
   * Ask for the database's update sequence the answer reflects (CouchDB's `update_seq=true`), in
   * `Page.seq`. @default false
   */
  updateSeq?: boolean;
}

/**
 * A document's outcome: its JSON text on one line (as served, less the line breaks between
 * tokens that some servers add, so that it can be one NDJSON value), a document over the size
 * limit (recorded, never held in memory), or a permanent error (404, 401/403, 410, not JSON, not
 * an object, empty, a refused redirect, the answer of another document, or transient failures past
 * their attempts). `docRev` is the body's `_rev` when the source read it (null: it has none), so
 * that the crawler can tell a document older than its listed revision. A large document may come
 * as `raw` bytes instead of text (its structure checked, its `_id` and `_rev` read).
 */
export type DocResult =
  | { kind: "doc"; json: string; docRev?: string | null; etag?: string }
  /** A large document's JSON as UTF-8 bytes, on one line (kept as bytes: never held as text). */
  | { kind: "raw"; bytes: Uint8Array; docRev?: string | null; etag?: string }
  /** A document the caller stored as it arrived (see `DocOptions.keep`): its size and parts. */
  | { kind: "stored"; bytes: number; chunks: number; docRev?: string | null; etag?: string }
  | { kind: "tooLarge"; bytes: number }
  /**
   * `later`: the answer may change soon (a 404 from a document host that lags the registry's
   * listing, as npm's does for a package just published; a 304 to `DocOptions.ifNoneMatch`: the
   * host still serves what it served then): asked again before it is recorded.
   *
   * `etag` on a document: the host's `ETag` of what it served, for a conditional ask later (on a
   * `later` error: of the older document that made it one).
   */
  | { kind: "error"; status: number; reason: string; later?: boolean; etag?: string };

/**
 * The bytes a document outcome holds in memory while it waits to be written: a document's text as
 * a JS string (two bytes a code unit), a raw document's bytes; nothing for the other kinds (a
 * stored, too large or refused document is a few numbers).
 */
export function heldDocBytes(doc: DocResult | undefined): number {
  return doc?.kind === "doc" ? 2 * doc.json.length : doc?.kind === "raw" ? doc.bytes.length : 0;
}

/** The bytes the documents of `rows` (listed rows, or items) hold in memory: see {@linkcode heldDocBytes}. */
export function rowsDocBytes(rows: readonly { doc?: DocResult }[]): number {
  return rows.reduce((n, r) => n + heldDocBytes(r.doc), 0);
}

/** How a source serves documents in bulk, best first. */
export type DocMode = "include_docs" | "bulk_get" | "get";

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

/**
 * What a registry was seen to serve of what is optional, learned as it is asked (a probe, or the
 * first refusal: a 400 naming a parameter, a 405), never assumed: `unknown` until then. A source
 * that learns one asks again in a form the registry takes; a crawl remembers them.
 */
export interface LearnedCaps {
  /**
   * What a listing does with `update_seq=true`: `served` (CouchDB, pouchdb-server), `ignored` (an
   * answer without one) or `refused` (a 400; npm's replica).
   */
  listingSeq: "unknown" | "served" | "ignored" | "refused";
  /** POST is taken (`_all_docs` with keys, `_bulk_get`, listings from long keys). */
  post: "unknown" | "yes" | "no";
  /** `GET _all_docs?keys=[…]` is taken (revision lookups where POST is not). */
  getKeys: "unknown" | "yes" | "no";
  /** `_changes` answers carry `pending` (the feed's end then needs no other sign). */
  pending: "unknown" | "yes" | "no";
  /** How documents come, once probed (`docMode`). */
  docs: "unknown" | DocMode;
}

/** Nothing learned yet. */
export const UNKNOWN_CAPS: Readonly<LearnedCaps> = Object.freeze({
  listingSeq: "unknown",
  post: "unknown",
  getKeys: "unknown",
  pending: "unknown",
  docs: "unknown",
});

/** What the source supports. */
export interface Capabilities {
  /** `skip` is accepted. */
  skip: boolean;
  /**
   * Largest page size accepted. Lowered by the source itself when it learns a smaller cap (a 400
   * `limit` answer, an answer over its byte cap), and by callers that see pages come back capped.
   */
  maxPage: number;
}

/**
 * What planning and locating need: a sorted listing whose answers carry ranks. Any rank oracle
 * fits, e.g. an SQL table with an index on its key, where a page from `k` is
 * `select key from t where key >= k order by key limit n` and its `offset` is
 * `select count(*) from t where key < k`.
 */
export interface Listing {
  /** A human description (never contains credentials). */
  readonly description: string;
  /**
   * Where documents come from when that is not the database (`<docsUrl>/<id>`), without
   * credentials. @default the database itself
   */
  readonly docsUrl?: string | null;
  /** Feature flags; `maxPage` may be lowered by the user. */
  readonly capabilities: Capabilities;
  /** Listing requests made so far (each logical request once, retries not counted). */
  readonly requests: number;
  /**
   * How the registry orders ids, once known (after a listing): `utf16` where keys are made from
   * ids (`id_order.ts`), so that whoever shows keys maps them back to the registry's ids, and maps
   * ids a user gives to keys. @default "codepoint"
   */
  readonly idOrder?: IdOrder;
  /** A page of keys in `[start, end)` (or `(end, start]` descending). */
  list(options: ListOptions): Promise<Page>;
}

/** Options of one document request. */
export interface DocOptions {
  /**
   * Stores a large document (`raw`) as it arrives and returns what stands for it: called while
   * the document is the only thing of its answer in memory, and, where the source bounds how many
   * large answers it holds at once, before the next one is read. @default the document is returned
   */
  keep?: (id: string, doc: Extract<DocResult, { kind: "raw" }>) => Promise<DocResult>;
  /**
   * Documents over this many bytes are read as bytes (`raw`, checked by one scan: never text, a
   * parsed object and bytes again, which held a 900 KiB document four times over), so that those
   * `keep` stores go there as they came. @default the source's own (1 MiB for CouchDB sources)
   */
  rawOverBytes?: number;
  /**
   * The `ETag` of an answer seen before (`If-None-Match`): a host that still serves it answers
   * 304 with no body, which is an `error` with status 304 and `later`. @default unconditional
   */
  ifNoneMatch?: string;
}

/** How a request of the feed is asked. */
export interface FeedAsk {
  /** Tries of a transient failure before it is thrown. @default the source's own */
  attempts?: number;
}

/** A sorted, rank-aware registry listing with documents and changes: what a crawl needs. */
export interface Source extends Listing {
  /** Retries made so far after transient failures, where the source retries. */
  readonly retries?: number;
  /** One document by id. Transient failures past their attempts throw `TransientError`. */
  doc(id: string, options?: DocOptions): Promise<DocResult>;
  /** Documents of many ids in one request or a few (`_bulk_get`), in the order asked. */
  bulkDocs?(ids: string[]): Promise<DocResult[]>;
  /** The best way the source serves documents (probed once; `get` when nothing better works). */
  docMode?(): Promise<DocMode>;
  /**
   * The current revision of each id (null: absent or deleted), in the order asked: what the final
   * check holds stored items against. Absent where the listing's keys are not document ids (views).
   */
  revs?(ids: string[]): Promise<(string | null)[]>;
  /**
   * The database's current update sequence (opaque), or null when the source has no change feed.
   * `attempts` bounds the tries of a transient failure (a follower's look fails fast).
   */
  updateSeq(o?: FeedAsk): Promise<string | null>;
  /**
   * The sequence of the feed's newest change, in the feed's own numbering (`_changes?descending=
   * true&limit=1`), whatever the database info says (it may be stuck, cached, ahead, or spelled
   * otherwise). Null when the feed is empty or the registry does not answer it (then only the
   * database info tells). Absent where the source cannot tell.
   */
  feedHead?(o?: FeedAsk): Promise<string | null>;
  /**
   * Changes after `since`, oldest first. `pending` is the registry's count of changes after
   * `lastSeq`, where its answers carry one (0: the feed's end).
   */
  changes(
    since: string,
    limit: number,
    o?: FeedAsk,
  ): Promise<{ rows: ChangeRow[]; lastSeq: string; pending?: number }>;
  /**
   * What the source learned its registry serves (see {@linkcode LearnedCaps}), where it learns:
   * read it for the listing's sequence (`listingSeq`) before relying on `Page.seq`.
   */
  readonly learned?: Readonly<LearnedCaps>;
}

/**
 * The rank of `key`: the number of keys sorting before it. One listing request.
 *
 * @example
 * ```ts
 * const median = await rank(new CouchSource("http://127.0.0.1:5984/registry"), "m");
 * ```
 */
export async function rank(source: Listing, key: string): Promise<number> {
  return (await source.list({ start: key, limit: 1 })).offset;
}

/**
 * `source` with its `list` replaced (the replacement may call the source's own): description,
 * capabilities (the same object, which the source lowers as it learns) and the request count are
 * read from the source whenever asked, unless `requests` counts them otherwise.
 */
export function listingWith(
  source: Listing,
  o: { list: Listing["list"]; requests?: () => number },
): Listing {
  return {
    get description() {
      return source.description;
    },
    get capabilities() {
      return source.capabilities;
    },
    get requests() {
      return o.requests ? o.requests() : source.requests;
    },
    get idOrder() {
      return source.idOrder;
    },
    list: o.list,
  };
}
