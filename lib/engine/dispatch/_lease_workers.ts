/**
 * Lease dispatch, for where KV queues do not exist (Deno Deploy today, self-hosted denokv over KV
 * Connect) and for several worker processes on one KV file (queue messages are not shared between
 * processes). A lease worker looks for work in the store: it plans crawls left in `planning`, and
 * claims shards of running crawls that nobody holds (in random order, to spread workers) and runs
 * them (`work.ts`). When there is nothing to do, or everything it tried failed, it sleeps, longer
 * each time up to `maxIdleMs`: it never spins.
 *
 * @module
 */
import { backoff, IDLE_BACKOFF } from "../../base/retry_policy.ts";
import type { Clock } from "../../base/clock.ts";
import { errorLine, StorageError } from "../../base/errors.ts";
import type { Dispatcher } from "../crawl/mod.ts";
import { claimable } from "./_shard_runner.ts";
import {
  type CrawlRecord,
  getPlanning,
  getShards,
  leaseHeld,
  listCrawls,
  listPending,
  listShards,
  readLiveness,
  type ShardRecord,
} from "../store/mod.ts";
import { finishCrawl, workPlan, workShard } from "./work.ts";
import type { Env } from "./env.ts";

/**
 * Lease workers need no message: a claimable shard or a crawl in `planning` is work. Dispatching
 * still wakes this process's idle workers at once (see {@linkcode LeaseDispatcher.sleep}); workers
 * in other processes find the work at their next look.
 */
export class LeaseDispatcher implements Dispatcher {
  #generation = 0;
  #sleepers = new Set<() => void>();
  #running = new Set<string>();
  #clock: Clock;

  /** Idle workers sleep on `clock`. @default the system's */
  constructor(options: { clock: Clock }) {
    this.#clock = options.clock;
  }

  /** Counts dispatches; a worker notes it before looking for work (see `sleep`). */
  get generation(): number {
    return this.#generation;
  }

  /** Wakes idle workers of this process (unless the shard is due later: they find it then). */
  dispatch(_crawlId: string, _shardId: number, options?: { delayMs?: number }): Promise<void> {
    if (!options?.delayMs) this.#wake();
    return Promise.resolve();
  }

  /** Wakes idle workers of this process (unless planning is due later). */
  plan(_crawlId: string, options?: { delayMs?: number }): Promise<void> {
    if (!options?.delayMs) this.#wake();
    return Promise.resolve();
  }

  #wake(): void {
    this.#generation++;
    for (const wake of this.#sleepers) wake();
  }

  /**
   * Notes that a worker of this process is about to run `shardId` of `crawlId`; false when another
   * of them already does. The KV lease still decides between processes: this only spares a
   * worker the reads of a claim a sibling holds (a failed claim cost 10-70 ms of reads on a busy
   * process, and a worker walking a list of them left shards unclaimed for a quarter second).
   * Ended by {@linkcode ranShard}.
   */
  runShard(crawlId: string, shardId: number): boolean {
    const key = `${crawlId}\u0000${shardId}`;
    if (this.#running.has(key)) return false;
    this.#running.add(key);
    return true;
  }

  /** A worker of this process is done with `shardId` of `crawlId` (see {@linkcode runShard}). */
  ranShard(crawlId: string, shardId: number): void {
    this.#running.delete(`${crawlId}\u0000${shardId}`);
  }

  /**
   * Sleeps `ms`, or less: ends when work is dispatched here, when `signal` aborts, and at once when
   * something was dispatched since `generation` was read (work that came while the worker looked).
   */
  async sleep(ms: number, options: { generation: number; signal?: AbortSignal }): Promise<void> {
    if (options.generation !== this.#generation) return;
    const woken = new AbortController();
    const wake = () => woken.abort();
    this.#sleepers.add(wake);
    try {
      const signal = options.signal
        ? AbortSignal.any([options.signal, woken.signal])
        : woken.signal;
      await this.#clock.sleep(ms, signal);
    } finally {
      this.#sleepers.delete(wake);
    }
  }
}

/** Options of {@linkcode runLeaseWorker}. */
export interface LeaseWorkerOptions {
  /** This worker's name in leases. @default a name from `deps.ownerName("lease")` */
  owner?: string;
  /** First sleep when there is no work, in milliseconds (doubles up to `maxIdleMs`). @default 250 */
  idleMs?: number;
  /**
   * Longest sleep when there is no work, in milliseconds. @default 5000, and 1000 while a crawl is
   * running or planning (`IDLE_BACKOFF.busyMaxMs`)
   */
  maxIdleMs?: number;
  /** Stop after this long (a Deploy cron tick), in milliseconds. @default no limit */
  maxRunMs?: number;
  /** Stop once no crawl is planning or running. @default false */
  exitWhenIdle?: boolean;
  /** Stops the worker. */
  signal?: AbortSignal;
  /** Rounds in a row that may fail with an unexpected error before the worker gives up. @default 10 */
  maxErrorsInARow?: number;
  /** Log lines. */
  log?: (line: string) => void;
}

/** What a worker did. */
export interface LeaseWorkerStats {
  /** Shards run (claimed). */
  claims: number;
  /** Shards finished. */
  shardsDone: number;
  /** Runs that failed (recorded for a retry, or failing the crawl). */
  errors: number;
  /** Times it slept for lack of work. */
  idleSleeps: number;
}

function shuffle<T>(xs: T[], random: () => number): T[] {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
  return xs;
}

/**
 * Runs a lease worker until stopped (signal, `maxRunMs`, or idle with `exitWhenIdle`).
 * @throws StorageError when the store cannot be written (the process should stop; nothing is
 * lost), or the last error when `maxErrorsInARow` rounds failed one after the other.
 */
export async function runLeaseWorker(
  deps: Env,
  options: LeaseWorkerOptions = {},
): Promise<LeaseWorkerStats> {
  const { clock } = deps;
  const now = () => clock.now();
  const owner = options.owner ?? deps.ownerName("lease");
  const started = now();
  const stats: LeaseWorkerStats = { claims: 0, shardsDone: 0, errors: 0, idleSleeps: 0 };
  const nudges = deps.dispatcher instanceof LeaseDispatcher ? deps.dispatcher : null;
  let generation = nudges?.generation ?? 0;
  // Idle sleeps are on `deps.clock`, cut short by `signal` and by work dispatched through this
  // process's LeaseDispatcher.
  const sleep = (ms: number) =>
    nudges
      ? nudges.sleep(ms, { generation, signal: options.signal })
      : clock.sleep(ms, options.signal);
  const stop = () =>
    options.signal?.aborted === true ||
    (options.maxRunMs !== undefined && now() - started > options.maxRunMs);
  let idleRounds = 0;
  let inARow = 0;
  let busy = false;
  while (!stop()) {
    let worked = false;
    generation = nudges?.generation ?? 0;
    try {
      const active = (await listCrawls(deps.kv)).filter((c) =>
        c.status === "running" || c.status === "planning"
      );
      busy = active.length > 0;
      if (!busy && options.exitWhenIdle) break;
      worked = await oneRound(deps, shuffle(active, deps.random), { owner, stop, stats, now });
      inARow = 0;
    } catch (err) {
      if (err instanceof StorageError || ++inARow >= (options.maxErrorsInARow ?? 10)) throw err;
      stats.errors++;
      options.log?.(`worker ${owner}: ${errorLine(err)}`);
    }
    if (worked) idleRounds = 0;
    else {
      const firstMs = options.idleMs ?? IDLE_BACKOFF.firstMs;
      const maxMs = options.maxIdleMs ?? (busy ? IDLE_BACKOFF.busyMaxMs : IDLE_BACKOFF.maxMs);
      stats.idleSleeps++;
      await sleep(backoff({ firstMs, maxMs, growth: "double", jitter: "none" }, ++idleRounds));
    }
  }
  return stats;
}

/** Plans one crawl or runs one shard; false when there was nothing this worker could take. */
async function oneRound(
  deps: Env,
  crawls: CrawlRecord[],
  o: { owner: string; stop: () => boolean; stats: LeaseWorkerStats; now: () => number },
): Promise<boolean> {
  const liveness = await readLiveness(deps.kv, o.now());
  for (const crawl of crawls) {
    if (crawl.status === "planning") {
      const planning = (await getPlanning(deps.kv, crawl.id)).value;
      const held = leaseHeld(planning?.lease, o.now(), { liveness, owner: o.owner });
      if (held || (planning?.retryAt ?? 0) > o.now()) continue;
      await workPlan(deps, crawl.id, o.owner);
      return true;
    }
    const shards = await candidates(deps.kv, crawl, deps.random);
    if (shards.length === 0) {
      await finishCrawl(deps, crawl.id);
      continue;
    }
    const local = deps.dispatcher instanceof LeaseDispatcher ? deps.dispatcher : null;
    const free = shards.filter((e) => claimable(e.value, o.owner, o.now(), liveness));
    for (const e of shuffle(free, deps.random)) {
      // The list is a moment old: a shard a sibling worker took since is passed without a read.
      if (local && !local.runShard(crawl.id, e.value.id)) continue;
      const res = await workShard(deps, crawl.id, e.value.id, { owner: o.owner, stop: o.stop })
        .finally(() => local?.ranShard(crawl.id, e.value.id));
      if (res.kind === "busy") continue; // someone else was quicker
      o.stats.claims++;
      if (res.kind === "done") o.stats.shardsDone++;
      if (res.kind === "retry" || res.kind === "failed") o.stats.errors++;
      return res.kind !== "retry" && res.kind !== "failed";
    }
  }
  return false;
}

/** Shards a worker looks at in one round: a window of the pending index, whatever the count. */
export const LOOK_AT_SHARDS = 32;

/**
 * The unfinished shards a worker may look at: a window of {@linkcode LOOK_AT_SHARDS} of the
 * crawl's pending index from a random shard (workers spread), so a round costs the same with 16
 * shards or 100,000; empty when every shard is done. Crawls planned by earlier versions have no
 * index: all their shards are read.
 */
async function candidates(
  kv: Deno.Kv,
  crawl: CrawlRecord,
  random: () => number,
): Promise<Deno.KvEntry<ShardRecord>[]> {
  if (!crawl.indexed) return (await listShards(kv, crawl.id)).filter((e) => !e.value.done);
  const from = Math.floor(random() * Math.max(1, crawl.nextShardId));
  const ids = await listPending(kv, crawl.id, { limit: LOOK_AT_SHARDS, from });
  return (await getShards(kv, crawl.id, ids)).filter((e) => !e.value.done);
}
