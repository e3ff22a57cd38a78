/**
 * A whole crawl in one local process: the engine from `createRuntime`, a periodic watchdog,
 * progress, and the numbers the summary prints. `deno task crawl` is a thin flag parser around
 * {@linkcode runLocalCrawl}; tests call it directly. Running it again with the same KV file and
 * crawl id resumes where the last run stopped.
 *
 * The CLI layer (`lib/cli/`): flags and help, this local crawl, progress, export; `tasks/` are
 * thin entry points over it.
 *
 * @module
 */
import { ConflictError, FatalError } from "../base/errors.ts";
import type { CrawlSpec } from "../base/spec.ts";
import type { Plan } from "../plan/planner.ts";
import type { Source } from "../plan/source.ts";
import { CouchSource, type CouchSourceOptions } from "../sources/couch_source.ts";
import { catchUp } from "../engine/catch_up.ts";
import { type OpenAction, openCrawl } from "../engine/coordinator.ts";
import { createRuntime, type DispatchMode, type Runtime } from "../engine/runtime.ts";
import type { RebalanceOptions } from "../engine/rebalance.ts";
import { crawlStatus, type CrawlStatusReport } from "../engine/status.ts";
import type { Progress } from "./progress.ts";

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
  dispatch?: DispatchMode;
  /** In-process lease workers (lease mode). @default the shard count */
  workers?: number;
  /** Tuning of straggler splits (only used when `spec.rebalance`). @default {} */
  rebalance?: RebalanceOptions;
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
 * Queues work on local KV files; a KV Connect URL (self-hosted denokv, Deploy) has no queues, so
 * shards go to lease workers there.
 */
export function autoDispatch(kvPath: string): DispatchMode {
  const remote = /^https?:\/\//.test(kvPath);
  return !remote && typeof Deno.Kv.prototype.enqueue === "function" ? "queue" : "lease";
}

/** Opens the KV file, or says in one line why it cannot be opened. */
export async function openKvFile(path: string): Promise<Deno.Kv> {
  try {
    return await Deno.openKv(path);
  } catch (err) {
    throw new FatalError(`cannot open KV at ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Runs (or resumes) a crawl to its end in this process. Resolves when the crawl is done; throws a
 * one-line error when it failed, was cancelled or paused meanwhile. The KV file is closed on return.
 *
 * @example
 * ```ts
 * const res = await runLocalCrawl({
 *   kvPath: "crawl.kv",
 *   spec: buildSpec({ source: "http://127.0.0.1:5984/registry", shards: 16 }),
 *   sourceUrl: "http://127.0.0.1:5984/registry",
 * });
 * console.log(res.report.itemsStored);
 * ```
 */
export async function runLocalCrawl(options: LocalCrawlOptions): Promise<LocalCrawlResult> {
  const log = options.log ?? (() => {});
  const kv = await openKvFile(options.kvPath);
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
  const fatal: Error[] = [];
  const mode = options.dispatch ?? autoDispatch(options.kvPath);
  const runtime = createRuntime({
    kv,
    openSource: () => source,
    dispatch: mode,
    workers: options.workers ?? options.spec.shards,
    rebalance: options.rebalance,
    ownerPrefix: `local-${crypto.randomUUID().slice(0, 8)}`,
    log,
    onQueueEvent: (e) => {
      if (e.kind === "fatal") fatal.push(e.error);
      if (e.kind === "invalid-message") log("dropped a queue message of unknown shape");
      if (e.kind === "retry") {
        log(
          `shard ${e.message.shardId}: page failed (${e.error.message.split("\n")[0]}); ` +
            `retrying in ${(e.delayMs / 1000).toFixed(1)} s`,
        );
      }
      if (e.kind === "dead-letter") {
        log(`shard ${e.message.shardId}: page gave up after retries; the watchdog will revive it`);
      }
    },
  });
  try {
    const { crawl, action } = await openCrawl(
      { kv, source, dispatcher: runtime.dispatcher },
      options.spec,
      {
        id: options.id,
        plan: options.plan,
        where: options.kvPath,
        // The same command re-claims its own planning lease after a crash.
        owner: `local-${options.id ?? "spec"}`,
        onPlanned: (p) =>
          log(
            `planned ${p.total} items into ${p.shards.length} shards with ${p.requests} listing ` +
              `requests (method ${p.method})`,
          ),
      },
    );
    logOpened(crawl.id, action, log);
    const end = await waitForEnd(kv, crawl.id, runtime, options, { fatal, log });
    const report = options.follow
      ? (await follow(kv, source, crawl.id, options, log), await crawlStatus(kv, crawl.id))
      : end.report;
    return {
      report,
      elapsedMs: performance.now() - started,
      retries,
      created: action === "created",
      itemsThisRun: report.itemsStored - (action === "created" ? 0 : end.itemsBefore),
    };
  } finally {
    await runtime.close();
    kv.close();
    await runtime.finished;
  }
}

function logOpened(id: string, action: OpenAction, log: (line: string) => void): void {
  if (action === "resumed") log(`resuming crawl ${id}`);
  if (action === "planned") log(`crawl ${id} was being planned; planned it now`);
  if (action === "already-done") log(`crawl ${id} was already done`);
}

/**
 * Polls the crawl's status (drawing progress) until it is done, running the watchdog in queue
 * mode. Throws a one-line error when the crawl fails or is paused or cancelled meanwhile.
 */
async function waitForEnd(
  kv: Deno.Kv,
  crawlId: string,
  runtime: Runtime,
  options: LocalCrawlOptions,
  o: { fatal: Error[]; log: (line: string) => void },
): Promise<{ report: CrawlStatusReport; itemsBefore: number }> {
  let lastWatch = performance.now();
  let itemsBefore: number | null = null;
  for (;;) {
    const report = await crawlStatus(kv, crawlId);
    itemsBefore ??= report.itemsStored;
    options.progress?.update(report, report.status !== "running");
    if (report.status === "done") return { report, itemsBefore };
    if (report.status === "failed" || o.fatal.length > 0) {
      throw new FatalError(`crawl ${crawlId} failed: ${report.error ?? o.fatal[0]?.message}`);
    }
    if (report.status !== "running") {
      throw new ConflictError(`crawl ${crawlId} is ${report.status}`);
    }
    if (
      runtime.mode === "queue" &&
      performance.now() - lastWatch > (options.watchdogIntervalMs ?? 5000)
    ) {
      lastWatch = performance.now();
      const n = await runtime.watchdogTick({ stallMs: options.stallMs ?? 30_000 });
      if (n > 0) o.log(`watchdog: re-dispatched ${n} stalled shards`);
    }
    await new Promise((r) => setTimeout(r, options.pollMs ?? 200));
  }
}

/** Applies `_changes` until `options.follow` aborts, logging each batch that changed something. */
async function follow(
  kv: Deno.Kv,
  source: Source,
  crawlId: string,
  options: LocalCrawlOptions,
  log: (line: string) => void,
): Promise<void> {
  const signal = options.follow!;
  log(`following the registry's changes (Ctrl-C to stop)`);
  while (!signal.aborted) {
    const res = await catchUp({ kv, source }, crawlId, { owner: `follow-${crawlId}` });
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
