/**
 * A whole crawl in one local process: the engine from `createRuntime` (lease workers in this
 * process by default), progress, and the numbers the summary prints. `deno task crawl` is a thin
 * flag parser around {@linkcode runLocalCrawl}; tests call it directly. Running it again with the
 * same KV file and crawl id resumes where the last run stopped; a second process started on the
 * same KV file joins the crawl as more workers.
 *
 * The CLI layer (`lib/cli/`): flags and help, this local crawl, progress, export; `tasks/` are
 * thin entry points over it.
 *
 * @module
 */
import {
  ConflictError,
  errorLine,
  FatalError,
  InputError,
  InterruptedError,
  StorageError,
} from "../base/errors.ts";
import type { CrawlSpec } from "../base/spec.ts";
import { PENDING_DOCS } from "../base/retry_policy.ts";
import type { Plan } from "../plan/planner.ts";
import type { CouchSourceOptions } from "../sources/couch/mod.ts";
import {
  crawlContext,
  type CrawlRecord,
  crawlStatus,
  type CrawlStatusReport,
  createRuntime,
  DEFAULT_WORKERS,
  type DispatchMode,
  findCrawl,
  type OpenAction,
  openCrawl,
  pendingPassLine,
  type RebalanceOptions,
  type Runtime,
  type Sink,
  type WorkEvent,
} from "../engine/mod.ts";
import { n, type Progress } from "./progress.ts";
import { drainSinks, sinkLoopOptions } from "./run_sinks.ts";
import { openKvFile, storageLine } from "./kv_file.ts";
import { anotherCrawlLine } from "./crawl_list.ts";
import { followRun, refreshDone, type Refreshed } from "./follow_run.ts";
import { type SourceOpener, sourceOpener } from "../sources/open_source.ts";
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
  /** HTTP options of the source (timeouts, retries, redirects, injected fetch). */
  sourceOptions?: CouchSourceOptions;
  /** How often the watchdog runs (queue mode), in milliseconds. @default 5000 */
  watchdogIntervalMs?: number;
  /** A shard with no progress for this long is re-dispatched, in milliseconds. @default 30000 */
  stallMs?: number;
  /**
   * How often status is polled, in milliseconds. @default 200, plus 1 ms for every 10 shards (at
   * most 2 s)
   */
  pollMs?: number;
  /**
   * After the crawl is done, keep following the registry's `_changes` until `signal` aborts
   * (`follow_run.ts`: the lag in the progress line, the copy re-proven). @default false
   */
  follow?: boolean;
  /**
   * Stops the run: while the crawl runs, its workers let their shards go at once and the run
   * throws {@linkcode InterruptedError} (the same command resumes); while following, it ends
   * following. @default never
   */
  signal?: AbortSignal;
  /** Pause between looks while following a registry that changes, ms. @default 500 */
  followPollMs?: number;
  /** Longest pause between looks at an idle registry while following, ms. @default 10000 */
  followIdleMs?: number;
  /** Every range re-proven at least this often while following, ms; 0: never. @default 600000 */
  verifyEveryMs?: number;
  /** Every row compared at least this often while following and refreshing, ms. @default a day */
  verifyRowsEveryMs?: number;
  /** How shards reach workers. @default "lease" (workers in this process) */
  dispatch?: DispatchMode;
  /** In-process lease workers (lease mode). @default the shard count, at most `DEFAULT_WORKERS` */
  workers?: number;
  /**
   * Kept equal to the crawl as it runs (and follows), from the ledger's notes; drained before the
   * run returns. @default none
   */
  sinks?: readonly Sink[];
  /** A sink that cannot be brought level at the end fails the run. @default false */
  sinksRequired?: boolean;
  /**
   * Called once the crawl is open (made and planned, or found), before its first progress line:
   * where a caller says what the crawl will cost (`estimate.ts`). @default none
   */
  onOpened?: (opened: OpenedCrawl) => Promise<void> | void;
  /** Tuning of straggler splits (only used when `spec.rebalance`). @default {} */
  rebalance?: RebalanceOptions;
  /** Failed attempts of a shard in a row before the crawl fails. @default 8 */
  maxShardFailures?: number;
}

/** A crawl just opened, as {@linkcode LocalCrawlOptions.onOpened} is told it. */
export interface OpenedCrawl {
  /** The store. */
  kv: Deno.Kv;
  /** The crawl's source (its requests go through the run's pacer). */
  source: Source;
  /** The crawl's record. */
  crawl: CrawlRecord;
  /** This run made (and planned) it. */
  created: boolean;
  /** Workers of this run. */
  workers: number;
}

/** What a local crawl ended with. */
export interface LocalCrawlResult {
  /** The crawl's status at the end. */
  report: CrawlStatusReport;
  /** Wall time of this run, in milliseconds. */
  elapsedMs: number;
  /** HTTP retries made in this run. */
  retries: number;
  /** This run created (and planned) the crawl. */
  created: boolean;
  /** Items stored by this run (less than the total when it resumed a crawl). */
  itemsThisRun: number;
  /** What refreshing a crawl that was already done applied (null: it was not refreshed). */
  refreshed: Refreshed | null;
}

/** How the plan's cuts were found, in words (docs/glossary.md, "plan"). */
const PLAN_METHOD_WORDS: Record<string, string> = {
  rank: "each cut where the registry ranks a key",
  skip: "each cut found by skipping rows: the registry gives no rank",
  listing: "cuts found by listing every row first: the registry gives no rank",
  prior: "the registry gives no rank: cut where npm's names fall in equal shares, no row listed " +
    "first; each shard's count an estimate, the total checked at the end",
};

/** One log line per work event worth telling a person about. */
function describe(e: WorkEvent): string | null {
  switch (e.kind) {
    case "retry":
      return `shard ${e.shardId}: ${e.error}; retrying in ${(e.delayMs / 1000).toFixed(1)} s`;
    case "split":
      return `split shard ${e.parent}: shard ${e.child} takes ${e.movedItems} items`;
    case "crawl-failed":
      return `crawl ${e.crawlId} failed: ${e.error}`;
    default:
      return null;
  }
}

/**
 * Runs (or resumes, or joins) a crawl to its end in this process. Resolves when the crawl is done;
 * throws a one-line error when it failed, was cancelled or paused meanwhile, or the disk filled
 * (nothing is lost then: the same command resumes). The KV file is closed on return.
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
  const openSource = localSources(options, log);
  const source = openSource(options.spec);
  const broken: Error[] = [];
  const poll = new Poll();
  // Ctrl-C is answered at once too, not at the next status read.
  options.signal?.addEventListener("abort", () => poll.wake(), { once: true });
  const workers = options.workers ?? Math.min(options.spec.shards, DEFAULT_WORKERS);
  // The run's crawl, once open: its sinks are this crawl's, not the file's other crawls'.
  let opened: string | null = null;
  const runtime = createRuntime({
    kv,
    openSource,
    dispatch: options.dispatch ?? "lease",
    workers,
    rebalance: options.rebalance,
    label: "local",
    maxPlanAttempts: 1,
    maxShardFailures: options.maxShardFailures,
    onEvent: (e) => {
      const line = describe(e);
      if (line) log(line);
      // The end is told at once rather than at the next poll (up to 200 ms later).
      if (e.kind === "crawl-done" || e.kind === "crawl-failed") poll.wake();
    },
    onProcessError: (err) => broken.push(err),
    log,
    sinks: sinkLoopOptions(options.sinks ?? [], log, () => opened),
    pendingDocs: { onError: (crawlId, err) => log(pendingPassLine(crawlId, err)) },
  });

  // Its first write (the heartbeat) is the first to find a damaged file: inside the try.
  let release = () => Promise.resolve();
  try {
    release = await runtime.acquire();
    const { crawl, action } = await openCrawl(
      crawlContext(runtime.deps, source, runtime.ownerName("local")),
      options.spec,
      {
        id: options.id,
        plan: options.plan,
        where: options.kvPath,
        onPlanned: (p) =>
          log(
            `planned ${n(p.total)} items into ${p.shards.length} shards` +
              `${p.method === "prior" ? "" : " of equal count"} with ` +
              `${p.requests} listing requests (${PLAN_METHOD_WORDS[p.method] ?? p.method})`,
          ),
      },
    );
    logOpened(crawl, action, log);
    opened = crawl.id;
    // A changed option that changes what is crawled starts another crawl: said, with which.
    const another = action === "created" ? await anotherCrawlLine(kv, crawl.id) : null;
    if (another) log(another);
    await options.onOpened?.({ kv, source, crawl, created: action === "created", workers });
    // A crawl already done is refreshed from its sequence: the same command keeps a copy current.
    const refreshed = action === "already-done"
      ? await refreshDone(crawlContext(runtime.deps, source, runtime.ownerName("refresh")), crawl, {
        log,
        kvPath: options.kvPath,
        verifyRowsEveryMs: options.verifyRowsEveryMs,
      })
      : null;
    let end = await waitForEnd(kv, crawl.id, { runtime, poll, broken }, options);
    // Documents behind their revision on the document host: the run ends when they landed (or
    // were given up on after the window); one that follows asks them again as it goes.
    if (!options.follow) {
      end = await waitForPendingDocs(kv, crawl.id, { runtime, poll }, end, options);
    }
    if (options.follow && !options.signal?.aborted) {
      await followRun({ kv, runtime }, crawl.id, {
        signal: options.signal ?? new AbortController().signal,
        progress: options.progress,
        log,
        pollMs: options.followPollMs,
        idleMs: options.followIdleMs,
        verifyEveryMs: options.verifyEveryMs,
        verifyRowsEveryMs: options.verifyRowsEveryMs,
        watchdogTick: () => runtime.watchdogTick({ stallMs: options.stallMs ?? 30_000 }),
      });
    }
    // What the crawl stored is in its sinks before the run says it ended (nothing lands after).
    await runtime.stopPendingDocs();
    await drainSinks({ kv, clock: runtime.deps.clock }, crawl.id, {
      sinks: options.sinks ?? [],
      log,
      required: options.sinksRequired,
    });
    const report = options.follow || refreshed || (options.sinks ?? []).length > 0
      ? await crawlStatus(kv, crawl.id, { clock: runtime.deps.clock })
      : end.report;
    return {
      refreshed,
      report,
      elapsedMs: performance.now() - started,
      retries: source.retries ?? 0,
      created: action === "created",
      itemsThisRun: report.itemsStored - (action === "created" ? 0 : end.itemsBefore),
    };
  } catch (err) {
    throw broken.includes(err as Error) || err instanceof StorageError
      ? processFailure(err as Error, options.kvPath)
      : err;
  } finally {
    // Letting go writes to KV (the heartbeat): on a file that failed, that fails too, and must
    // not take the place of the line that says why the run ended.
    await release().catch(() => {});
    await runtime.close().catch(() => {});
    kv.close();
    await runtime.finished;
  }
}

/** The local crawl's sources; their retries are logged at most once every few seconds. */
function localSources(options: LocalCrawlOptions, log: (line: string) => void): SourceOpener {
  let lastLog = 0;
  return sourceOpener({
    ...options.sourceOptions,
    overrides: { [options.spec.source]: options.sourceUrl },
    onRetry: (info) => {
      options.sourceOptions?.onRetry?.(info);
      if (performance.now() - lastLog < 5000) return;
      lastLog = performance.now();
      // The error says what failed where (the request's own timeout, its host).
      log(`registry: ${errorLine(info.error)}; retrying (attempt ${info.attempt + 1})`);
    },
  });
}

function logOpened(crawl: CrawlRecord, action: OpenAction, log: (line: string) => void): void {
  if (action === "resumed") log(`resuming crawl ${crawl.id}`);
  if (action === "planned") log(`crawl ${crawl.id} was being planned; planned it now`);
  if (action === "joined") log(`crawl ${crawl.id} is being planned by another process; joining`);
}

/**
 * Polls the crawl's status (drawing progress) until it is done, running the watchdog in queue
 * mode. Throws a one-line error when the crawl fails or is paused or cancelled meanwhile.
 */
async function waitForEnd(
  kv: Deno.Kv,
  crawlId: string,
  run: { runtime: Runtime; poll: Poll; broken: Error[] },
  options: LocalCrawlOptions,
): Promise<{ report: CrawlStatusReport; itemsBefore: number }> {
  const { runtime, poll, broken } = run;
  let lastWatch = performance.now();
  let itemsBefore: number | null = null;
  for (;;) {
    if (broken.length > 0) throw broken[0];
    if (options.signal?.aborted) {
      throw new InterruptedError(
        `crawl ${crawlId} stopped: its shards are let go; the same command resumes it`,
      );
    }
    const report = await crawlStatus(kv, crawlId, { clock: runtime.deps.clock });
    itemsBefore ??= report.itemsStored;
    const settled = report.status !== "running" && report.status !== "planning";
    if (report.status === "failed") {
      // One line says it (the error line); a progress line of a failed crawl would only repeat it.
      const why = `crawl ${crawlId} failed: ${report.error}`;
      throw (await findCrawl(kv, crawlId))?.failedOnInput
        ? new InputError(why)
        : new FatalError(why);
    }
    options.progress?.update(report, settled);
    if (report.status === "done") return { report, itemsBefore };
    if (settled) throw new ConflictError(`crawl ${crawlId} is ${report.status}`);
    if (performance.now() - lastWatch > (options.watchdogIntervalMs ?? 5000)) {
      lastWatch = performance.now();
      await runtime.watchdogTick({ stallMs: options.stallMs ?? 30_000 });
    }
    // A status reads every shard: with many, it is read less often (2,000 shards: every 0.4 s).
    const every = options.pollMs ?? 200 + Math.min(1800, report.shardCount / 10);
    await poll.sleep(every);
  }
}

/**
 * Waits, drawing progress, until no document of the done crawl is pending (each landed at its
 * item's revision, or was given up on after `PENDING_DOCS.windowMs`), asking them again as they
 * fall due. Interrupted, it stops waiting: what is pending stays so in KV, and the same command
 * asks it again.
 */
async function waitForPendingDocs(
  kv: Deno.Kv,
  crawlId: string,
  run: { runtime: Runtime; poll: Poll },
  end: { report: CrawlStatusReport; itemsBefore: number },
  options: LocalCrawlOptions,
): Promise<{ report: CrawlStatusReport; itemsBefore: number }> {
  if (!end.report.docs) return end;
  let said = false;
  for (;;) {
    const pass = await run.runtime.pendingPass(crawlId);
    const report = await crawlStatus(kv, crawlId, { clock: run.runtime.deps.clock });
    if (pass.pending === 0 || options.signal?.aborted) return { ...end, report };
    if (!said) {
      said = true;
      options.log?.(
        `${pass.pending} documents are behind their revision on the document host: asking them ` +
          `again until they land (at most ${PENDING_DOCS.windowMs / 60_000} min each)`,
      );
    }
    options.progress?.update(report, false);
    const now = run.runtime.deps.clock.now();
    await run.poll.sleep(Math.max(100, Math.min(1_000, (pass.nextMs ?? now) - now)));
  }
}

/** A pause between status reads that an event this process saw can cut short. */
class Poll {
  #wake: (() => void) | null = null;
  #early = false;

  /** Waits `ms`, or until {@linkcode wake} (also when it came before this call). */
  sleep(ms: number): Promise<void> {
    if (this.#early) {
      this.#early = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => (this.#wake = null, resolve()), ms);
      this.#wake = () => (clearTimeout(timer), this.#wake = null, resolve());
    });
  }

  /** Ends the current pause, or the next one at once. */
  wake(): void {
    if (this.#wake) this.#wake();
    else this.#early = true;
  }
}

/** The one line a process-level failure ends the run with. */
function processFailure(err: Error, kvPath: string): Error {
  if (err instanceof StorageError) {
    return new StorageError(storageLine(err, kvPath), { cause: err });
  }
  return new FatalError(`a worker stopped: ${errorLine(err)}`, { cause: err });
}
