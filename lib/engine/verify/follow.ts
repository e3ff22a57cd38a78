/**
 * Following: a crawl that is `done` kept equal to the registry by applying its change feed
 * (`catch_up.ts`), one tick at a time, with how far behind it is recorded (`FollowState`): in
 * changes, and in time since the registry was first seen ahead of what was applied, or, while looks
 * fail, since the last look that got an answer. The CLI's `--follow` and `serve` tick followed
 * crawls every `FOLLOW_POLL.pollMs` while changes come, less often while the registry is idle
 * ({@linkcode followPauseMs}); the watchdog's cron tick follows them on Deploy, where no process
 * lives between requests. A tick on a crawl another runner is catching up does nothing (the feed's
 * lease), so processes never fight over it, and each tick's work is bounded (`maxChanges`, pages of
 * a sweep), so a cron tick ends in time however far behind a crawl is.
 *
 * A tick first looks: the feed from where the crawl stands (one row) and the database info, at
 * once, each tried twice at most. The feed is always read: the database info may be stuck, cached
 * or ahead (`feed_read.ts`), and only the feed says there is nothing new. When there is nothing new
 * and no proof is due, that look is the whole tick (an idle follower costs a few requests a
 * minute). Otherwise the feed is read to its proven end, and then, with the feed still held at that
 * sequence, the ranges due have their counts re-proven (`reprove.ts`) and the rows due are compared
 * (`row_sweep.ts`). A feed that does not know the crawl's sequence (a registry that numbered its
 * changes anew) is taken up again at its head, and every row is compared at once: until that sweep
 * ends, how far behind the copy is is unknown, and said so. Sequences are compared for equality
 * only; the count of changes behind is 0 at the feed's end, else the difference of integer
 * sequences (an estimate, as npm's integers are), else unknown.
 *
 * @module
 */
import { errorLine } from "../../base/errors.ts";
import { backoff, FOLLOW_POLL } from "../../base/retry_policy.ts";
import {
  applyFeed,
  claimFeed,
  type FeedBatch,
  FeedReader,
  reanchor,
  releaseFeed,
  seqNumber,
  SinceUnknownError,
} from "../crawl/mod.ts";
import { dueRanges, freshVerify, reproveDue, VERIFY_EVERY_MS } from "./reprove.ts";
import { freshSweep, sweepDue, sweepRows, VERIFY_ROWS_EVERY_MS } from "./row_sweep.ts";
import { applyLate, extendTrail, lateDue } from "./late_changes.ts";
import type { FollowContext } from "./_pass.ts";
import {
  type CrawlRecord,
  followable,
  type FollowState,
  type FollowVerify,
  getCrawl,
  getFeed,
  getFollow,
  setFollow,
} from "../store/mod.ts";

/** Changes one follow tick applies at most; the rest is the next tick's. */
export const FOLLOW_MAX_CHANGES = 20_000;

/**
 * Tries of each request of a look before it fails: a look that fails is the next tick's to try
 * again, and meanwhile the lag shown grows from the last look that got an answer.
 */
const LOOK_ATTEMPTS = 2;

/** How a follow tick goes about its work (the environment's parts are in `FollowContext`). */
export interface FollowOptions {
  /** Changes applied at most by this tick. @default FOLLOW_MAX_CHANGES */
  maxChanges?: number;
  /** Every range's count re-proven at least this often, in milliseconds; 0: never. @default 600000 */
  verifyEveryMs?: number;
  /**
   * Every row compared with the registry's at least this often, in milliseconds; 0: only when a
   * sweep is forced (a feed taken up again at its head). @default VERIFY_ROWS_EVERY_MS (a day)
   */
  verifyRowsEveryMs?: number;
}

/** What one follow tick did. */
export interface FollowTick {
  /** Changes applied by this tick. */
  applied: number;
  /** The sequence the crawl stood at before this tick, and stands at now. */
  from: string;
  seq: string;
  /** The feed was read to its proven end (false: bounded, or another runner had it). */
  atEnd: boolean;
  /** False when another runner held the feed (nothing done, nothing recorded). */
  ran: boolean;
  /** Ranges re-proven by this tick. */
  checked: number;
  /** Ranges found wrong and listed again (the crawl is `running` until they are). */
  reopened: number;
  /** Rows compared with the registry's by this tick's row sweep, and repaired. */
  rowsCompared: number;
  rowsRepaired: number;
  /** The feed did not know where the crawl stood and was taken up again at its head. */
  resynced: boolean;
  /** This tick ended a round of count proofs (every range checked), or a row sweep. */
  roundEnded: boolean;
  sweepEnded: boolean;
  /** Work is left that the next tick goes on with at once (a sweep forced by a resync). */
  busy: boolean;
  /** How far behind it is now (as recorded). */
  state: FollowState;
}

/**
 * One follow tick of crawl `crawlId` (see the module comment). Null when the crawl is not a done
 * crawl with a change feed. A failed look is recorded (`failing`: since when, why; the lag grows
 * from the last good look) and thrown (the next tick tries again); a registry replaced behind the
 * URL is a `RegistryReplacedError`.
 */
export async function followTick(
  deps: FollowContext,
  crawlId: string,
  options: FollowOptions = {},
): Promise<FollowTick | null> {
  const clock = deps.clock;
  const crawl = (await getCrawl(deps.kv, crawlId)).value;
  if (!followable(crawl)) return null;
  const [prior, feed] = await Promise.all([
    getFollow(deps.kv, crawlId).then((e) => e.value),
    getFeed(deps.kv, crawlId).then((e) => e.value),
  ]);
  try {
    return await tick(deps, crawl, { prior, before: feed?.seq ?? crawl.startSeq }, options);
  } catch (err) {
    const nowMs = clock.now();
    const failing = { since: prior?.failing?.since ?? nowMs, reason: errorLine(err) };
    await setFollow(deps.kv, crawlId, {
      ...(prior ?? {
        head: null,
        behindSince: null,
        lastLagMs: 0,
        applied: 0,
        lastGoodAt: crawl.finishedAt ?? nowMs,
      }),
      behind: null,
      checkedAt: nowMs,
      failing,
    }).catch(() => {});
    throw err;
  }
}

/** The tick proper (see {@linkcode followTick}), its failures recorded by the caller. */
async function tick(
  deps: FollowContext,
  crawl: CrawlRecord & { startSeq: string },
  at: { prior: FollowState | null; before: string },
  options: FollowOptions,
): Promise<FollowTick> {
  const { prior, before } = at;
  const clock = deps.clock;
  const now = () => clock.now();
  const crawlId = crawl.id;
  const everyMs = options.verifyEveryMs ?? VERIFY_EVERY_MS;
  const rowsEveryMs = options.verifyRowsEveryMs ?? VERIFY_ROWS_EVERY_MS;
  // The final check proved every range when the crawl was (last) marked done.
  const fresh = !prior?.verify ||
    (crawl.finishedAt !== null && (prior.verify.verifiedAt ?? 0) < crawl.finishedAt);
  const verify0: FollowVerify = fresh ? freshVerify(crawl, prior?.verify) : prior!.verify!;
  verify0.rows ??= freshSweep(crawl.finishedAt ?? now());
  // The look: the feed from where the crawl stands and the database info, at once (the feed is
  // always read: a database info stuck or cached at the crawl's sequence hides nothing then).
  const reader = new FeedReader(deps.source, { clock, batch: 1, attempts: LOOK_ATTEMPTS });
  let look: FeedBatch | SinceUnknownError;
  try {
    look = await reader.next(before);
  } catch (err) {
    if (!(err instanceof SinceUnknownError)) throw err;
    look = err;
  }
  const head = reader.target ?? null;
  const sweeping = { total: crawl.total, everyMs: rowsEveryMs, nowMs: now() };
  const quiet = !(look instanceof SinceUnknownError) && look.rows.length === 0;
  const trail = extendTrail(prior?.trail, before, now());
  const late = lateDue(prior?.trail, {
    at: before,
    checkedAt: prior?.lateCheckedAt ?? null,
    nowMs: now(),
  });
  const good = {
    lastGoodAt: now(),
    failing: null,
    resync: prior?.resync ?? null,
    trail,
    lateCheckedAt: prior?.lateCheckedAt ?? null,
    lateApplied: prior?.lateApplied ?? 0,
  };
  const state = (o: Partial<FollowState>): FollowState => ({
    head,
    behindSince: prior?.behindSince ?? (quiet ? null : now()),
    behind: estimateBehind(before, head),
    lastLagMs: prior?.lastLagMs ?? 0,
    applied: prior?.applied ?? 0,
    checkedAt: now(),
    verify: verify0,
    ...good,
    ...o,
  });
  const idle = {
    applied: 0,
    from: before,
    seq: before,
    checked: 0,
    reopened: 0,
    rowsCompared: 0,
    rowsRepaired: 0,
    resynced: false,
    busy: false,
    roundEnded: false,
    sweepEnded: false,
  };
  const due = reproofDue(verify0, crawl, everyMs, now()) || sweepDue(verify0.rows, sweeping) ||
    late;
  if (quiet && !due) {
    // The feed's end, confirmed by the feed itself.
    const s = state({ head: before, behindSince: null, behind: 0 });
    await setFollow(deps.kv, crawlId, s);
    return { ...idle, atEnd: true, ran: true, state: s };
  }
  const claim = await claimFeed(deps, crawlId);
  if (!claim) return { ...idle, atEnd: false, ran: false, state: state({}) };
  try {
    let verify = verify0;
    let resync = prior?.resync ?? null;
    let res: { applied: number; atEnd: boolean } | null;
    try {
      if (look instanceof SinceUnknownError) throw look;
      res = await applyFeed(deps, claim, { maxChanges: options.maxChanges ?? FOLLOW_MAX_CHANGES });
    } catch (err) {
      if (!(err instanceof SinceUnknownError)) throw err;
      // Taken up at the feed's head: what changed meanwhile only a comparison of every row finds.
      res = await reanchor(deps, claim, err) ? { applied: 0, atEnd: true } : null;
      resync = { at: now(), from: err.since, to: err.head, why: err.message };
      const why =
        `the registry's feed did not know seq ${err.since}: taken up again at ${err.head}`;
      verify = { ...verify, rows: freshSweep(now(), verify.rows, why) };
    }
    if (!res) return { ...idle, atEnd: false, ran: false, state: state({}) };
    // Changes that reached the feed late, behind where the follower stood a while ago: looked for
    // once the feed holds nothing new, so that a busy feed's own changes are never held up.
    const lateRows = late && res.atEnd && res.applied === 0
      ? await applyLate(deps, claim, trail)
      : null;
    const seq = claim.entry.value.seq;
    const applied = (prior?.applied ?? 0) + res.applied;
    const proof = res.atEnd && everyMs > 0
      ? await reproveDue(deps, claim, verify, { verifyEveryMs: everyMs })
      : { verify, checked: 0, reopened: 0, roundEnded: false };
    verify = proof.verify;
    const rows = res.atEnd && sweepDue(verify.rows!, { ...sweeping, nowMs: now() })
      ? await sweepRows(deps, claim, verify.rows!, { total: crawl.total, everyMs: rowsEveryMs })
      : null;
    if (rows) verify = { ...verify, rows: rows.rows };
    const lateState = () =>
      lateRows
        ? {
          lateCheckedAt: now(),
          lateApplied: (prior?.lateApplied ?? 0) + lateRows.applied,
        }
        : {};
    // While a forced sweep runs, how far behind the copy is is not known: it is being compared.
    const forced = verify.rows!.forced !== null;
    const s = res.atEnd
      ? state({
        // At the feed's end the registry stood at least at the sequence reached.
        head: seq,
        behindSince: forced ? prior?.behindSince ?? now() : null,
        behind: forced ? null : 0,
        lastLagMs: forced || prior?.behindSince == null
          ? prior?.lastLagMs ?? 0
          : now() - prior.behindSince,
        applied,
        verify,
        resync,
        ...lateState(),
      })
      : state({ behind: behindShort(seq, head), applied, verify, resync, ...lateState() });
    await setFollow(deps.kv, crawlId, s);
    return {
      applied: res.applied,
      from: before,
      seq,
      atEnd: res.atEnd,
      ran: true,
      checked: proof.checked,
      reopened: proof.reopened,
      rowsCompared: rows?.compared ?? 0,
      rowsRepaired: rows?.repaired ?? 0,
      resynced: resync !== (prior?.resync ?? null),
      busy: forced,
      roundEnded: proof.roundEnded,
      sweepEnded: rows?.ended ?? false,
      state: s,
    };
  } finally {
    await releaseFeed(deps.kv, crawlId, claim.owner).catch(() => null);
  }
}

/** A done crawl whose change feed can be followed. */

/** Some range of a rank-planned crawl is due for its re-proof at `nowMs`. */
function reproofDue(v: FollowVerify, crawl: CrawlRecord, everyMs: number, nowMs: number): boolean {
  if (everyMs <= 0 || crawl.planMethod !== "rank") return false;
  if (v.retry.length > 0) return true;
  // Shard ids run below `nextShardId`: never fewer than the shards there are.
  return dueRanges(v, crawl.nextShardId, everyMs, nowMs) > v.next;
}

/** Changes between `seq` and `head` where integer sequences tell (an estimate), else null. */
function estimateBehind(seq: string | null, head: string | null): number | null {
  if (seq === null || head === null) return null;
  if (seq === head) return 0;
  if (!/^\d+$/.test(seq) || !/^\d+$/.test(head)) return null;
  return Math.max(0, (seqNumber(head) ?? 0) - (seqNumber(seq) ?? 0));
}

/**
 * How far behind a tick that stopped short of the feed's end leaves the crawl: the estimate where
 * it says more than none (a database info stuck or spelled otherwise may say none), else unknown.
 */
function behindShort(seq: string, head: string | null): number | null {
  const n = estimateBehind(seq, head);
  return n !== null && n > 0 ? n : null;
}

/**
 * Quiet ticks in a row after `tick`, `quiet` before it: none once a tick applied something, did
 * not reach the feed's end, or left work for the next (a forced sweep); one more after a tick that
 * found nothing, or failed (null).
 */
export function quietTicks(
  quiet: number,
  tick: Pick<FollowTick, "applied" | "atEnd"> & { busy?: boolean } | null,
): number {
  return tick && (tick.applied > 0 || !tick.atEnd || tick.busy) ? 0 : quiet + 1;
}

/**
 * The pause before a follower's next look after `quiet` quiet ticks in a row (see
 * {@linkcode quietTicks}), in milliseconds: `pollMs` while the registry changes and after the first
 * quiet tick, then doubled each quiet tick, at most `idleMs` (`FOLLOW_POLL`'s by default).
 */
export function followPauseMs(
  quiet: number,
  options: { pollMs?: number; idleMs?: number } = {},
): number {
  const firstMs = options.pollMs ?? FOLLOW_POLL.pollMs;
  const maxMs = Math.max(firstMs, options.idleMs ?? FOLLOW_POLL.idleMs);
  return backoff({ firstMs, maxMs, growth: "double", jitter: "none" }, quiet);
}
