/**
 * A whole crawl in one local process: KV queue dispatch, a periodic watchdog, progress, and a
 * summary. `deno task crawl` is a thin flag parser around {@linkcode runLocalCrawl}; tests call it
 * directly. Running it again with the same KV file and crawl id resumes where the last run stopped.
 *
 * @module
 */
import { catchUp } from "../engine/catch_up.ts";
import { CouchSource, type CouchSourceOptions } from "../sources/couch_source.ts";
import {
  crawlIdFor,
  type Dispatcher,
  planCrawl,
  resumeCrawl,
  startCrawl,
  watchdog,
} from "../engine/coordinator.ts";
import { crawlStatus, type CrawlStatusReport } from "../engine/status.ts";
import { ConflictError, FatalError } from "../base/errors.ts";
import { createQueueHandler, QueueDispatcher } from "../engine/queue_dispatch.ts";
import { LeaseDispatcher, runLeaseWorker } from "../engine/lease_dispatch.ts";
import type { Plan } from "../plan/planner.ts";
import type { Progress } from "./progress.ts";
import { type CrawlSpec, getCrawl, listShards, type ShardRecord } from "../engine/store.ts";
import type { Source } from "../plan/source.ts";

/** Options of {@linkcode runLocalCrawl}. */
export interface LocalCrawlOptions {
  /** Path of the KV file (created if missing; its directory must exist). */
  kvPath: string;
  /** What to crawl; identical specs resume the same crawl. */
  spec: CrawlSpec;
  /** The URL to read from now (differs from `spec.source` for the demo registry). */
  sourceUrl: string;
  /** Crawl id. @default derived from the spec */
  id?: string;
  /** A baked plan. */
  plan?: Plan;
  /** Progress display, if any. */
  progress?: Progress;
  /** One-line log messages. @default nothing */
  log?: (line: string) => void;
  /** HTTP options of the source (timeouts, retries, injected fetch). */
  sourceOptions?: CouchSourceOptions;
  /** How often the watchdog looks for stalled shards, in milliseconds. @default 5000 */
  watchdogIntervalMs?: number;
  /** A shard with no progress for this long is re-dispatched, in milliseconds. @default 30000 */
  stallMs?: number;
  /** How often status is polled, in milliseconds. @default 200 */
  pollMs?: number;
  /**
   * After the crawl is done, keep applying the registry's `_changes` every `followIntervalMs`
   * until this signal aborts (what npm mirrors do). @default not following
   */
  follow?: AbortSignal;
  /** Pause between `_changes` reads when following, in milliseconds. @default 2000 */
  followIntervalMs?: number;
  /** How shards reach workers. @default "queue" for a local file, "lease" for a remote KV URL */
  dispatch?: "queue" | "lease";
  /** In-process lease workers (lease mode). @default the shard count */
  workers?: number;
  /** Hook run after a shard finishes (dynamic rebalancing). */
  onShardDone?: (
    deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
    crawlId: string,
    shard: ShardRecord,
  ) => Promise<void>;
}

/** Applies `_changes` until `signal` aborts, logging each batch that changed something. */
async function follow(
  kv: Deno.Kv,
  source: Source,
  crawlId: string,
  signal: AbortSignal,
  options: LocalCrawlOptions,
  log: (line: string) => void,
): Promise<void> {
  const owner = `follow-${crawlId}`;
  log(`following the registry's changes (Ctrl-C to stop)`);
  while (!signal.aborted) {
    const res = await catchUp({ kv, source }, crawlId, { owner });
    if (res.seq === null) {
      log("the registry has no change feed; nothing to follow");
      return;
    }
    if (res.applied > 0) log(`applied ${res.applied} changes (seq ${res.seq})`);
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, options.followIntervalMs ?? 2000);
      signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
    });
  }
}

/**
 * Queues work on local KV files; a KV Connect URL (self-hosted denokv, Deploy) has no queues, so
 * shards go to lease workers there.
 */
export function autoDispatch(kvPath: string): "queue" | "lease" {
  const remote = /^https?:\/\//.test(kvPath);
  return !remote && typeof Deno.Kv.prototype.enqueue === "function" ? "queue" : "lease";
}

/** What a local crawl ended with. */
export interface LocalCrawlResult {
  /** The crawl's status at the end. */
  report: CrawlStatusReport;
  /** Wall time of this run, in milliseconds. */
  elapsedMs: number;
  /** Retries made in this run. */
  retries: number;
  /** This run created (and planned) the crawl. */
  created: boolean;
  /** Items stored by this run (less than the total when it resumed a crawl). */
  itemsThisRun: number;
}

/**
 * Runs (or resumes) a crawl to its end in this process. Resolves when the crawl is done; throws a
 * one-line error when it failed, was cancelled or paused meanwhile. The KV file is closed on return.
 */
export async function runLocalCrawl(options: LocalCrawlOptions): Promise<LocalCrawlResult> {
  const log = options.log ?? (() => {});
  let kv: Deno.Kv;
  try {
    kv = await Deno.openKv(options.kvPath);
  } catch (err) {
    throw new FatalError(`cannot open KV at ${options.kvPath}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const started = performance.now();
  let retries = 0;
  const source = new CouchSource(options.sourceUrl, {
    docsUrl: options.spec.docsUrl ?? undefined,
    maxPage: options.spec.maxPage,
    ...options.sourceOptions,
    onRetry: (info) => {
      retries++;
      options.sourceOptions?.onRetry?.(info);
    },
  });
  const mode = options.dispatch ?? autoDispatch(options.kvPath);
  const dispatcher: Dispatcher = mode === "queue" ? new QueueDispatcher(kv) : new LeaseDispatcher();
  const onShardDone = options.onShardDone
    ? (crawlId: string, shard: ShardRecord) =>
      options.onShardDone!({ kv, source, dispatcher }, crawlId, shard)
    : undefined;
  const fatal: Error[] = [];
  const stopWorkers = new AbortController();
  let background: Promise<unknown>;
  if (mode === "queue") {
    const handler = createQueueHandler({ kv, openSource: () => source }, {
      onEvent: (e) => {
        if (e.kind === "fatal") fatal.push(e.error);
        if (e.kind === "invalid-message") log("dropped a queue message of unknown shape");
        if (e.kind === "retry") {
          log(
            `shard ${e.message.shardId}: page failed (${e.error.message.split("\n")[0]}); ` +
              `retrying in ${(e.delayMs / 1000).toFixed(1)} s`,
          );
        }
        if (e.kind === "dead-letter") {
          log(
            `shard ${e.message.shardId}: page gave up after retries; the watchdog will revive it`,
          );
        }
      },
      onShardDone,
    });
    background = kv.listenQueue(handler);
  } else {
    const n = options.workers ?? options.spec.shards;
    background = Promise.all(
      Array.from({ length: n }, (_, i) =>
        runLeaseWorker({ kv, openSource: () => source }, {
          owner: `local-${i}-${crypto.randomUUID().slice(0, 8)}`,
          signal: stopWorkers.signal,
          onShardDone,
          log,
        })),
    );
  }
  try {
    const id = options.id ?? await crawlIdFor(options.spec);
    const existing = (await getCrawl(kv, id)).value;
    let created = false;
    let crawlId: string;
    if (existing) {
      crawlId = existing.id;
      const differs = (["source", "docsUrl", "docs", "maxPage"] as const).find((k) =>
        existing[k] !== options.spec[k]
      ) ??
        (!options.plan && existing.shards !== options.spec.shards && existing.status !== "planning"
          ? "shards"
          : undefined);
      if (differs) {
        throw new ConflictError(
          `crawl ${crawlId} in ${options.kvPath} was started with another ${differs}; ` +
            `use another --crawl-id or --kv`,
        );
      }
      if (existing.status === "cancelled") {
        throw new ConflictError(`crawl ${crawlId} was cancelled`);
      }
      if (existing.status === "planning") {
        log(`crawl ${crawlId} was being planned; planning it now`);
        await planCrawl({ kv, source, dispatcher }, crawlId, {
          plan: options.plan,
          owner: `local-${crawlId}`,
        });
      } else if (existing.status !== "done") {
        log(`resuming crawl ${crawlId} (${existing.status})`);
        if (existing.status === "running") {
          // After a kill: the message chain may have died with the process; duplicates are dropped.
          for (const e of await listShards(kv, crawlId)) {
            if (!e.value.done) {
              await dispatcher.dispatch(crawlId, e.value);
            }
          }
        } else await resumeCrawl({ kv, dispatcher }, crawlId);
      }
    } else {
      const res = await startCrawl({ kv, source, dispatcher }, options.spec, {
        id,
        plan: options.plan,
        // The same command re-claims its own planning lease after a crash.
        owner: `local-${id}`,
        onPlanned: (p) =>
          log(
            `planned ${p.total} items into ${p.shards.length} shards with ${p.requests} listing ` +
              `requests (method ${p.method})`,
          ),
      });
      crawlId = res.crawl.id;
      created = res.created;
      if (!created) log(`crawl ${crawlId} exists; resuming`);
    }
    let lastWatch = performance.now();
    let itemsBefore: number | null = null;
    for (;;) {
      const report = await crawlStatus(kv, crawlId);
      // A crawl this run created had nothing before it, however fast its first pages commit.
      itemsBefore ??= created ? 0 : report.itemsStored;
      const ended = report.status !== "running";
      options.progress?.update(report, ended);
      if (report.status === "done") {
        if (report.itemsStored === itemsBefore && !created) {
          log(`crawl ${crawlId} was already done`);
        }
        if (options.follow) await follow(kv, source, crawlId, options.follow, options, log);
        const final = options.follow ? await crawlStatus(kv, crawlId) : report;
        return {
          report: final,
          elapsedMs: performance.now() - started,
          retries,
          created,
          itemsThisRun: final.itemsStored - itemsBefore,
        };
      }
      if (report.status === "failed" || fatal.length > 0) {
        throw new FatalError(`crawl ${crawlId} failed: ${report.error ?? fatal[0]?.message}`);
      }
      if (report.status !== "running") {
        throw new ConflictError(`crawl ${crawlId} is ${report.status}`);
      }
      if (
        mode === "queue" && performance.now() - lastWatch > (options.watchdogIntervalMs ?? 5000)
      ) {
        lastWatch = performance.now();
        const n = await watchdog({ kv, dispatcher, openSource: () => source }, {
          stallMs: options.stallMs ?? 30_000,
        });
        if (n > 0) log(`watchdog: re-dispatched ${n} stalled shards`);
      }
      await new Promise((r) => setTimeout(r, options.pollMs ?? 200));
    }
  } finally {
    stopWorkers.abort();
    if (mode === "lease") await background.catch(() => {});
    kv.close();
    await background.catch(() => {});
  }
}
