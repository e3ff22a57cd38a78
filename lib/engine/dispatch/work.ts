/**
 * What a worker does with a piece of work, whichever way it arrived (a queue message, a claim
 * found by polling): plan a crawl, or run a shard and then do what follows it — split a straggler
 * when the shard finished (if the crawl rebalances), finish the crawl when it was the last, or ask
 * for the shard again after its backoff when it failed.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { errorLine, StorageError } from "../../base/errors.ts";
import type { Source } from "../../plan/source.ts";
import { checkCompletion, type CompletionOptions } from "../verify/mod.ts";
import { type Dispatcher, planCrawl, type RebalanceOptions, splitStraggler } from "../crawl/mod.ts";
import type { CrawlSlots, DocMemory } from "../page/mod.ts";
import type { ListingCache } from "../../sources/cache/mod.ts";
import { type RunResult, runShard } from "./_shard_runner.ts";
import { type CrawlRecord, getCrawl, type ShardNotices } from "../store/mod.ts";

/**
 * Shards a process runs at once unless told otherwise (lease workers, or queue messages handled at
 * once): each runs one shard at a time with its document fetches, so this bounds a process's
 * shards in flight whatever the shard count.
 */
export const DEFAULT_WORKERS = 16;

/** Most shards one process may run at once (each holds a page of rows in memory). */
export const MAX_WORKERS = 256;

/** Something worth a log line. */
export type WorkEvent =
  | { kind: "planned"; crawlId: string; total: number; shards: number }
  | { kind: "crawl-failed"; crawlId: string; error: string }
  | { kind: "retry"; crawlId: string; shardId: number; error: string; delayMs: number }
  | { kind: "split"; crawlId: string; parent: number; child: number; movedItems: number }
  | { kind: "crawl-done"; crawlId: string }
  | { kind: "completion-deferred"; crawlId: string; error: string };

/** What workers need (all injected). */
export interface WorkDeps {
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
  /** Tuning of straggler splits (crawls opt in with `rebalance`). @default {} */
  rebalance?: RebalanceOptions;
  /** Planning attempts failing transiently before the crawl fails. @default 5 */
  maxPlanAttempts?: number;
  /** Failed attempts of a shard in a row before the crawl fails. @default 8 */
  maxShardFailures?: number;
  /** Lease length of shards, in milliseconds. @default LEASE_MS (30000) */
  leaseMs?: number;
  /** Log-worthy events. */
  onEvent?: (event: WorkEvent) => void;
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
  /**
   * Names a worker of this process in leases (`ProcessBeat.owner`, so that its leases end with the
   * process). @default a name of no process: its leases only expire
   */
  ownerName?: (label: string) => string;
}

/** An owner name for a worker labelled `label` of the process `deps` belong to. */
export function ownerOf(deps: WorkDeps, label: string): string {
  return deps.ownerName?.(label) ?? `${label}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Plans a crawl in `planning` if nobody else is planning it. */
export async function workPlan(deps: WorkDeps, crawlId: string, owner: string): Promise<void> {
  const crawl = (await getCrawl(deps.kv, crawlId)).value;
  if (!crawl || crawl.status !== "planning") return;
  const after = await planCrawl({ ...deps, source: deps.openSource(crawl) }, crawlId, {
    owner,
    clock: deps.clock,
    maxPlanAttempts: deps.maxPlanAttempts,
  });
  if (after?.status === "failed") {
    deps.onEvent?.({ kind: "crawl-failed", crawlId, error: after.error ?? "failed" });
  } else if (after?.status === "running") {
    deps.onEvent?.({ kind: "planned", crawlId, total: after.total, shards: after.shards });
  }
}

/**
 * Runs one shard (see `_shard_runner.ts`) and what follows it. Returns how the run ended.
 */
export async function workShard(
  deps: WorkDeps,
  crawlId: string,
  shardId: number,
  o: { owner: string; stop?: () => boolean },
): Promise<RunResult> {
  const clock = deps.clock ?? SYSTEM_CLOCK;
  const res = await runShard(deps, crawlId, shardId, {
    owner: o.owner,
    stop: o.stop,
    leaseMs: deps.leaseMs,
    maxFailures: deps.maxShardFailures,
  });
  if (res.kind === "retry") {
    const delayMs = Math.max(0, res.atMs - clock.now());
    deps.onEvent?.({ kind: "retry", crawlId, shardId, error: res.error, delayMs });
    await deps.dispatcher.dispatch(crawlId, shardId, { delayMs });
  } else if (res.kind === "failed") {
    deps.onEvent?.({ kind: "crawl-failed", crawlId, error: res.error });
  } else if (res.kind === "done") {
    // A split or the crawl's completion that fails now (a registry hiccup) is not the shard's
    // failure: the shard is done, and the watchdog finishes the crawl later.
    await afterShardDone(deps, crawlId).catch((err) => {
      if (err instanceof StorageError) throw err;
      deps.onEvent?.({ kind: "completion-deferred", crawlId, error: errorLine(err) });
    });
  }
  return res;
}

/** How a worker of `deps` finishes a crawl: telling `crawl-done` when it is the one that did. */
export function finishingOptions(deps: WorkDeps, crawlId: string): CompletionOptions {
  return {
    clock: deps.clock,
    openSource: deps.openSource,
    dispatcher: deps.dispatcher,
    onFinished: () => deps.onEvent?.({ kind: "crawl-done", crawlId }),
  };
}

/** A crawl's looks for a straggler in one process: the last one queued, and one not yet begun. */
export interface SplitLooks {
  /** The last look queued (settled, never rejected: the queue only orders). */
  tail: Promise<void>;
  /** A look queued that has not begun, which a shard ending now shares. */
  waiting: Promise<void> | null;
}

/**
 * Runs `look` after the crawl's looks under way in `looks`, or shares the one queued that has not
 * begun (it sees this shard's end too). Resolves or rejects as the look run for the caller does;
 * the crawl's entry is removed when its last look settles.
 */
export function queueLook(
  looks: Map<string, SplitLooks>,
  crawlId: string,
  look: () => Promise<void>,
): Promise<void> {
  const cur = looks.get(crawlId);
  if (cur?.waiting) return cur.waiting;
  const entry: SplitLooks = cur ?? { tail: Promise.resolve(), waiting: null };
  const mine = cur
    ? entry.tail.then(() => {
      entry.waiting = null;
      return look();
    })
    : look();
  if (cur) entry.waiting = mine;
  const tail = mine.catch(() => {});
  entry.tail = tail;
  looks.set(crawlId, entry);
  tail.then(() => {
    if (entry.tail === tail) looks.delete(crawlId);
  });
  return mine;
}

/** Splits a straggler (when the crawl rebalances), then finishes the crawl if it was the last. */
async function afterShardDone(deps: WorkDeps, crawlId: string): Promise<void> {
  const crawl = (await getCrawl(deps.kv, crawlId)).value;
  if (!crawl) return;
  const source = deps.openSource(crawl);
  if (crawl.rebalance && crawl.status === "running") {
    const look = async () => {
      const split = await splitStraggler({ ...deps, source }, crawlId, {
        clock: deps.clock,
        ...deps.rebalance,
      });
      if (split) deps.onEvent?.({ kind: "split", crawlId, ...split });
    };
    await (deps.splitting ? queueLook(deps.splitting, crawlId, look) : look());
  }
  await checkCompletion(deps.kv, crawlId, finishingOptions(deps, crawlId));
}
