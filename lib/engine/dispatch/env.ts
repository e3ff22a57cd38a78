/**
 * The engine's environment: what every worker of a process uses (the store, the sources, the
 * dispatcher, one clock, one source of randomness, the process's shared budgets), built once by
 * {@linkcode engineEnv} with every default resolved here ({@linkcode ENGINE_DEFAULTS}), so that
 * nothing downstream picks a default of its own. `createRuntime` builds it for a process; tests
 * build one with what they vary.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { PLANNING_RETRY, SHARD_RETRY } from "../../base/retry_policy.ts";
import type { Source } from "../../plan/source.ts";
import type { ListingCache } from "../../sources/cache/mod.ts";
import type { CrawlContext, Dispatcher, RebalanceOptions } from "../crawl/mod.ts";
import { DEFAULT_MAX_DOC_BYTES } from "../items/mod.ts";
import type { CrawlSlots, DocMemory } from "../page/mod.ts";
import { type CrawlRecord, LEASE_MS, type ShardNotices } from "../store/mod.ts";

/** The engine's clock: `clock`, else the system's (the one place that default is decided). */
export function envClock(clock?: Clock): Clock {
  return clock ?? SYSTEM_CLOCK;
}

/** The engine's defaults, each decided here (their reasons are with the constants named). */
export const ENGINE_DEFAULTS = {
  /** Shard lease length, in milliseconds (`store/leases.ts`). */
  leaseMs: LEASE_MS,
  /** Planning attempts failing transiently before a crawl fails (`PLANNING_RETRY`). */
  maxPlanAttempts: PLANNING_RETRY.maxAttempts,
  /**
   * The planning lease, renewed a quarter of it while planning runs, in milliseconds: shorter than
   * a shard's, since nothing else of the crawl moves while its planner is gone.
   */
  planLeaseMs: 20_000,
  /** Failed attempts of a shard in a row before the crawl fails (`SHARD_RETRY`). */
  maxShardFailures: SHARD_RETRY.maxFailures,
  /** Documents above this many bytes are recorded as too large (`items/item_store.ts`). */
  maxDocBytes: DEFAULT_MAX_DOC_BYTES,
  /** How often a running shard reads its crawl's status again (pause, cancel), in ms. */
  statusEveryMs: 1_000,
} as const;

/** Something worth a log line. */
export type WorkEvent =
  | { kind: "planned"; crawlId: string; total: number; shards: number }
  | { kind: "crawl-failed"; crawlId: string; error: string }
  | { kind: "retry"; crawlId: string; shardId: number; error: string; delayMs: number }
  | { kind: "split"; crawlId: string; parent: number; child: number; movedItems: number }
  | { kind: "crawl-done"; crawlId: string }
  | { kind: "completion-deferred"; crawlId: string; error: string };

/** A crawl's looks for a straggler in one process: the last one queued, and one not yet begun. */
export interface SplitLooks {
  /** The last look queued (settled, never rejected: the queue only orders). */
  tail: Promise<void>;
  /** A look queued that has not begun, which a shard ending now shares. */
  waiting: Promise<void> | null;
}

/** What an environment is built from (see {@linkcode engineEnv}). */
export interface EnvOptions {
  /** The store. */
  kv: Deno.Kv;
  /** Opens the source a crawl reads from (cached by the caller). */
  openSource: (crawl: CrawlRecord) => Source;
  /** Where new work goes (child shards, retries, plans). */
  dispatcher: Dispatcher;
  /**
   * Time and timers of everything workers do: records' times, leases, heartbeats, planning,
   * retries, splits and the final check's pauses. @default SYSTEM_CLOCK
   */
  clock?: Clock;
  /** Numbers in [0, 1) for jitter and for the order workers look at shards. @default Math.random */
  random?: () => number;
  /** Lease length of shards, in milliseconds. @default ENGINE_DEFAULTS.leaseMs (30000) */
  leaseMs?: number;
  /** Planning attempts failing transiently before the crawl fails. @default 5 */
  maxPlanAttempts?: number;
  /** The planning lease, in milliseconds. @default ENGINE_DEFAULTS.planLeaseMs (20000) */
  planLeaseMs?: number;
  /** Failed attempts of a shard in a row before the crawl fails. @default 8 */
  maxShardFailures?: number;
  /** Documents above this many bytes are recorded as too large. @default 33554432 */
  maxDocBytes?: number;
  /** How often a running shard reads its crawl's status again, in ms. @default 1000 */
  statusEveryMs?: number;
  /** Tuning of straggler splits (crawls opt in with `rebalance`). @default {} */
  rebalance?: RebalanceOptions;
  /** Log-worthy events. @default none */
  onEvent?: (event: WorkEvent) => void;
  /**
   * Names a worker of this process in leases (`ProcessBeat.owner`, so that its leases end with the
   * process). @default a name of no process: its leases only expire
   */
  ownerName?: (label: string) => string;
  /** The process's budget of document bytes in memory (shared by its shards). @default none */
  docMemory?: DocMemory;
  /** Each crawl's document slots in this process (shared by its shards). @default none */
  crawlSlots?: CrawlSlots;
  /**
   * The process's listing cache: pages listed ahead while this process plans a crawl and the
   * planner's reads, for its shards here. @default none
   */
  listings?: ListingCache;
  /**
   * Where a split made here posts its victim's new end for the victim's worker here, which then
   * stops at the split key at once instead of at its next heartbeat. @default none
   */
  notices?: ShardNotices;
  /**
   * The looks for a straggler to split this process has under way, per crawl: ending shards look
   * one after the other (looking together, they would all pick the same straggler and search the
   * same key; one after the other, each finds the straggler the last split left), and a shard
   * ending while a look waits its turn shares that look (it will see this shard's end too).
   * @default none: every ending shard looks at once
   */
  splitting?: Map<string, SplitLooks>;
}

/** The parts of an environment that always have a value once built. */
type Resolved =
  | "clock"
  | "random"
  | "leaseMs"
  | "maxPlanAttempts"
  | "planLeaseMs"
  | "maxShardFailures"
  | "maxDocBytes"
  | "statusEveryMs"
  | "rebalance"
  | "ownerName";

/** An engine's environment, every default resolved (see the module comment). */
export type Env = Required<Pick<EnvOptions, Resolved>> & Omit<EnvOptions, Resolved>;

/** The environment `options` describe, with {@linkcode ENGINE_DEFAULTS} where they say nothing. */
export function engineEnv(options: EnvOptions): Env {
  return {
    ...options,
    clock: envClock(options.clock),
    random: options.random ?? Math.random,
    leaseMs: options.leaseMs ?? ENGINE_DEFAULTS.leaseMs,
    maxPlanAttempts: options.maxPlanAttempts ?? ENGINE_DEFAULTS.maxPlanAttempts,
    planLeaseMs: options.planLeaseMs ?? ENGINE_DEFAULTS.planLeaseMs,
    maxShardFailures: options.maxShardFailures ?? ENGINE_DEFAULTS.maxShardFailures,
    maxDocBytes: options.maxDocBytes ?? ENGINE_DEFAULTS.maxDocBytes,
    statusEveryMs: options.statusEveryMs ?? ENGINE_DEFAULTS.statusEveryMs,
    rebalance: options.rebalance ?? {},
    ownerName: options.ownerName ?? ((label) => `${label}-${crypto.randomUUID().slice(0, 8)}`),
  };
}

/**
 * A worker's context over `source`: the environment `env` (the whole, or the slice a loop holds),
 * the source, and the worker's name `owner` (from `env.ownerName`, so that its leases end with the
 * process). Over a whole `Env` it is the crawl room's `CrawlContext`; the verify room's contexts
 * take the same parts.
 *
 * @example
 * ```ts
 * const env = engineEnv({ kv, openSource: () => source, dispatcher });
 * await openCrawl(crawlContext(env, source, env.ownerName("cli")), spec);
 * ```
 */
export function crawlContext<E extends Partial<Env>>(
  env: E,
  source: Source,
  owner: string,
): E & Pick<CrawlContext, "source" | "owner"> {
  return { ...env, source, owner };
}
