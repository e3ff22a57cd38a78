/**
 * The CLI's side of following (`deno task crawl --follow`) and of refreshing a done crawl (the same
 * command run again): the engine's follow ticks (`follow.ts`), with what they did told in lines
 * and in the progress display.
 *
 * @module
 */
import { errorLine, FatalError, InputError } from "../base/errors.ts";
import { abortableSleep } from "../base/sleep.ts";
import { FOLLOW_POLL } from "../base/retry_policy.ts";
import {
  type CrawlRecord,
  crawlStatus,
  feedUsable,
  findCrawl,
  type FollowContext,
  type FollowTick,
  followTick,
  type Runtime,
  VERIFY_ROWS_EVERY_MS,
} from "../engine/mod.ts";
import { followLine, type Progress } from "./progress.ts";

/** What a refresh of a done crawl applied. */
export interface Refreshed {
  /** Changes applied. */
  applied: number;
  /** The sequence the crawl stood at before, and stands at now. */
  fromSeq: string;
  toSeq: string;
}

/** Follow ticks a refresh makes at most (each applies up to `FOLLOW_MAX_CHANGES`). */
const REFRESH_TICKS = 10_000;

/** How long a refresh waits for another process that holds the feed, in ms (its lease's length). */
const REFRESH_WAIT_MS = 35_000;

/**
 * Catches a done crawl up from the sequence it stands at (not a new crawl), then proves it before
 * it says the copy is current: every range's count held against the registry's ranks, and, when a
 * sweep is due (none within `verifyRowsEveryMs`), every row compared with the registry's. Says in
 * one line what it applied and what was proven. Ranges found wrong are listed again (the crawl is
 * `running` until they are: the caller waits for it). Null when the crawl has no change feed (said
 * in a line too). A registry whose feed cannot take the crawl from there (replaced, refusing) is
 * one line that offers the re-crawl, as an {@linkcode InputError}.
 */
export async function refreshDone(
  ctx: FollowContext,
  crawl: CrawlRecord,
  o: {
    log: (line: string) => void;
    kvPath: string;
    /** Every row compared when the last sweep is older than this, ms; 0: never. @default a day */
    verifyRowsEveryMs?: number;
  },
): Promise<Refreshed | null> {
  if (!feedUsable(crawl)) {
    o.log(
      `crawl ${crawl.id} was already done; its registry has no change feed, so it is not ` +
        "refreshed (delete the KV file or use another --crawl-id to crawl it again)",
    );
    return null;
  }
  const { kv, clock } = ctx;
  const rowsEvery = o.verifyRowsEveryMs ?? VERIFY_ROWS_EVERY_MS;
  let applied = 0;
  let fromSeq: string | null = null;
  let toSeq = crawl.startSeq;
  let waited = 0;
  /** Follow ticks with `opts` until `enough` says so; false when the crawl stopped being done. */
  const ticks = async (
    opts: { verifyEveryMs: number; verifyRowsEveryMs: number },
    enough: (t: FollowTick) => boolean,
  ): Promise<boolean> => {
    for (let i = 0; i < REFRESH_TICKS; i++) {
      let tick;
      try {
        tick = await followTick(ctx, crawl.id, opts);
      } catch (err) {
        // Where it stands: the last tick's, else the feed's record (read only on this rare path).
        const at = fromSeq === null
          ? (await crawlStatus(kv, crawl.id, { clock })).drift?.seq ?? crawl.startSeq
          : toSeq;
        throw new InputError(
          `crawl ${crawl.id} cannot be refreshed from seq ${at}: ${errorLine(err)}; to crawl ` +
            `the registry again from scratch, use another --crawl-id (or delete ${o.kvPath})`,
          { cause: err },
        );
      }
      if (!tick) return false;
      if (!tick.ran) {
        // Another live process is catching it up (a follower): its lease is renewed each batch.
        if (waited >= REFRESH_WAIT_MS) {
          throw new FatalError(
            `crawl ${crawl.id} is being caught up by another process (following it?); stop ` +
              "that one or let it follow",
          );
        }
        await clock.sleep(500);
        waited += 500;
        continue;
      }
      fromSeq ??= tick.from;
      applied += tick.applied;
      toSeq = tick.seq;
      if (enough(tick)) return true;
    }
    return true;
  };
  // The feed first, to its end; then the proofs, with the feed held where that left it.
  const before = await crawlStatus(kv, crawl.id, { clock });
  await ticks({ verifyEveryMs: 0, verifyRowsEveryMs: 0 }, (t) => t.atEnd && !t.busy);
  const lastRows = before.follow?.rows?.comparedAt ?? before.finishedAt;
  const rowsDue = rowsEvery > 0 &&
    (lastRows === null || clock.now() - Date.parse(lastRows) >= rowsEvery);
  let round = false;
  let swept = !rowsDue;
  let reopened = 0;
  await ticks({ verifyEveryMs: 1, verifyRowsEveryMs: rowsDue ? 1 : 0 }, (t) => {
    round ||= t.roundEnded;
    swept ||= t.sweepEnded;
    reopened += t.reopened;
    return reopened > 0 || (round && swept);
  });
  const after = await crawlStatus(kv, crawl.id, { clock });
  const f = after.follow;
  const since = crawl.finishedAt === null
    ? ""
    : ` (done ${new Date(crawl.finishedAt).toISOString()})`;
  const countsProven = f?.verifiedAt !== null && f?.verifiedAt !== undefined &&
    Date.parse(f.verifiedAt) >= clock.now() - 60_000 && reopened === 0;
  const proofs = reopened > 0
    ? `; ${reopened} range(s) found wrong: listing them again`
    : (countsProven
      ? `; counts of ${after.shardCount} ranges proven now`
      : `; counts of ${after.shardCount} ranges could not all be proven now (some kept changing)`) +
      (rowsDue && f?.rows?.comparedAt
        ? `; every row compared now (${
          f.rows.lastRepaired > 0 ? `${f.rows.lastRepaired} repaired` : "all equal"
        })`
        : lastRows
        ? `; rows last compared ${lastRows}`
        : "");
  const current = applied === 0 && countsProven && (f?.rows?.lastRepaired ?? 0) === 0;
  o.log(
    current
      ? `crawl ${crawl.id} was already done${since} and is current: no change since seq ${toSeq}` +
        proofs
      : `refreshed crawl ${crawl.id}${since}: applied ${applied} changes, now at seq ${toSeq}` +
        proofs,
  );
  return { applied, fromSeq: fromSeq ?? toSeq, toSeq };
}

/** Options of {@linkcode followRun}. */
export interface FollowRunOptions {
  /** Ends following. */
  signal: AbortSignal;
  /** Progress display (its line shows the lag). */
  progress?: Progress;
  /** One-line log messages. */
  log: (line: string) => void;
  /** Pause between looks while the registry changes, ms. @default FOLLOW_POLL.pollMs */
  pollMs?: number;
  /** Longest pause between looks at an idle registry, ms. @default FOLLOW_POLL.idleMs */
  idleMs?: number;
  /** Every range re-proven at least this often, ms; 0: never. @default 10 minutes */
  verifyEveryMs?: number;
  /** Every row compared at least this often, ms; 0: only when forced. @default a day */
  verifyRowsEveryMs?: number;
  /** Runs the watchdog (queue mode: a range repaired while following is finished by it). */
  watchdogTick?: () => Promise<unknown>;
}

/**
 * Follows crawl `crawlId` until `options.signal` aborts: its changes applied as they come, its
 * lag in the progress line, its ranges re-proven, a range found wrong listed again by the
 * runtime's workers (the crawl is `running` meanwhile). Throws a one-line error when the crawl
 * fails meanwhile (a repair that could not be made).
 */
export async function followRun(
  deps: { kv: Deno.Kv; runtime: Runtime },
  crawlId: string,
  options: FollowRunOptions,
): Promise<void> {
  const { kv, runtime } = deps;
  const { log, signal } = options;
  const crawl = await findCrawl(kv, crawlId);
  if (crawl && !feedUsable(crawl)) {
    log("the registry has no usable change feed; nothing to follow");
    return;
  }
  log(
    `following the registry's changes (every ${options.pollMs ?? FOLLOW_POLL.pollMs} ms while ` +
      `it changes, up to ${options.idleMs ?? FOLLOW_POLL.idleMs} ms idle; Ctrl-C to stop)`,
  );
  const stop = new AbortController();
  const ended = AbortSignal.any([signal, stop.signal]);
  let failure: Error | null = null;
  let lastError = "";
  const loop = runtime.follow(ended, {
    only: crawlId,
    pollMs: options.pollMs,
    idleMs: options.idleMs,
    verifyEveryMs: options.verifyEveryMs,
    verifyRowsEveryMs: options.verifyRowsEveryMs,
    onTick: (_c, tick, err) => {
      if (err) {
        const line = errorLine(err);
        if (line !== lastError) log(`follow: ${line}; trying again`);
        lastError = line;
        return;
      }
      lastError = "";
      if (tick && tick.applied > 0 && !options.progress) {
        log(`applied ${tick.applied} changes (seq ${tick.seq})`);
      }
      if (tick && tick.reopened > 0) log(`repairing: ${tick.state.verify?.lastRepair}`);
    },
  });
  // The watcher: the progress line, and the end of a repair that failed.
  let lastWatch = performance.now();
  while (!ended.aborted) {
    const report = await crawlStatus(kv, crawlId, { clock: runtime.deps.clock });
    if (report.status === "failed") {
      failure = new FatalError(`crawl ${crawlId} failed while following: ${report.error}`);
      stop.abort();
      break;
    }
    if (report.status === "done") options.progress?.update(report);
    if (report.status === "running" && performance.now() - lastWatch > 5000) {
      lastWatch = performance.now();
      await options.watchdogTick?.();
    }
    await abortableSleep(1000, ended);
  }
  await loop;
  if (failure) throw failure;
  const last = await crawlStatus(kv, crawlId, { clock: runtime.deps.clock });
  if (last.follow) log(`${crawlId} ${followLine(last.follow, Date.now())}`);
}
