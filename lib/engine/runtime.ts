/**
 * The one runtime builder: given a KV store and a way to open a crawl's source, it wires the
 * dispatcher (KV queue or leases), the queue listener or the in-process lease workers, the hook
 * that splits stragglers when a shard finishes, planning of new crawls, and the periodic work the
 * watchdog and the Deploy cron do. The local crawl, the server and `deno task worker` all build
 * their engine here, so the wiring exists once.
 *
 * @module
 */
import type { Source } from "../plan/source.ts";
import { type Dispatcher, planCrawl, watchdog } from "./coordinator.ts";
import {
  LeaseDispatcher,
  type LeaseWorkerOptions,
  type LeaseWorkerStats,
  runLeaseWorker,
} from "./lease_dispatch.ts";
import {
  createQueueHandler,
  enqueuePlan,
  QueueDispatcher,
  type QueueEvent,
} from "./queue_dispatch.ts";
import { type RebalanceOptions, splitStraggler } from "./rebalance.ts";
import { type CrawlRecord, getCrawl } from "./store.ts";

/** How shard work reaches workers. */
export type DispatchMode = "queue" | "lease";

/** Options of {@linkcode createRuntime}. */
export interface RuntimeOptions {
  /** The store (opened and closed by the caller). */
  kv: Deno.Kv;
  /** Opens the source a crawl reads from; called often, so cache inside. */
  openSource: (crawl: CrawlRecord) => Source;
  /** `queue`: KV queue messages (one process); `lease`: workers claim shards (Deploy, many). */
  dispatch: DispatchMode;
  /** Lease workers started in this process (lease mode only). @default 0 */
  workers?: number;
  /** Tuning of straggler splits (crawls opt in with `rebalance`). @default {} */
  rebalance?: RebalanceOptions;
  /** Prefix of lease owner names. @default a random id */
  ownerPrefix?: string;
  /** One-line log messages. @default nothing */
  log?: (line: string) => void;
  /** Page outcomes, retries, dead letters and fatal errors of queue mode. */
  onQueueEvent?: (event: QueueEvent) => void;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
}

/** A running engine: its dispatcher and the hooks entry points call. */
export interface Runtime {
  /** Where new shard work goes. */
  readonly dispatcher: Dispatcher;
  /** The mode chosen. */
  readonly mode: DispatchMode;
  /** Gets a crawl just created in `planning` state planned (queue: a message; lease: workers). */
  startPlanning(crawlId: string): Promise<void>;
  /** Re-dispatches stalled shards, finishes completed crawls, follows changes; returns shards. */
  watchdogTick(options?: { stallMs?: number }): Promise<number>;
  /** Runs one lease worker for about `ms` (a Deploy cron tick); nothing in queue mode. */
  leaseTick(ms: number): Promise<void>;
  /** Runs one lease worker with this runtime's hooks until `options` say stop. */
  runWorker(options?: Omit<LeaseWorkerOptions, "onShardDone">): Promise<LeaseWorkerStats>;
  /** Stops the workers started here (the queue listener stops when KV is closed). */
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
 * // ... create crawls with the coordinator, passing runtime.dispatcher ...
 * await runtime.close();
 * kv.close();
 * ```
 */
export function createRuntime(options: RuntimeOptions): Runtime {
  const { kv, openSource } = options;
  const log = options.log ?? (() => {});
  const stop = new AbortController();
  const background: Promise<unknown>[] = [];
  const prefix = options.ownerPrefix ?? crypto.randomUUID().slice(0, 8);
  const dispatcher: Dispatcher = options.dispatch === "queue"
    ? new QueueDispatcher(kv)
    : new LeaseDispatcher();
  const onShardDone = async (crawlId: string) => {
    const crawl = (await getCrawl(kv, crawlId)).value;
    if (!crawl?.rebalance) return;
    const split = await splitStraggler({ kv, source: openSource(crawl), dispatcher }, crawlId, {
      now: options.now,
      ...options.rebalance,
    });
    if (split) log(`split shard ${split.parent}: shard ${split.child} takes ${split.movedItems}`);
  };
  const plan = async (crawlId: string) => {
    const crawl = (await getCrawl(kv, crawlId)).value;
    if (crawl) await planCrawl({ kv, source: openSource(crawl), dispatcher }, crawlId);
  };
  let leaseWorkers = 0;
  const leaseWorker = (extra: Omit<LeaseWorkerOptions, "onShardDone">) =>
    runLeaseWorker({ kv, openSource }, {
      owner: `${prefix}-${leaseWorkers++}`,
      log,
      now: options.now,
      ...extra,
      onShardDone,
    });
  if (options.dispatch === "queue") {
    background.push(kv.listenQueue(createQueueHandler({ kv, openSource, now: options.now }, {
      onPlan: plan,
      onShardDone,
      onEvent: options.onQueueEvent,
    })));
  } else {
    for (let i = 0; i < (options.workers ?? 0); i++) {
      background.push(leaseWorker({ signal: stop.signal }));
    }
  }
  return {
    dispatcher,
    mode: options.dispatch,
    startPlanning: async (crawlId) => {
      // Lease workers plan crawls they find in `planning`; the queue needs a message.
      if (options.dispatch === "queue") await enqueuePlan(kv, crawlId);
    },
    watchdogTick: (o = {}) =>
      watchdog({ kv, dispatcher, openSource }, { stallMs: o.stallMs, now: options.now }),
    leaseTick: async (ms) => {
      if (options.dispatch === "lease") await leaseWorker({ maxRunMs: ms, signal: stop.signal });
    },
    runWorker: (o = {}) => leaseWorker({ signal: stop.signal, ...o }),
    close: async () => {
      stop.abort();
      // Lease workers end at their next step; the queue listener ends only when KV closes.
      if (options.dispatch === "lease") await Promise.allSettled(background);
    },
    finished: Promise.allSettled(background).then(() => {}),
  };
}
