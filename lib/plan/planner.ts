/**
 * The rank-balanced planner: finds the N-1 keys at ranks floor(i·total/N) exactly, so that every
 * shard holds floor or ceil of total/N items, with as few listing requests as possible.
 *
 * How: `startkey=k&limit=m` answers rank(k) and the real keys at ranks rank(k)..rank(k)+m-1. Every
 * answer becomes a known (key, rank) point shared by all boundary searches. Each search brackets its
 * target rank between two known points, interpolates a probe key between them over the alphabet seen
 * so far (safeguarded towards bisection when interpolation stalls), and once the bracket spans at most
 * one page it reads that page and takes the key at the exact rank. Searches run concurrently, in an
 * order that spreads the first probes over the whole key space.
 *
 * The plan layer (`lib/plan/`): key order, the source interface, this planner and its boundary
 * search, the baselines it is measured against, plan files. It knows neither HTTP nor KV.
 *
 * @module
 */
import { FatalError, InputError, PermanentError } from "../base/errors.ts";
import { isLongKey, MAX_CUT_UNITS, separator } from "./keys.ts";
import { keysAtRanks, UnrankedError } from "./locate.ts";
import { priorCuts } from "./npm_prior.ts";
import type { Listing } from "./source.ts";
import { allSettledOrThrow } from "../base/pool.ts";

/** The page size planning uses by default (see {@linkcode PlanOptions.maxPage}). */
export const PLAN_PAGE = 1000;

/** One shard: keys k with start <= k < end (`null` = open). */
export interface ShardSpec {
  /** First key (inclusive); null = the start of the key space. */
  start: string | null;
  /** End key (exclusive); null = the end of the key space. */
  end: string | null;
  /**
   * Items in [start, end) when planned (an estimate in a plan by `prior`: the registry gave no
   * rank to count them by).
   */
  items: number;
}

/** A plan, as `deno task plan --json` prints it. */
export interface Plan {
  /** Items in the registry when planned. */
  total: number;
  /** The shards, contiguous, in key order. */
  shards: ShardSpec[];
  /** Listing requests the planner made. */
  requests: number;
  /**
   * How ranks were found: `rank` (offset oracle), `skip`, `listing` (a full pass), or `prior`
   * (none: cut where a prior of npm's names puts equal shares, `npm_prior.ts`).
   */
  method: "rank" | "skip" | "listing" | "prior";
  /** Page size used. */
  maxPage: number;
}

/** Options of {@linkcode planShards}. */
export interface PlanOptions {
  /**
   * Largest page to request. Planning reads few rows of each answer, so pages larger than
   * {@linkcode PLAN_PAGE} mostly cost bytes: 10,000-row probes took 3x longer than 1,000-row
   * ones against 4M names 50 ms away, with half the requests. @default PLAN_PAGE (or the
   * source's cap, when lower)
   */
  maxPage?: number;
  /**
   * Largest read once probes keep missing a boundary (see `SEARCH_READ_PAGE` in `locate.ts`).
   * @default SEARCH_READ_PAGE (or the source's cap, when lower)
   */
  readPage?: number;
  /**
   * Listing requests in flight at first (more while answers stay fast).
   * @default SEARCH_CONCURRENCY
   */
  concurrency?: number;
  /**
   * Probe with a full page once a bracket is at most this many pages wide.
   * @default WIDE_PAGE_SPAN (`search/boundary_search.ts`)
   */
  widePageSpan?: number;
  /**
   * Called with each shard's start as soon as it is final (`null` for the first shard, once the
   * offsets are known to be ranks), in no particular order, while the other boundaries are still
   * searched: a crawler can start listing there. Sources planned by `skip` or by one pass get no
   * calls. @default none
   */
  onShardStart?: (start: string | null) => void;
  /**
   * A registry that gives no rank and refuses `skip`: cut at once where a prior of npm's names
   * puts equal shares (`prior`: each shard's count an estimate, the crawl starts without a pass),
   * or at the exact ranks found by listing every row first (`listing`). @default "prior"
   */
  withoutRanks?: "prior" | "listing";
}

/**
 * The target ranks floor(i·total/N) for i = 1..N-1.
 *
 * @example
 * ```ts
 * targetRanks(10, 4); // [2, 5, 7]: shards of 2, 3, 2 and 3 items
 * ```
 */
export function targetRanks(total: number, shards: number): number[] {
  const out: number[] = [];
  for (let i = 1; i < shards; i++) out.push(Math.floor((i * total) / shards));
  return out;
}

/** Shards from boundary keys at the target ranks. */
export function shardsFromBoundaries(total: number, keys: string[], ranks: number[]): ShardSpec[] {
  const starts = [null, ...keys];
  const ends = [...keys, null];
  const rs = [0, ...ranks, total];
  return starts.map((start, i) => ({ start, end: ends[i], items: rs[i + 1] - rs[i] }));
}

/**
 * Plans `shards` shards of exactly balanced item counts over `source`.
 *
 * Edge cases: an empty source, `shards < 1` or `shards > total` throw {@linkcode InputError}; a
 * source whose `offset` is not a rank (pouchdb-server answers 0) is detected before any boundary is
 * searched and planned by `skip` where the source allows it, else by one pass over the listing;
 * offsets that contradict each other during the search throw `FatalError`.
 *
 * @example
 * ```ts
 * const source = new CouchSource("http://127.0.0.1:5984/registry");
 * const plan = await planShards(source, 56);
 * // plan.shards[i] = { start, end, items }: items is floor or ceil of plan.total / 56
 * ```
 */
export async function planShards(
  source: Listing,
  shards: number,
  options: PlanOptions = {},
): Promise<Plan> {
  if (!Number.isInteger(shards) || shards < 1) {
    throw new InputError(`shard count must be a whole number >= 1, got ${shards}`);
  }
  const maxPage = Math.min(options.maxPage ?? PLAN_PAGE, source.capabilities.maxPage);
  let targets: number[] = [];
  // Each boundary's bound (cut short for a long id) is found once, whether streamed or not.
  const bounds = new Map<string, Promise<string>>();
  const boundOf = (key: string) => {
    let cut = bounds.get(key);
    if (!cut) bounds.set(key, cut = shortCut(source, key));
    return cut;
  };
  const onShardStart = options.onShardStart;
  const atRanks = (total: number) => {
    if (shards > total) {
      throw new InputError(
        `cannot cut ${total} items into ${shards} shards (more shards than items)`,
      );
    }
    return targets = targetRanks(total, shards);
  };
  let found;
  try {
    found = await keysAtRanks(source, atRanks, {
      ...options,
      maxPage,
      unranked: (options.withoutRanks ?? "prior") === "prior" ? "throw" : "list",
      onFound: onShardStart && ((rank, key) => {
        if (rank === 0) return onShardStart(null);
        // A failed cut is the plan's failure (below); here it only means no early start.
        boundOf(key).then(onShardStart, () => {});
      }),
    });
  } catch (err) {
    if (!(err instanceof UnrankedError)) throw err;
    atRanks(err.total);
    return priorPlan(err.total, shards, { requests: err.requests, maxPage });
  }
  const keys = await allSettledOrThrow(found.keys.map(boundOf));
  return {
    total: found.total,
    shards: shardsFromBoundaries(found.total, keys, targets),
    requests: found.requests,
    method: found.method,
    maxPage,
  };
}

/**
 * A plan of `shards` shares of a prior of npm's names (`npm_prior.ts`) over a registry of `total`
 * keys that gives no rank: cuts known without a request, each shard's count an even share of the
 * total (an estimate). Fewer shards when the prior's shares run out (over 4,096).
 */
function priorPlan(
  total: number,
  shards: number,
  o: { requests: number; maxPage: number },
): Plan {
  const cuts = priorCuts(shards);
  const starts = [null, ...cuts];
  const ends = [...cuts, null];
  const ranks = [0, ...targetRanks(total, starts.length), total];
  return {
    total,
    shards: starts.map((start, i) => ({ start, end: ends[i], items: ranks[i + 1] - ranks[i] })),
    requests: o.requests,
    method: "prior",
    maxPage: o.maxPage,
  };
}

/**
 * A bound that cuts where `key` does: `key` itself, or for a long id (see `isLongKey`) the
 * shortest key between it and the key before it (one descending request), so that shard bounds
 * stay short enough for URLs and shard records. Sources that refuse descending listings keep the
 * key. @throws FatalError when no cut key is short enough.
 */
export async function shortCut(source: Listing, key: string): Promise<string> {
  if (!isLongKey(key)) return key;
  let cut = key;
  try {
    const page = await source.list({ start: key, descending: true, limit: 2 });
    if (page.rows[0]?.id === key && page.rows[1]) cut = separator(page.rows[1].id, key);
  } catch (err) {
    if (!(err instanceof PermanentError)) throw err;
  }
  if (cut.length > MAX_CUT_UNITS) {
    throw new FatalError(
      `an id of ${key.length} characters falls on a shard bound and no key of at most ` +
        `${MAX_CUT_UNITS} characters cuts there`,
    );
  }
  return cut;
}
