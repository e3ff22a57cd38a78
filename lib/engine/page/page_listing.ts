/**
 * Reading one page of a shard's range, and deciding — only from proof — whether the range is done.
 *
 * A page asks for one row more than it commits: that row's key is the next cursor, so no `skip`
 * is ever needed. A page that comes back short is NOT taken as the end: registries and proxies cap
 * `limit` without a word. The end is proven only by an empty answer for `[cursor, end)`, by a row
 * at or past the end in the same answer as the rows before it (asked for without an end key when
 * the plan says the end is within the page), or, where offsets are ranks, by
 * `offset + rows = total_rows` (no key after the last row at all). A short
 * page that proves nothing is committed and the next page starts strictly after its last row; if
 * that next page has rows, the registry's cap was the short page's length, and it is learned.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import { compareKeys, isLongKey, keyHash, MAX_CUT_UNITS, separator } from "../../plan/keys.ts";
import {
  type DocMode,
  type ListOptions,
  OPEN_END,
  type Page,
  type Row,
  type Source,
} from "../../plan/source.ts";
import type { CrawlRecord, ShardRecord } from "../store/mod.ts";

/**
 * Where a shard's next page starts: at `cursor` (strictly after it when `after`), without the row
 * whose long id hashes to `skip` (a long id is never a cursor: a short key before it stands in,
 * and the row itself, already committed, is named by its hash).
 */
export interface NextCursor {
  /** The key listing starts from. */
  cursor: string;
  /** The cursor's own row is committed: read strictly after it. */
  after: boolean;
  /** The long id of a committed row at the cursor, as `keyHash` names it; null: none. */
  skip?: string | null;
}

/**
 * The cursor for a page starting at row `key` (not yet committed), where `lower` is the last key
 * before it (the last row committed, or the shard's cursor): `key` itself, or for a long id the
 * shortest key between them.
 * @throws FatalError when the two share a prefix longer than any cursor may be.
 */
export function cursorAt(lower: string | null, key: string): NextCursor {
  if (!isLongKey(key)) return { cursor: key, after: false, skip: null };
  const cut = separator(lower, key);
  if (cut.length > MAX_CUT_UNITS) {
    throw new FatalError(
      `two neighbouring ids share their first ${
        cut.length - 1
      } characters; rankcrawl cuts between ` +
        `ids only where they differ within ${MAX_CUT_UNITS}`,
    );
  }
  return { cursor: cut, after: false, skip: null };
}

/** The cursor after row `key`, committed last (`lower`: the key before it), on a short page. */
function cursorAfter(lower: string | null, key: string): NextCursor {
  if (!isLongKey(key)) return { cursor: key, after: true, skip: null };
  return { ...cursorAt(lower, key), skip: keyHash(key) };
}

/** What a listing of one page says. */
export interface ListedPage {
  /** Rows to commit, in key order, all inside the shard's range. */
  rows: Row[];
  /** Where the next page starts, or null when the range is proven done. */
  next: NextCursor | null;
  /** How the end was proven (`empty` answer, or `ranks`), when `next` is null. */
  proof?: "empty" | "ranks" | "sentinel";
  /** This page came back short without proving the end: its length, a possible cap. */
  shortOf?: number;
  /** The previous page's short length turned out to be the registry's cap. */
  learnedCap?: number;
  /** The rank of the page's first key, and the listing's total, when offsets are ranks. */
  offset: number;
  /** The listing's total when read. */
  total: number;
}

/**
 * Rows a process keeps in flight over all its shards' pages (each shard lists one page ahead):
 * about 10 MB of rows, and 4,000 a page for 16 shards (a keys-only page is one or two blocks).
 */
export const ROWS_IN_FLIGHT = 64_000;

/**
 * The most rows a listing request of this crawl asks for: the one place where the page cap is
 * decided, as the smallest of what the user allowed (`maxPage`), what the crawl learned from pages
 * cut short without a word (`pageCap`, see {@linkcode listPage}), and what the source learned the
 * registry accepts (`capabilities.maxPage`, lowered by the source itself on a 400 naming `limit`).
 */
export function pageLimit(crawl: CrawlRecord, source: Source): number {
  return Math.min(crawl.maxPage, crawl.pageCap ?? Infinity, source.capabilities.maxPage);
}

/**
 * Rows committed per page: the listing page less the row that carries the next cursor, within
 * {@linkcode pageLimit}; for keys-only crawls within an even share of {@linkcode ROWS_IN_FLIGHT}
 * (at least 500): with every shard listing one page ahead, latency hides behind KV writes anyway,
 * and memory stays bounded however many rows a page may hold. With documents, as many as the way
 * they come (`docMode`, @default "get") handles well: 500 carried by the listing, 1,000 a bulk
 * read, and about 25 round trips of the shard's concurrency fetched one by one.
 */
export function rowsPerPage(
  crawl: CrawlRecord,
  source: Source,
  options: { docMode?: DocMode } = {},
): number {
  const cap = pageLimit(crawl, source);
  // One row for the next cursor, one for the cursor's own row when reading strictly after it.
  const page = Math.max(1, cap - 2);
  const mode = options.docMode ?? "get";
  const want = !crawl.docs
    ? Math.max(500, Math.floor(ROWS_IN_FLIGHT / Math.max(1, crawl.shards)))
    : mode === "include_docs"
    ? 500
    : mode === "bulk_get"
    ? 1000
    : Math.max(50, crawl.concurrency * 25);
  return Math.max(1, Math.min(page, want));
}

/**
 * The request for the next page of `shard`: from its cursor, within its end (an explicit one for
 * sources planned without ranks: pouchdb drops ids above U+00FF from unbounded listings), or past
 * it by `sentinel` rows when the end is likely within the page (null otherwise). One row more for
 * the next cursor, and for each committed row the answer may repeat.
 */
function pageRequest(
  crawl: CrawlRecord,
  shard: ShardRecord,
  o: { size: number; includeDocs?: boolean },
): { request: ListOptions; sentinel: number | null } {
  const extra = (shard.after ? 1 : 0) + (shard.skip ? 1 : 0);
  const sentinel = sentinelRows(crawl, shard, o.size);
  const end = sentinel !== null
    ? null
    : shard.end ?? (crawl.planMethod === "rank" ? null : OPEN_END);
  const request = {
    start: shard.cursor,
    end,
    limit: (sentinel ?? o.size + 1) + extra,
    ...(o.includeDocs ? { includeDocs: true } : {}),
  };
  return { request, sentinel };
}

/**
 * The answer's rows from the cursor on: without the cursor's own row when reading strictly after
 * it, and without the committed long id the cursor's `skip` names.
 */
function fromCursor(listed: Row[], shard: ShardRecord): Row[] {
  let rows = listed;
  if (shard.after && rows[0]?.id === shard.cursor) rows = rows.slice(1);
  if (shard.skip) {
    const at = rows.findIndex((r) => isLongKey(r.id) && keyHash(r.id) === shard.skip);
    if (at >= 0) rows = [...rows.slice(0, at), ...rows.slice(at + 1)];
  }
  return rows;
}

/**
 * Rows to ask for, without an end key, when the shard's end is likely within this page (its plan
 * leaves fewer rows than a page): those it expects, a margin for changes, and the first row at or
 * past its end, which proves the end in the same answer. Null: list within the end as usual (no
 * ranks, an open end, or more than a page to go).
 */
function sentinelRows(crawl: CrawlRecord, shard: ShardRecord, size: number): number | null {
  if (crawl.planMethod !== "rank" || shard.end === null) return null;
  const left = Math.max(0, shard.expected - shard.items);
  const margin = Math.max(SENTINEL_MARGIN_ROWS, Math.ceil(shard.expected / 100));
  return left + margin <= size ? left + margin + 1 : null;
}

/**
 * Rows beyond a shard's expected count asked for with its last page (at least; 1% of the count
 * where that is more): the registry may have gained some since planning.
 */
export const SENTINEL_MARGIN_ROWS = 16;

/**
 * Lists the next page of `shard`: up to `size` rows to commit from its cursor (strictly after it
 * when `after`), within its end. Sources planned without ranks get an explicit end key (pouchdb
 * drops ids above U+00FF from unbounded listings).
 */
export async function listPage(
  source: Source,
  crawl: CrawlRecord,
  shard: ShardRecord & { shortOf?: number | null },
  options: {
    size: number;
    includeDocs?: boolean;
    /** An answer listed earlier for this request (the listing cache's), if there is one. */
    cached?: (request: ListOptions) => Promise<Page | undefined>;
  },
): Promise<ListedPage> {
  const { request, sentinel } = pageRequest(crawl, shard, options);
  const ask = request.limit;
  const page = await options.cached?.(request) ?? await source.list(request);
  const got = page.rows.length;
  const rows = fromCursor(page.rows, shard);
  const before = (i: number) => i > 0 ? rows[i - 1].id : shard.cursor;
  const learnedCap = shard.shortOf && rows.length > 0 ? shard.shortOf : undefined;
  const base = { offset: page.offset, total: page.total, learnedCap };
  if (page.ended && rows.length <= options.size) {
    return { ...base, rows, next: null, proof: "sentinel" };
  }
  if (sentinel !== null) {
    // A row at or past the end, listed in the same answer as the rows before it: nothing else
    // lies between them, as an empty answer would prove, one round trip sooner.
    const past = rows.findIndex((r) => compareKeys(r.id, shard.end!) >= 0);
    if (past >= 0) {
      // Rows past the end say nothing of a cap: only rows inside the range followed a short page.
      const inside = { ...base, learnedCap: past > 0 ? learnedCap : undefined };
      return { ...inside, rows: rows.slice(0, past), next: null, proof: "sentinel" };
    }
  }
  // The source may have asked the registry for fewer rows than we did (an answer too large):
  // a page as long as that is full, not short, and its last row is where the next one starts.
  const asked = Math.min(ask, page.limit ?? ask);
  if (got >= asked && rows.length > 0) {
    const keep = Math.min(options.size, rows.length - 1);
    return { ...base, rows: rows.slice(0, keep), next: cursorAt(before(keep), rows[keep].id) };
  }
  if (rows.length === 0) return { ...base, rows, next: null, proof: "empty" };
  if (crawl.planMethod === "rank" && page.offset + got === page.total) {
    return { ...base, rows, next: null, proof: "ranks" };
  }
  const last = rows.length - 1;
  return { ...base, rows, next: cursorAfter(before(last), rows[last].id), shortOf: got };
}
