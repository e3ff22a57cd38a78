/**
 * Following: a crawl that is `done` kept equal to the registry by applying its change feed
 * (`catch_up.ts`), one tick at a time, with how far behind it is recorded (`FollowState`): in
 * changes, and in time since the registry was first seen ahead of what was applied. The CLI's
 * `--follow` and `serve` tick followed crawls every `FOLLOW_POLL.pollMs` while changes come, less
 * often while the registry is idle ({@linkcode followPauseMs}); the watchdog's cron tick follows
 * them on Deploy, where no process lives between requests. A tick on a crawl another runner is
 * catching up does nothing (the feed's lease), so processes never fight over it, and each tick's
 * work is bounded (`maxChanges`), so a cron tick ends in time however far behind a crawl is.
 *
 * A tick reads the registry's `update_seq` (the head) first. When it is the sequence the crawl
 * stands at and no range is due for its re-proof, that one request is the whole tick (an idle
 * follower costs a few requests a minute). Otherwise the feed is read to its proven end, and then,
 * with the feed still held at that sequence, the ranges due are re-proven (`reprove.ts`).
 * Sequences are compared for equality only; the count of changes behind is 0 at the feed's end,
 * else the difference of integer sequences (an estimate, as npm's integers are), else unknown.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { backoff, FOLLOW_POLL } from "../../base/retry_policy.ts";
import { applyFeed, claimFeed, type Dispatcher, releaseFeed, seqNumber } from "../crawl/mod.ts";
import type { Source } from "../../plan/source.ts";
import { dueRanges, freshVerify, reproveDue, VERIFY_EVERY_MS } from "./reprove.ts";
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

/** Options of {@linkcode followTick}. */
export interface FollowOptions {
  /** Time and timers (the feed's lease, lags, pauses for documents behind the feed). @default SYSTEM_CLOCK */
  clock?: Clock;
  /** This follower's name in the feed's lease. @default a random UUID */
  owner?: string;
  /** Changes applied at most by this tick. @default FOLLOW_MAX_CHANGES */
  maxChanges?: number;
  /** Every range re-proven at least this often, in milliseconds; 0: never. @default 600000 */
  verifyEveryMs?: number;
  /** Where a range found wrong goes to be listed again. @default lease workers find it */
  dispatcher?: Dispatcher;
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
  /** How far behind it is now (as recorded). */
  state: FollowState;
}

/**
 * One follow tick of crawl `crawlId` (see the module comment). Null when the crawl is not a done
 * crawl with a usable change feed. Registry failures are thrown (the next tick tries again); a
 * registry replaced behind the URL is a `RegistryReplacedError`.
 */
export async function followTick(
  deps: { kv: Deno.Kv; source: Source },
  crawlId: string,
  options: FollowOptions = {},
): Promise<FollowTick | null> {
  const clock = options.clock ?? SYSTEM_CLOCK;
  const now = () => clock.now();
  const crawl = (await getCrawl(deps.kv, crawlId)).value;
  if (!followable(crawl)) return null;
  const [head, prior, feed] = await Promise.all([
    deps.source.updateSeq(),
    getFollow(deps.kv, crawlId).then((e) => e.value),
    getFeed(deps.kv, crawlId).then((e) => e.value),
  ]);
  const everyMs = options.verifyEveryMs ?? VERIFY_EVERY_MS;
  // The final check proved every range when the crawl was (last) marked done.
  const verify0 = !prior?.verify ||
      (crawl.finishedAt !== null && (prior.verify.verifiedAt ?? 0) < crawl.finishedAt)
    ? freshVerify(crawl, prior?.verify)
    : prior.verify;
  const before = feed?.seq ?? crawl.startSeq;
  const seenAhead = head !== null && head !== before;
  const behindSince = prior?.behindSince ?? (seenAhead ? now() : null);
  const state = (o: Partial<FollowState>): FollowState => ({
    head,
    behindSince,
    behind: estimateBehind(before, head),
    lastLagMs: prior?.lastLagMs ?? 0,
    applied: prior?.applied ?? 0,
    checkedAt: now(),
    verify: verify0,
    ...o,
  });
  const idle = { applied: 0, from: before, seq: before, checked: 0, reopened: 0 };
  if (!seenAhead && head !== null && !reproofDue(verify0, crawl, everyMs, now())) {
    const s = state({ behindSince: null, behind: 0 });
    await setFollow(deps.kv, crawlId, s);
    return { ...idle, atEnd: true, ran: true, state: s };
  }
  const claim = await claimFeed(deps.kv, crawlId, { owner: options.owner, clock });
  if (!claim) return { ...idle, atEnd: false, ran: false, state: state({}) };
  try {
    const res = await applyFeed(deps, claim, {
      maxChanges: options.maxChanges ?? FOLLOW_MAX_CHANGES,
    });
    if (!res) return { ...idle, atEnd: false, ran: false, state: state({}) };
    const seq = claim.entry.value.seq;
    const applied = (prior?.applied ?? 0) + res.applied;
    const proof = res.atEnd && everyMs > 0
      ? await reproveDue(deps, claim, verify0, {
        verifyEveryMs: everyMs,
        dispatcher: options.dispatcher,
      })
      : { verify: verify0, checked: 0, reopened: 0 };
    const s = res.atEnd
      ? state({
        // At the feed's end the registry stood at least at the sequence reached.
        head: seq,
        behindSince: null,
        behind: 0,
        lastLagMs: behindSince === null ? prior?.lastLagMs ?? 0 : now() - behindSince,
        applied,
        verify: proof.verify,
      })
      : state({ behind: estimateBehind(seq, head), applied, verify: proof.verify });
    await setFollow(deps.kv, crawlId, s);
    return {
      applied: res.applied,
      from: before,
      seq,
      atEnd: res.atEnd,
      ran: true,
      ...proof,
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
 * Quiet ticks in a row after `tick`, `quiet` before it: none once a tick applied something or did
 * not reach the feed's end; one more after a tick that found nothing, or failed (null).
 */
export function quietTicks(
  quiet: number,
  tick: Pick<FollowTick, "applied" | "atEnd"> | null,
): number {
  return tick && (tick.applied > 0 || !tick.atEnd) ? 0 : quiet + 1;
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
