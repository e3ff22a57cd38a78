/**
 * What the crawl room works with: its slice of the engine's environment (`dispatch/env.ts` builds
 * the whole, and this room may not import it). Each function of the room takes the `Pick` of
 * {@linkcode CrawlContext} it needs, as BullMQ's components state theirs, instead of a deps type
 * of its own.
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import type { Source } from "../../plan/source.ts";
import type { ListingCache } from "../../sources/cache/mod.ts";
import type { ShardNotices } from "../store/mod.ts";

/** How work reaches workers: a queue message, or nothing (lease workers find it by polling). */
export interface Dispatcher {
  /** Makes sure the shard will be worked on (a wake-up; duplicates are harmless). */
  dispatch(crawlId: string, shardId: number, options?: { delayMs?: number }): Promise<void>;
  /** Makes sure a crawl in `planning` gets planned. */
  plan(crawlId: string, options?: { delayMs?: number }): Promise<void>;
}

/** The crawl room's slice of the engine's environment (see the module comment). */
export interface CrawlContext {
  /** The store. */
  kv: Deno.Kv;
  /** The crawl's source. */
  source: Source;
  /** Where new work goes (planned shards, split-off children). */
  dispatcher: Dispatcher;
  /** Time and timers: the environment's. */
  clock: Clock;
  /**
   * This worker's name in the leases it takes (planning's, the feed's, the final check's): named
   * by the environment (`Env.ownerName`), so that its leases end with its process.
   */
  owner: string;
  /** Lease length of shards, the feed and the final check, in milliseconds. */
  leaseMs: number;
  /** The planning lease, renewed while planning runs, in milliseconds. */
  planLeaseMs: number;
  /** Planning attempts failing transiently before the crawl fails. */
  maxPlanAttempts: number;
  /** Documents above this many bytes are recorded as too large. */
  maxDocBytes: number;
  /**
   * The process's listing cache: the planner's reads are kept there, and shards' first pages are
   * listed ahead into it while the plan is searched (registries with ranks; see `_prefetch.ts`).
   * @default none: shards list everything once planned
   */
  listings?: ListingCache;
  /** Where a split posts its victim's new end for the victim's worker here. @default none */
  notices?: ShardNotices;
}
