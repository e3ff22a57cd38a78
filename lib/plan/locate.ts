/**
 * The rank oracle as a tool: the key at any rank or percentile, exactly, and any key's rank. The
 * planner is one use of it (the keys at ranks floor(i·total/N)); `deno task locate` and
 * `GET /locate` are another. Several ranks asked at once share every probe, as the planner's
 * boundaries do.
 *
 * @module
 */
import { FatalError, InputError, PermanentError } from "../base/errors.ts";
import { BoundarySearch, planByListing, planBySkip, type Point, skipWorks } from "./search/mod.ts";
import { type Listing, listingWith, OPEN_END, type Page } from "./source.ts";
import { idOfKey, keyOfId } from "./id_order.ts";

/** The page size rank searches use by default. */
export const SEARCH_PAGE = 1000;

/**
 * The largest read rank searches make once probes keep missing a target (in a crowd of keys such
 * as `@types/react-…`), where the source allows it: one read of up to this many rows instead of
 * one per page. The npm replica allows 10,000. Measured on 4M synthetic names, N = 56, probes of
 * 1,000 rows: 7.6 -> 6.8 requests per boundary in memory (mean of 3 sets), 7.9 -> 7.1 over HTTP
 * 50 ms away, in about the same time.
 */
export const SEARCH_READ_PAGE = 10_000;

/**
 * Listing requests a rank search starts with in flight (more while answers stay fast, fewer when
 * the registry pushes back): one round trip for the first probes of up to 32 targets instead of
 * several.
 */
export const SEARCH_CONCURRENCY = 32;

/** Options of {@linkcode keysAtRanks}. */
export interface RankSearchOptions {
  /** Largest page to request. @default SEARCH_PAGE (or the source's cap, when lower) */
  maxPage?: number;
  /**
   * Largest read from the nearer end of a bracket once probes keep missing (never below
   * `maxPage`). @default SEARCH_READ_PAGE (or the source's cap, when lower)
   */
  readPage?: number;
  /** Listing requests in flight at first. @default SEARCH_CONCURRENCY */
  concurrency?: number;
  /**
   * Probe with a full page once a bracket is at most this many pages wide.
   * @default WIDE_PAGE_SPAN (`search/boundary_search.ts`)
   */
  widePageSpan?: number;
  /**
   * Called with each rank asked for as soon as its key is found, where offsets are ranks (sources
   * searched by `skip` or by one pass get no calls); rank 0 (the first key) comes first, asked for
   * or not, once the offsets are known to be ranks. @default none
   */
  onFound?: (rank: number, key: string) => void;
  /**
   * What to do when the offsets are not ranks and `skip` is not honoured: `list` every row once
   * (exact keys, a whole pass first), or `throw` an {@linkcode UnrankedError} so that the caller
   * cuts another way (the planner's prior). @default "list"
   */
  unranked?: "list" | "throw";
}

/**
 * The source gives no rank (its offsets are not ranks) and refuses `skip`: the keys at ranks
 * could only be had by listing every row (see {@linkcode RankSearchOptions.unranked}).
 */
export class UnrankedError extends FatalError {
  /** Error name. */
  override name = "UnrankedError";
  /** Keys in the source (its `total_rows`). */
  readonly total: number;
  /** Listing requests made before it was known. */
  readonly requests: number;

  /** The error for a source of `total` keys, after `requests` listing requests. */
  constructor(total: number, requests: number) {
    super("the registry gives no rank (its offsets are not ranks) and refuses skip");
    this.total = total;
    this.requests = requests;
  }
}

/** Keys found at ranks, and what it took. */
export interface RanksFound {
  /** Keys in the source when searched. */
  total: number;
  /** The key at each rank asked, in the order asked. */
  keys: string[];
  /** Listing requests made. */
  requests: number;
  /** How: `rank` (the offset oracle), `skip`, or `listing` (one pass, for sources without ranks). */
  method: "rank" | "skip" | "listing";
  /** Page size used. */
  maxPage: number;
}

/**
 * The key at each of `ranks` (0-based: the key with exactly `r` keys before it), exactly. `ranks`
 * may be a function of the source's total (known after the first request), as the planner's are.
 *
 * Edge cases: an empty source and a rank outside `[0, total)` throw {@linkcode InputError}; a
 * source whose `offset` is not a rank (pouchdb-server answers 0) is detected first and searched by
 * `skip` where it is honoured, else by one pass over the listing; offsets that contradict each
 * other throw {@linkcode FatalError}. Equal ranks are searched once.
 *
 * @example
 * ```ts
 * const source = new CouchSource("http://127.0.0.1:5984/registry");
 * const { keys, total } = await keysAtRanks(source, [0, 1000, 2000]);
 * ```
 */
export async function keysAtRanks(
  shared: Listing,
  wanted: readonly number[] | ((total: number) => readonly number[]),
  options: RankSearchOptions = {},
): Promise<RanksFound> {
  const maxPage = Math.min(options.maxPage ?? SEARCH_PAGE, shared.capabilities.maxPage);
  // Requests are counted here, not by the source's own counter: others may use it meanwhile.
  const source = counted(shared);
  // The first page and the last key are asked for together: one round trip less where the
  // registry is far away. The last key's failure counts only once the first page has rows.
  const last = lastPoint(source).then((p) => ({ p }), (err: unknown) => ({ err }));
  const first = await source.list({ limit: maxPage }).catch(async (err) => {
    await last; // settled either way: nothing of this search runs on after it fails
    throw err;
  });
  const total = first.total;
  if (total === 0 || first.rows.length === 0) throw new InputError("the registry holds no items");
  const lastAnswer = await last;
  if ("err" in lastAnswer) throw lastAnswer.err;
  const ranks = typeof wanted === "function" ? wanted(total) : wanted;
  for (const r of ranks) {
    if (!Number.isInteger(r) || r < 0 || r >= total) {
      throw new InputError(`rank ${r} is outside 0..${total - 1} (the registry holds ${total})`);
    }
  }
  const found = new Map<number, string>();
  const result = (method: RanksFound["method"]): RanksFound => ({
    total,
    keys: ranks.map((r) => found.get(r)!),
    requests: source.requests,
    method,
    maxPage,
  });
  // The last key bounds the search from above. A source that refuses descending listings gets a
  // virtual point above every key instead, at rank `total`, and its rank oracle is checked on the
  // first page.
  const upper = lastAnswer.p.real ? lastAnswer.p : { ...lastAnswer.p, rank: total };
  const todo = [...new Set(ranks)].sort((a, b) => a - b);
  // The search starts beside the check that offsets are ranks (one round trip sooner); nothing it
  // finds is told before the check passes, and it stops asking once the check fails.
  const checked = first.offset === 0
    ? offsetsAreRanks(source, first, upper)
    : Promise.resolve(false);
  let stop = false;
  const gated = listingWith(source, {
    list: (o) =>
      stop ? Promise.reject(new FatalError("the search by ranks was stopped")) : source.list(o),
  });
  const onFound = options.onFound &&
    ((rank: number, key: string) =>
      void checked.then((ok) => ok && options.onFound!(rank, key), () => {}));
  const searching = searchByRanks(gated, first, upper, todo, { ...options, maxPage, onFound });
  searching.catch(() => {}); // awaited below either way
  const ok = await checked.catch(async (err) => {
    stop = true;
    await searching.catch(() => {});
    throw err;
  });
  if (!ok) {
    stop = true;
    await searching.catch(() => {});
    // The offset is not a rank: a binary search would find wrong keys.
    const skips = source.capabilities.skip || await skipWorks(source, first);
    if (!skips && options.unranked === "throw") throw new UnrankedError(total, source.requests);
    const byRank = skips
      ? { keys: await planBySkip(source, todo, maxPage, options.concurrency ?? 8), how: "skip" }
      : { keys: await planByListing(source, todo, maxPage), how: "listing" };
    todo.forEach((r, i) => found.set(r, byRank.keys[i]));
    return result(byRank.how as RanksFound["method"]);
  }
  const keys = await searching;
  todo.forEach((r, i) => found.set(r, keys[i]));
  return result("rank");
}

/**
 * The key at each of `todo` (ascending) by ranks: from the first page, the last key, and a
 * {@linkcode BoundarySearch} for the rest.
 */
async function searchByRanks(
  source: Listing,
  first: Page,
  upper: Point,
  todo: number[],
  options: RankSearchOptions & { maxPage: number },
): Promise<string[]> {
  const found = new Map<number, string>();
  const search: number[] = [];
  if (todo[0] !== 0) options.onFound?.(0, first.rows[0].id);
  for (const r of todo) {
    if (r < first.rows.length) found.set(r, first.rows[r].id);
    else if (upper.real && r === upper.rank) found.set(r, upper.key);
    else search.push(r);
    if (found.has(r)) options.onFound?.(r, found.get(r)!);
  }
  if (search.length) {
    const keys = await new BoundarySearch(source, search, {
      maxPage: options.maxPage,
      readPage: Math.min(options.readPage ?? SEARCH_READ_PAGE, source.capabilities.maxPage),
      pages: [{ start: null, page: first }],
      points: [upper],
      concurrency: options.concurrency ?? SEARCH_CONCURRENCY,
      widePageSpan: options.widePageSpan,
      onFound: options.onFound,
    }).run();
    search.forEach((r, i) => found.set(r, keys[i]));
  }
  return todo.map((r) => found.get(r)!);
}

/**
 * Whether the source's offsets are ranks, checked on one answer at a time so that a registry that
 * changes between two requests (npm's does every few seconds) is not taken for one without ranks:
 * listed from its last key to the end, `offset + rows = total` in that one answer (pouchdb-server
 * answers offset 0). Where descending listings are refused, the second key must be at offset 1.
 * An answer that disagrees is asked again twice (a change may have landed in between).
 */
async function offsetsAreRanks(source: Listing, first: Page, upper: Point): Promise<boolean> {
  if (first.total <= 1) return true;
  for (let attempt = 0; attempt < 3; attempt++) {
    if (upper.real) {
      const limit = Math.min(3, source.capabilities.maxPage);
      const p = await source.list({ start: upper.key, limit });
      if (p.offset > 0 && p.offset + p.rows.length === p.total) return true;
    } else {
      const key = first.rows[1]?.id;
      if (key === undefined) return true;
      const p = await source.list({ start: key, limit: 1 });
      if (p.offset === 1 && p.rows[0]?.id === key) return true;
    }
  }
  return false;
}

/** A view of `source` whose `requests` counts only the list requests made through it. */
function counted(source: Listing): Listing {
  let requests = 0;
  return listingWith(source, {
    list: (options) => (requests++, source.list(options)),
    requests: () => requests,
  });
}

/**
 * The last key, at rank `total - 1` (without `total`: its own answer's total less one); where
 * descending listings are refused, a virtual point above every key at rank `total` (without
 * `total`: `Infinity`, for the caller to place).
 */
export async function lastPoint(source: Listing, total?: number): Promise<Point> {
  try {
    const last = await source.list({ descending: true, limit: 1 });
    const key = last.rows[0]?.id;
    if (key === undefined) throw new FatalError("the registry's descending listing is empty");
    return { key, rank: (total ?? last.total) - 1, real: true };
  } catch (err) {
    if (!(err instanceof PermanentError)) throw err;
    return { key: OPEN_END, rank: total ?? Infinity, real: false };
  }
}

/**
 * The rank of percentile `p` (0 to 100) among `total` keys: floor(p·total/100), and `total - 1`
 * for 100. With an odd total, 50 is the exact median; with an even one, the upper of the two
 * middle keys. @throws InputError for p outside [0, 100].
 *
 * @example
 * ```ts
 * percentileRank(50, 5); // 2: the median of five keys
 * percentileRank(100, 5); // 4: the last
 * ```
 */
export function percentileRank(p: number, total: number): number {
  if (!Number.isFinite(p) || p < 0 || p > 100) {
    throw new InputError(`percentile must be a number from 0 to 100, got ${p}`);
  }
  return Math.min(total - 1, Math.floor((p * total) / 100));
}

/** What to locate: ranks, or percentiles of the total (known after the first request). */
export type RankQuery = { ranks: number[] } | { percentiles: number[] };

/**
 * Parses a comma-separated list of ranks (whole numbers) or percentiles (0 to 100), as
 * `deno task locate` and `GET /locate` take them. `name` is how errors call the parameter.
 * @throws InputError for an empty value, a value out of range, or more than `maxValues` values.
 *
 * @example
 * ```ts
 * parseRankQuery("percentile", "1, 50,99"); // { percentiles: [1, 50, 99] }
 * parseRankQuery("rank", "0,1000"); // { ranks: [0, 1000] }
 * parseRankQuery("percentile", "101"); // throws InputError
 * ```
 */
export function parseRankQuery(
  kind: "rank" | "percentile",
  raw: string,
  options: { name?: string; maxValues?: number } = {},
): RankQuery {
  const name = options.name ?? kind;
  const parts = raw.split(",").map((s) => s.trim());
  if (parts.length > (options.maxValues ?? Infinity)) {
    throw new InputError(`${name}: at most ${options.maxValues} values`);
  }
  if (parts.some((p) => p === "")) throw new InputError(`${name} has an empty value: "${raw}"`);
  if (kind === "rank") {
    return {
      ranks: parts.map((r) => {
        if (!/^\d{1,15}$/.test(r)) {
          throw new InputError(`${name} must be a whole number, got "${r}"`);
        }
        return Number(r);
      }),
    };
  }
  return {
    percentiles: parts.map((p) => {
      // Decimal only: `Number` would also take "0x10", "1e1" or "Infinity".
      const n = /^\d{1,3}(\.\d{1,9})?$/.test(p) ? Number(p) : NaN;
      if (!Number.isFinite(n) || n < 0 || n > 100) {
        throw new InputError(`${name} must be from 0 to 100, got "${p}"`);
      }
      return n;
    }),
  };
}

/** One key located: its rank (and the percentile asked, when one was). */
export interface Located {
  /** The percentile asked for, when the query was by percentile. */
  percentile?: number;
  /** Keys before it. */
  rank: number;
  /** The key. */
  key: string;
}

/**
 * The keys a {@linkcode RankQuery} asks for, in the order asked, with the search's figures. See
 * {@linkcode keysAtRanks} for the edge cases.
 *
 * @example
 * ```ts
 * const source = MemorySource.fromKeys(["a", "b", "c", "d", "e"]);
 * const { located } = await locateRanks(source, parseRankQuery("percentile", "50,100"));
 * // located[0].key === "c" (the median), located[1].key === "e"
 * ```
 */
export async function locateRanks(
  source: Listing,
  query: RankQuery,
  options: RankSearchOptions = {},
): Promise<Omit<RanksFound, "keys" | "maxPage"> & { located: Located[] }> {
  const ranksOf = (total: number) =>
    "ranks" in query ? query.ranks : query.percentiles.map((p) => percentileRank(p, total));
  const found = await keysAtRanks(source, ranksOf, options);
  const ranks = ranksOf(found.total);
  // Keys are shown as the registry's own ids, whatever order the source carries them in.
  const located = found.keys.map((key, i) => ({
    ...("percentiles" in query ? { percentile: query.percentiles[i] } : {}),
    rank: ranks[i],
    key: idOfKey(key, source.idOrder),
  }));
  return { total: found.total, located, requests: found.requests, method: found.method };
}

/** Where a key sits. */
export interface KeyPlace {
  /** The key asked about. */
  key: string;
  /** Keys sorting before it. */
  rank: number;
  /** `100 · rank / total`. */
  percentile: number;
  /** True when the key itself is in the source. */
  present: boolean;
  /** The first key at or after it, null when none is. */
  next: string | null;
  /** Keys in the source. */
  total: number;
}

/**
 * The rank and percentile of each key: one listing request each when the source's offsets are
 * ranks. A source whose offsets are not (checked first) is counted by paging from the start.
 *
 * @example
 * ```ts
 * const source = MemorySource.fromKeys(["a", "b", "c", "d"]);
 * const [place] = await locateKeys(source, ["c"]);
 * // place: { key: "c", rank: 2, percentile: 50, present: true, next: "c", total: 4 }
 * ```
 */
export async function locateKeys(source: Listing, keys: readonly string[]): Promise<KeyPlace[]> {
  const first = await source.list({ limit: 2 });
  if (first.total === 0 || first.rows.length === 0) {
    throw new InputError("the registry holds no items");
  }
  const second = first.rows[1]?.id;
  const rankOk = first.offset === 0 &&
    (second === undefined || (await source.list({ start: second, limit: 1 })).offset === 1);
  const out: KeyPlace[] = [];
  // Keys asked and shown are the registry's ids; the source's order is known after a listing.
  const order = source.idOrder;
  for (const id of keys) {
    const key = keyOfId(id, order);
    const page = await source.list({ start: key, end: rankOk ? null : OPEN_END, limit: 1 });
    const rank = rankOk ? page.offset : await countBefore(source, key);
    const total = page.total;
    const at = page.rows[0]?.id ?? null;
    const next = at === null ? null : idOfKey(at, order);
    out.push({ key: id, rank, percentile: (100 * rank) / total, present: at === key, next, total });
  }
  return out;
}

/** Keys before `key`, counted by paging (for sources without a rank oracle). */
async function countBefore(source: Listing, key: string): Promise<number> {
  // Each request's last row is only the next start, so `limit` stays within the source's cap.
  const limit = Math.max(1, Math.min(SEARCH_PAGE, source.capabilities.maxPage) - 1);
  let n = 0;
  let start: string | null = null;
  for (;;) {
    const page = await source.list({ start, end: key, limit: limit + 1 });
    const rows = page.rows.slice(0, limit);
    n += rows.length;
    if (page.rows.length <= limit) return n;
    start = page.rows[limit].id;
  }
}
