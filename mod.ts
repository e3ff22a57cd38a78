/**
 * rankcrawl as a library: the rank oracle of a sorted listing, and what it makes possible.
 *
 * A CouchDB listing answers `offset` = the number of keys before any key you start from: a
 * monotonic `rank()`. With it, the key at any rank is found by search, without reading what lies
 * between: cut points for shards of exactly equal item count ({@linkcode planShards}), the key at a
 * percentile ({@linkcode keysAtRanks}, {@linkcode percentileRank}), a key's position
 * ({@linkcode locateKeys}). Any other rank oracle works too: implement {@linkcode Listing}, four
 * members, e.g. over an SQL table with an index, where `rank(k) = count(*) where key < k`.
 *
 * @example
 * ```ts
 * import { CouchSource, keysAtRanks, percentileRank, planShards } from "./mod.ts";
 *
 * const source = new CouchSource("https://replicate.npmjs.com/registry");
 * const plan = await planShards(source, 56); // 56 shards, each floor or ceil of total / 56
 * const { keys } = await keysAtRanks(source, (total) => [percentileRank(50, total)]);
 * console.log(plan.shards[1].start, "median:", keys[0]);
 * ```
 *
 * @module
 */
export {
  type Capabilities,
  type ChangeRow,
  type DocMode,
  type DocOptions,
  type DocResult,
  type FeedAsk,
  type LearnedCaps,
  type Listing,
  type ListOptions,
  OPEN_END,
  type Page,
  rank,
  type Row,
  type Source,
  UNKNOWN_CAPS,
} from "./lib/plan/source.ts";
export { compareKeys, sortKeys } from "./lib/plan/keys.ts";
export { idOfKey, type IdOrder, keyOfId } from "./lib/plan/id_order.ts";
export {
  type Plan,
  PLAN_PAGE,
  type PlanOptions,
  planShards,
  type ShardSpec,
  targetRanks,
} from "./lib/plan/planner.ts";
export {
  type KeyPlace,
  keysAtRanks,
  type Located,
  locateKeys,
  locateRanks,
  parseRankQuery,
  percentileRank,
  type RankQuery,
  type RankSearchOptions,
  type RanksFound,
  SEARCH_PAGE,
} from "./lib/plan/locate.ts";
export { type PlanPicture, planSvg } from "./lib/plan/plan_svg.ts";
export { CouchSource, type CouchSourceOptions } from "./lib/sources/couch/mod.ts";
export {
  type BreakerOutcome,
  HostBreaker,
  type HostBreakerOptions,
  type HostOutage,
  type HostPace,
  type HostPause,
  HostPausedError,
  type HttpOptions,
  outageLine,
  type PaceOutcome,
  Pacer,
  type PacerOptions,
  type PaceState,
  parseHeader,
  type RequestHeader,
  USER_AGENT,
} from "./lib/sources/http/mod.ts";
export { ByteBudget } from "./lib/base/byte_budget.ts";
export { type Clock, SYSTEM_CLOCK } from "./lib/base/clock.ts";
export { MemorySource, type MemorySourceOptions } from "./lib/sources/memory_source.ts";
export { SqliteSource } from "./lib/sources/sql/mod.ts";
export { mapPool, Semaphore } from "./lib/base/pool.ts";
export {
  CrawlerError,
  FatalError,
  InputError,
  neverRetried,
  PermanentError,
  type Retry,
  TransientError,
} from "./lib/base/errors.ts";
