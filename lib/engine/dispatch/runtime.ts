/**
 * The one runtime builder: given a KV store and a way to open a crawl's source, it wires the
 * dispatcher (KV queue or leases), the queue listener or the in-process lease workers, planning of
 * new crawls, straggler splits, and the periodic work the watchdog and the Deploy cron do. The
 * local crawl, the server and `deno task worker` all build their engine here, so the wiring exists
 * once.
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import { type FollowConfig, followLoop } from "./_follow_loop.ts";
import { watchdog } from "./_watchdog.ts";
import { sinkLoop, type SinkLoopOptions } from "./_sink_loop.ts";
import { type Dispatcher, type PendingPass, requireCrawl } from "../crawl/mod.ts";
import {
  LeaseDispatcher,
  type LeaseWorkerOptions,
  type LeaseWorkerStats,
  runLeaseWorker,
} from "./_lease_workers.ts";
import { ProcessBeat, ShardNotices } from "../store/mod.ts";
import { CrawlSlots, DocMemory } from "../page/mod.ts";
import { ListingCache } from "../../sources/cache/mod.ts";
import { createQueueHandler, QueueDispatcher } from "./_queue_dispatch.ts";
import { DEFAULT_WORKERS, MAX_WORKERS } from "./work.ts";
import { PendingAsker } from "./_pending_loop.ts";
import { engineEnv, type Env, envClock, type EnvOptions } from "./env.ts";

export { DEFAULT_WORKERS, MAX_WORKERS };

/** How work reaches workers. */
export type DispatchMode = "queue" | "lease";

/**
 * Options of {@linkcode createRuntime}: the store, the source opener, and what of the engine's
 * environment the process varies (`EnvOptions`: the clock, lease length, attempts allowed,
 * straggler splits, events), beside how work reaches its workers.
 */
export interface RuntimeOptions extends
  Pick<
    EnvOptions,
    | "kv"
    | "openSource"
    | "clock"
    | "rebalance"
    | "leaseMs"
    | "maxPlanAttempts"
    | "maxShardFailures"
    | "onEvent"
  > {
  /** `queue`: KV queue messages (one process); `lease`: workers claim shards (Deploy, many). */
  dispatch: DispatchMode;
  /**
   * Shards this process runs at once, at most `MAX_WORKERS`: lease workers started at once (lease
   * mode; 0 leaves work to `leaseTick` and `runWorker`), or queue messages handled at once (queue
   * mode; at least 1). @default 0 in lease mode, DEFAULT_WORKERS (16) in queue mode
   */
  workers?: number;
  /** Crawls planned at once in queue mode (lease workers plan one at a time each). @default 2 */
  maxPlanning?: number;
  /**
   * Bytes of documents this process holds in memory at once, over all its shards (new document
   * requests wait beyond). @default DOC_MEMORY_BYTES (256 MiB)
   */
  docMemoryBytes?: number;
  /** Label of this process in lease owner names. @default "worker" */
  label?: string;
  /**
   * Called when this process cannot go on: the store cannot be written (nothing stored is lost),
   * or a worker kept failing. @default rethrown (an unhandled rejection)
   */
  onProcessError?: (err: Error) => void;
  /** Log lines of lease workers. */
  log?: (line: string) => void;
  /**
   * Follows every done crawl created with `follow` from this process (`_follow_loop.ts`: its
   * changes applied, its lag recorded, its ranges re-proven); with `pollMs: 0` or null, only the
   * watchdog's tick follows them (Deploy, where no process lives between requests), with this
   * `verifyEveryMs`. @default null
   */
  follow?: FollowConfig | null;
  /**
   * Keeps crawls' sinks fed from this process (`_sink_loop.ts`: the ledger's notes delivered to
   * the sinks each crawl has, from positions kept in KV). @default none
   */
  sinks?: SinkLoopOptions | null;
  /**
   * Asks crawls' pending documents again from this process every second (`_pending_loop.ts`:
   * documents found behind their revision on the document host); otherwise each watchdog tick
   * does (Deploy's cron). `onError` is told a pass that failed (tried again at the next look).
   * @default null: only the watchdog's ticks
   */
  pendingDocs?: { onError?: (crawlId: string, err: unknown) => void } | null;
}

/** A running engine: its dispatcher and the hooks entry points call. */
export interface Runtime {
  /** Where new work goes. */
  readonly dispatcher: Dispatcher;
  /** The mode chosen. */
  readonly mode: DispatchMode;
  /** What workers of this runtime use (for one-off work such as a lease tick). */
  readonly deps: Env;
  /** Re-dispatches stalled shards, finishes completed crawls, follows changes; returns shards. */
  watchdogTick(options?: { stallMs?: number }): Promise<number>;
  /**
   * Runs one lease worker for about `ms` (a Deploy cron tick), or less: it returns at its first look
   * when no crawl is planning or running (an idle deployment costs one KV list a tick). Resolves
   * with what it did; nothing in queue mode (all zero).
   */
  leaseTick(ms: number): Promise<LeaseWorkerStats>;
  /**
   * Follows done crawls from this process until `signal` aborts (`_follow_loop.ts`), with this
   * runtime's store, sources and dispatcher; ends before `close()` returns.
   */
  follow(signal: AbortSignal, options?: FollowConfig): Promise<void>;
  /**
   * One pass over crawl `crawlId`'s pending documents (or the pass under way in this process):
   * what a run waiting for its last documents asks. @throws NotFoundError for an unknown crawl
   */
  pendingPass(crawlId: string): Promise<PendingPass>;
  /**
   * Stops this process's loop asking pending documents again (`pendingDocs`) and waits for its
   * pass under way: a run that ends drains its sinks after this, so nothing lands unseen by them.
   */
  stopPendingDocs(): Promise<void>;
  /** Runs one lease worker with this runtime's hooks until `options` say stop. */
  runWorker(options?: LeaseWorkerOptions): Promise<LeaseWorkerStats>;
  /**
   * Holds this process's heartbeat (its workers hold it while they run; so should anything else
   * that takes a lease in its name, such as a whole local crawl): resolves once it beats, with the
   * function that lets go.
   */
  acquire(): Promise<() => Promise<void>>;
  /** An owner name for a worker of this process (its leases end with the process). */
  ownerName(label: string): string;
  /**
   * Stops the workers started here (the queue listener stops when KV is closed) and deletes this
   * process's heartbeat, which frees its leases at once.
   */
  close(): Promise<void>;
  /** Settles when the listener and the workers have ended (after `close()` and `kv.close()`). */
  readonly finished: Promise<void>;
}

/**
 * Builds the engine over `kv`. In queue mode the KV queue listener starts at once; in lease mode
 * `workers` lease workers start at once and more can be run with `leaseTick`.
 *
 * @example
 * ```ts
 * const kv = await Deno.openKv(":memory:");
 * const runtime = createRuntime({ kv, openSource: () => source, dispatch: "lease", workers: 4 });
 * await openCrawl(crawlContext(runtime.deps, source, "cli"), buildSpec({ source: url }));
 * // ... poll crawlStatus(kv, id) until done ...
 * await runtime.close();
 * kv.close();
 * ```
 */
export function createRuntime(options: RuntimeOptions): Runtime {
  const { kv } = options;
  const clock = envClock(options.clock);
  const stop = new AbortController();
  const background: Promise<unknown>[] = [];
  const label = options.label ?? "worker";
  const beat = new ProcessBeat(kv, { label, clock });
  const dispatcher: Dispatcher = options.dispatch === "queue"
    ? new QueueDispatcher(kv)
    : new LeaseDispatcher({ clock });
  const deps = envOf(options, { clock, dispatcher, beat });
  const worker = (o: LeaseWorkerOptions = {}) =>
    beat.acquire().then((release) =>
      runLeaseWorker(deps, {
        owner: beat.owner(label),
        log: options.log,
        ...o,
        signal: o.signal ? AbortSignal.any([stop.signal, o.signal]) : stop.signal,
      }).finally(release)
    ).catch((err: Error) => {
      if (!options.onProcessError) throw err;
      options.onProcessError(err);
      return { claims: 0, shardsDone: 0, errors: 1, idleSleeps: 0 };
    });
  // A follower holds the process's heartbeat while it runs: its feed lease (in this process's
  // name) is free at once when the process dies, and held while it lives.
  const follow = (signal: AbortSignal, o: FollowConfig) =>
    beat.acquire().then((release) => followLoop(deps, signal, o).finally(release));
  const following = options.follow && options.follow.pollMs !== 0
    ? follow(stop.signal, options.follow)
    : null;
  if (following) background.push(following);
  // Sinks are fed beside the crawl, never inside its commits: a slow or failing one holds nothing.
  if (options.sinks) background.push(sinkLoop({ kv, clock }, stop.signal, options.sinks));
  const asker = new PendingAsker(deps);
  const stopAsking = new AbortController();
  const asking = options.pendingDocs
    ? asker.run(AbortSignal.any([stop.signal, stopAsking.signal]), options.pendingDocs)
    : null;
  if (asking) background.push(asking);
  if (options.dispatch === "queue") {
    background.push(listenQueue(deps, options, { beat, stopping: () => stop.signal.aborted }));
  } else {
    const n = Math.min(options.workers ?? 0, MAX_WORKERS);
    for (let i = 0; i < n; i++) background.push(worker());
  }
  return {
    dispatcher,
    mode: options.dispatch,
    deps,
    watchdogTick: (o = {}) =>
      watchdog({
        ...deps,
        onFinished: (crawlId) => options.onEvent?.({ kind: "crawl-done", crawlId }),
        // Without a loop of this process's own (Deploy), each tick asks pending documents again.
        asker: asking ? undefined : asker,
      }, {
        stallMs: o.stallMs,
        verifyEveryMs: options.follow?.verifyEveryMs,
        verifyRowsEveryMs: options.follow?.verifyRowsEveryMs,
      }),
    pendingPass: async (crawlId) => asker.pass(await requireCrawl(kv, crawlId)),
    stopPendingDocs: async () => {
      stopAsking.abort();
      await asking?.catch(() => {});
    },
    leaseTick: (ms) =>
      options.dispatch === "lease"
        ? worker({ maxRunMs: ms, exitWhenIdle: true })
        : Promise.resolve({ claims: 0, shardsDone: 0, errors: 0, idleSleeps: 0 }),
    follow: (signal, o = {}) => {
      const run = follow(AbortSignal.any([stop.signal, signal]), o);
      background.push(run.catch(() => {}));
      return run;
    },
    runWorker: (o) => worker(o),
    acquire: () => beat.acquire(),
    ownerName: (l) => beat.owner(l),
    close: async () => {
      stop.abort();
      // The beat goes first: this process's shards are free for others at once, while its workers
      // end at their next step (a page they still commit is refused if another worker took the
      // shard). The queue listener ends only when KV closes.
      await beat.stop();
      // A follow tick or a pass under way ends before the store closes.
      if (following) await following.catch(() => {});
      if (asking) await asking.catch(() => {});
      if (options.dispatch === "lease") await Promise.allSettled(background);
    },
    finished: Promise.allSettled(background).then(() => {}),
  };
}

/**
 * The engine's environment: what this runtime's workers use, built once from the options, the
 * clock, the dispatcher and the process's beat (every shared budget of the process lives here).
 */
function envOf(
  options: RuntimeOptions,
  o: { clock: Clock; dispatcher: Dispatcher; beat: ProcessBeat },
): Env {
  const { clock, dispatcher, beat } = o;
  const listings = new ListingCache({ clock });
  return engineEnv({
    kv: options.kv,
    openSource: options.openSource,
    dispatcher,
    clock,
    rebalance: options.rebalance,
    leaseMs: options.leaseMs,
    maxPlanAttempts: options.maxPlanAttempts,
    maxShardFailures: options.maxShardFailures,
    onEvent: (e) => {
      // What the cache holds of a crawl that ended here is of no use to anyone any more.
      if (e.kind === "crawl-done" || e.kind === "crawl-failed") listings.drop(e.crawlId);
      options.onEvent?.(e);
    },
    ownerName: (l) => beat.owner(l),
    docMemory: new DocMemory(options.docMemoryBytes),
    crawlSlots: new CrawlSlots(),
    listings,
    notices: new ShardNotices(),
    splitting: new Map(),
  });
}

/**
 * Queue mode: the KV queue listener, at most `workers` shards and `maxPlanning` plans at once,
 * holding the process's beat while it works. Ends when KV closes.
 */
function listenQueue(
  deps: Env,
  options: RuntimeOptions,
  o: { beat: ProcessBeat; stopping: () => boolean },
): Promise<void> {
  const handle = createQueueHandler(deps, {
    label: options.label ?? "worker",
    onProcessError: options.onProcessError,
    stopping: o.stopping,
    maxShards: Math.min(Math.max(1, options.workers ?? DEFAULT_WORKERS), MAX_WORKERS),
    maxPlanning: options.maxPlanning,
  });
  return options.kv.listenQueue(async (raw) => {
    const release = await o.beat.acquire();
    try {
      await handle(raw);
    } finally {
      await release();
    }
  });
}
