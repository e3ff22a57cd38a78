/**
 * The copy kept proven while it follows: a crawl that is `done` and follows its registry has its
 * ranges held against the registry's ranks again on a schedule, with the rules of the final check
 * (`_final_rounds.ts`: small ranges by one listing of their rows, the others by ranks, each decided
 * only by what the changes that landed meanwhile cannot explain). Every range is checked at least
 * once per `verifyEveryMs`, spread over the period (a 16-shard crawl checked every 10 minutes costs
 * one range every 37 s), one follow tick at a time, with the feed held at the sequence the tick
 * applied it to.
 *
 * A range left undecided (the registry changed inside it while it was counted) is tried again at
 * the next ticks, a few times. A range found wrong puts the crawl back to `running` with that range
 * listed again: the engine's own repair, which ends with the final check proving every range and
 * the crawl `done` again (and `verifiedAt` then). A round whose every range was proven is the copy
 * proven whole: `verifiedAt`.
 *
 * @module
 */
import { type FeedClaim, transition } from "../crawl/mod.ts";
import type { FollowContext } from "./_pass.ts";
import { checkShards, noteVerification, type Pass, settle } from "./_final_rounds.ts";
import { MAX_RELISTS, type RangeVerdict } from "./_verdicts.ts";
import { RangeParts } from "./_range_parts.ts";
import { applyWindow } from "./_pass_feed.ts";
import { type CrawlRecord, type FollowVerify, listShards } from "../store/mod.ts";

/** How often every range of a followed crawl is re-proven by default, in milliseconds. */
export const VERIFY_EVERY_MS = 600_000;

/** Ranges one tick re-proves at most (the rest are due at the next ticks). */
const RANGES_PER_TICK = 32;

/** Tries of a range left undecided before its round gives up on it. */
const UNDECIDED_TRIES = 5;

/** What a re-proof tick did. */
export interface ReproveResult {
  /** Where the re-proof stands now (to be stored by the caller). */
  verify: FollowVerify;
  /** Ranges checked by this tick. */
  checked: number;
  /** Ranges found wrong and listed again by this tick (the crawl is `running` again then). */
  reopened: number;
  /** This tick ended a round: every range was checked (proven whole when `verifiedAt` moved). */
  roundEnded: boolean;
}

/**
 * The re-proof state of a crawl the first time it follows, or after it was done again: the final
 * check proved every range's count when the crawl was marked done (the row sweep under way, if
 * any, goes on).
 */
export function freshVerify(crawl: CrawlRecord, prior?: FollowVerify): FollowVerify {
  return {
    roundStartedAt: crawl.finishedAt ?? crawl.updatedAt,
    next: 0,
    retry: [],
    undecided: 0,
    verifiedAt: crawl.finishedAt,
    repaired: prior?.repaired ?? 0,
    lastRepair: prior?.lastRepair ?? null,
    // The row sweep goes on where it stood: the final check proved counts, not rows.
    ...(prior?.rows ? { rows: prior.rows } : {}),
  };
}

/**
 * Ranges of the round under way due by `nowMs`: the round's share of `ranges`, as much of it as
 * the time since the round began is of `everyMs`.
 */
export function dueRanges(v: FollowVerify, ranges: number, everyMs: number, nowMs: number): number {
  const elapsed = Math.max(0, nowMs - v.roundStartedAt);
  return Math.min(ranges, Math.ceil(ranges * elapsed / Math.max(1, everyMs)));
}

/**
 * Re-proves the ranges due now (see the module comment), with the feed held by `claim` and
 * applied to its end. Ranges checked are those left undecided before, then the next ones of the
 * round, as many as the time since the round began makes due (at most 32 a tick).
 */
export async function reproveDue(
  deps: Pick<FollowContext, "kv" | "source" | "dispatcher" | "clock">,
  claim: FeedClaim,
  prior: FollowVerify,
  options: {
    /** Every range re-proven at least this often, in milliseconds. @default VERIFY_EVERY_MS */
    verifyEveryMs?: number;
  } = {},
): Promise<ReproveResult> {
  const now = () => deps.clock.now();
  const everyMs = Math.max(1, options.verifyEveryMs ?? VERIFY_EVERY_MS);
  const id = claim.crawl.id;
  const shards = await listShards(deps.kv, id);
  const n = shards.length;
  const retries = prior.retry.slice(0, RANGES_PER_TICK);
  const dueNow = dueRanges(prior, n, everyMs, now()) - prior.next;
  const take = Math.max(0, Math.min(dueNow, RANGES_PER_TICK - retries.length));
  const fresh = shards.slice(prior.next, prior.next + take);
  const byId = new Map(shards.map((e) => [e.value.id, e]));
  const todo = [...retries.map((r) => byId.get(r.id)).filter((e) => e !== undefined), ...fresh];
  let verify: FollowVerify = { ...prior, next: prior.next + fresh.length, retry: [] };
  let reopened = 0;
  let roundEnded = false;
  if (todo.length > 0) {
    const pass: Pass = {
      kv: deps.kv,
      source: deps.source,
      id,
      o: { clock: deps.clock, dispatcher: deps.dispatcher },
      feed: claim,
      applied: 0,
      proven: new Set(),
      parts: new RangeParts(),
      feedRefusals: 0,
      unproven: new Map(),
    };
    const verdicts = await checkShards(pass, todo, claim.entry.value.seq);
    // What the checks excused as changed after the feed's sequence is applied now: an id the feed
    // lists once, after that sequence, is never left older than it (the feed stays where it is).
    await applyWindow(pass, { read: false });
    const tries = new Map(retries.map((r) => [r.id, r.tries]));
    for (const v of verdicts) {
      if (v.verdict !== "undecided") continue;
      const t = (tries.get(v.id) ?? 0) + 1;
      if (t < UNDECIDED_TRIES) verify.retry.push({ id: v.id, tries: t });
      else verify.undecided++;
    }
    // Equal ranges are marked proven (and their relists forgotten).
    await settle(deps.kv, id, todo, verdicts.filter((v) => v.verdict === "equal"), {
      clock: deps.clock,
      at: claim.entry.value.seq,
    });
    const wrong = verdicts.filter((v) => v.verdict === "mismatch");
    // A range listed again as often as allowed lately that still disagrees stays `unproven` (the
    // crawl stays done, saying so, and never flips to exact and back); after a period it may be
    // listed again. The others are listed again now.
    const relistable = (v: RangeVerdict) => {
      const shard = byId.get(v.id)!.value;
      return (shard.relists ?? 0) < MAX_RELISTS || now() - (shard.relistedAt ?? 0) >= everyMs;
    };
    const stuck = wrong.filter((v) => !relistable(v));
    const again = wrong.filter(relistable);
    if (stuck.length > 0) {
      const unproven = new Map<number, string>();
      await settle(deps.kv, id, todo, stuck, {
        clock: deps.clock,
        at: claim.entry.value.seq,
        keepDone: true,
        unproven,
      });
      await noteVerification(deps.kv, id, "done", {
        status: "unproven",
        detail: `${unproven.size} of ${n} ranges could not be proven while following: ` +
          `${[...unproven.values()].join("; ")}; they are tried again every ${everyMs} ms`,
      });
    }
    if (again.length > 0) {
      const detail = `${again.length} range(s) found wrong while following ` +
        `(${
          again.map((v) => `shard ${v.id}: ${v.stored} stored, ${v.span} listed`).join("; ")
        }): ` +
        "listing again";
      // The crawl is running before its ranges are opened: a crash between the two leaves a
      // running crawl whose final check finds them again, never a done crawl with an open shard.
      await transition(deps.kv, id, "running", (s) => s === "done", {
        clock: deps.clock,
        patch: { verification: { status: "pending", detail } },
      });
      // A range allowed again after its period starts its count again.
      const entries = todo.map((e) =>
        again.some((v) => v.id === e.value.id) && (e.value.relists ?? 0) >= MAX_RELISTS
          ? { ...e, value: { ...e.value, relists: 0 } }
          : e
      );
      reopened = await settle(deps.kv, id, entries, again, {
        clock: deps.clock,
        dispatcher: deps.dispatcher,
        at: claim.entry.value.seq,
        keepDone: true,
      });
      verify = { ...verify, repaired: verify.repaired + again.length, lastRepair: detail };
    }
  }
  if (verify.next >= n && verify.retry.length === 0 && reopened === 0) {
    // A round over: proven whole by counts when every range was decided equal.
    const whole = verify.undecided === 0 &&
      (await listShards(deps.kv, id)).every((e) => e.value.verified !== "unproven");
    if (whole) {
      await noteVerification(deps.kv, id, "done", {
        status: "exact",
        detail: `every one of ${n} ranges proven again while following, at seq ` +
          claim.entry.value.seq,
      }, (v) => v?.status === "unproven");
    }
    verify = {
      ...verify,
      verifiedAt: whole ? now() : verify.verifiedAt,
      roundStartedAt: now(),
      next: 0,
      undecided: 0,
    };
    roundEnded = true;
  }
  return { verify, checked: todo.length, reopened, roundEnded };
}
