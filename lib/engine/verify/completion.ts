/**
 * The end of a crawl: when every shard is done, `_changes` since the start is applied to its
 * proven end (`catch_up.ts`), every range is proven to hold what the registry lists there
 * (`_verdicts.ts`, in the rounds of `_final_rounds.ts`, a range that never holds still a part at a time
 * in `_range_parts.ts`; a range that disagrees is listed again), and only
 * then is the crawl `done`, with a record of how it was checked (the watchdog, `watchdog.ts`, calls
 * it for crawls whose shards are all done).
 *
 * @module
 */
import { errorLine, FatalError, PermanentError } from "../../base/errors.ts";
import type { Source } from "../../plan/source.ts";
import {
  claimFeed,
  failCrawl,
  type FeedClaim,
  RegistryReplacedError,
  releaseFeed,
  SinceUnknownError,
} from "../crawl/mod.ts";
import { advanceFeed, resyncPass } from "./_pass_feed.ts";
import { backoff, type BackoffPolicy, FINAL_CHECK_RETRY } from "../../base/retry_policy.ts";
import {
  type CrawlRecord,
  feedUsable,
  type FinishState,
  getCrawl,
  keys,
  listPending,
  listShards,
  releaseLease,
  takeLease,
} from "../store/mod.ts";
import { RangeParts } from "./_range_parts.ts";
import type { PassSettings, VerifyContext } from "./_pass.ts";
import { heldStill, type Pass, rankRound, totalRound } from "./_final_rounds.ts";

/** The pause before a round after rounds that proved nothing (doubling). */
const QUIET_PAUSE: BackoffPolicy = {
  firstMs: FINAL_CHECK_RETRY.firstPauseMs,
  maxMs: FINAL_CHECK_RETRY.maxPauseMs,
  growth: "double",
  jitter: "none",
};

/**
 * Marks the crawl done when every shard is done and the store is proven to hold what the registry
 * holds (see the module comment). Returns true when the crawl is done. Ranges that cannot be
 * decided yet (the registry kept changing in them) are checked again at the next call, which the
 * lease workers and the watchdog make; a range that disagrees is listed again, and one that still
 * disagrees fails the crawl, as does a registry that was replaced.
 * @throws TransientError when the registry failed for now (the next call tries again).
 */
export async function checkCompletion(
  ctx: VerifyContext,
  id: string,
  options: {
    /**
     * Checks in a row that prove nothing before giving the turn back (one that proves a range or a
     * part of one starts the count again). @default FINAL_CHECK_RETRY.roundsPerPass
     */
    maxRounds?: number;
    /** Called when this call marks the crawl done (not when it found it done). @default none */
    onFinished?: () => void;
  } = {},
): Promise<boolean> {
  const { kv, clock, owner } = ctx;
  const crawl = (await getCrawl(kv, id)).value;
  if (!crawl) return false;
  if (crawl.status === "done") return true;
  if (crawl.status !== "running") return false;
  // The pending index answers "all done?" in one read, however many shards there are.
  if (crawl.indexed && (await listPending(kv, id, { limit: 1 })).length > 0) return false;
  const shards = (await listShards(kv, id)).map((e) => e.value);
  if (shards.length === 0 || shards.some((s) => !s.done)) return false;
  const source = ctx.openSource(crawl);
  // One runner at a time checks a crawl, under its finishing lease (renewed each round); with a
  // feed it holds the feed too, to apply it. Two at once raced: one listed a range again (its shard
  // reset) while the other counted the shards, found half the items missing and failed the crawl.
  const hold = () => holdFinishing(ctx, id);
  if (!await hold()) return false; // another runner has it
  let claim: FeedClaim | null = null;
  try {
    if (feedUsable(crawl)) {
      claim = await claimFeed(ctx, id);
      if (!claim) return false; // another runner holds the feed
    }
    // Another runner may have finished the crawl since it was read above (it marks the crawl done
    // before it gives the lease back), or listed a range again (its shard is not done).
    const status = (await getCrawl(kv, id)).value?.status;
    if (status !== "running") return status === "done";
    if ((await listShards(kv, id)).some((e) => !e.value.done)) return false;
    const settings = { clock, dispatcher: ctx.dispatcher, ...options };
    // A refusal that asking again in every form the registry takes did not avoid comes again:
    // a few passes, then the crawl is failed with it, never left running on it.
    const { permanentAttempts, permanentPauseMs } = FINAL_CHECK_RETRY;
    for (let attempt = 1;; attempt++) {
      try {
        return await finish(kv, source, claim, crawl, settings, hold);
      } catch (err) {
        if (!(err instanceof PermanentError) || attempt >= permanentAttempts) throw err;
        await clock.sleep(permanentPauseMs * attempt);
        if (!await hold()) return false;
      }
    }
  } catch (err) {
    if (err instanceof PermanentError) {
      const why = `the final check failed ${FINAL_CHECK_RETRY.permanentAttempts} times: ` +
        errorLine(err);
      await failCrawl(kv, id, { reason: why, clock }).catch(() => {});
      return false;
    }
    if (err instanceof RegistryReplacedError || err instanceof FatalError) {
      await failCrawl(kv, id, { reason: err.message, clock }).catch(() => {});
      return false;
    }
    throw err;
  } finally {
    if (claim) await releaseFeed(kv, id, claim.owner).catch(() => null);
    await releaseLease<FinishState>(kv, keys.finish(id), owner).catch(() => null);
  }
}

/**
 * Takes or renews the finishing lease of a crawl for `owner`; false when another runner holds it
 * (a dead process's lease is free at once, see `leases.ts`).
 */
async function holdFinishing(
  ctx: Pick<VerifyContext, "kv" | "clock" | "owner" | "leaseMs">,
  id: string,
): Promise<boolean> {
  const held = await takeLease<FinishState>(ctx.kv, keys.finish(id), {
    owner: ctx.owner,
    nowMs: ctx.clock.now(),
    leaseMs: ctx.leaseMs, // each round renews it
    record: (_, lease) => ({ lease }),
  });
  return held !== null;
}

/** Catch-up and checks, in rounds (see {@linkcode checkCompletion}). */
async function finish(
  kv: Deno.Kv,
  source: Source,
  claim: FeedClaim | null,
  crawl: CrawlRecord,
  o: PassSettings,
  renew: () => Promise<boolean>,
): Promise<boolean> {
  const id = crawl.id;
  const clock = o.clock;
  // Ranges proven by this pass. A range proven earlier (at its end, or by an earlier pass) is
  // proven again: the feed keeps a range in step only while it describes the same database.
  const pass: Pass = {
    kv,
    source,
    id,
    o,
    feed: claim,
    applied: 0,
    proven: new Set(),
    parts: new RangeParts(),
    view: Boolean(crawl.view),
    feedRefusals: 0,
    unproven: new Map(),
    keepDone: Boolean(crawl.firstDoneAt),
  };
  const viewSeq = crawl.viewSeq ?? null;
  if (viewSeq !== null) pass.checkUnchanged = () => viewHeldStill(source, viewSeq);
  const { roundsPerPass, maxRoundsPerPass } = FINAL_CHECK_RETRY;
  // A feed that does not know where the crawl stands is taken up at its head, every row compared
  // (`_pass_feed.ts`), and the rounds go on; anything else a round throws ends the pass.
  const resynced = async <T>(round: () => Promise<T>): Promise<T | "lost" | "again"> => {
    try {
      return await round();
    } catch (err) {
      if (!(err instanceof SinceUnknownError)) throw err;
      return await resyncPass(pass, err, renew) ? "again" : "lost";
    }
  };
  if (claim?.crawl.planMethod === "rank") {
    const still = await resynced(() => heldStill(pass, claim.entry.value.seq));
    if (still === true) return true;
    if (still === "lost") return false;
  }
  // A round that proves something is followed at once: ranges checked in parts (busy registries)
  // are proven a few parts a round, and a pause or the end of the pass would lose that pace.
  let quiet = 0;
  for (let round = 0; round < maxRoundsPerPass && quiet < (o.maxRounds ?? roundsPerPass); round++) {
    if (quiet > 0) await clock.sleep(backoff(QUIET_PAUSE, quiet));
    if (!await renew()) return false; // the lease ran out: another runner has it now
    await pass.checkUnchanged?.(); // a view that changed fails at once, before a range is relisted
    const before = pass.proven.size + pass.parts.provenParts;
    const outcome = await resynced(async () => {
      const fed = await advanceFeed(pass);
      if (fed !== "ok") return fed; // another runner has the feed, or it was refused this time
      const at = pass.feed ? pass.feed.entry.value.seq : null;
      const current = (await getCrawl(kv, id)).value!;
      return current.planMethod === "rank"
        ? await rankRound(pass, at)
        : await totalRound(pass, at, current);
    });
    if (outcome === "done") return true;
    if (outcome === "relisted" || outcome === "lost") return false;
    if (outcome === "again") {
      quiet = 0;
      continue;
    }
    quiet = outcome === "skip" || pass.proven.size + pass.parts.provenParts <= before
      ? quiet + 1
      : 0;
  }
  return false;
}

/**
 * Throws a {@linkcode FatalError} when the view answers another `update_seq` than when its crawl
 * started: views have no catch-up, so what was listed cannot be proven against a view that
 * changed since (its rows move with documents the feed only names). A view whose answers carry no
 * sequence, or an opaque one (a cluster's), passes.
 */
async function viewHeldStill(source: Source, viewSeq: string): Promise<void> {
  // Only plain numbers are compared: a cluster's opaque sequences may be spelled otherwise by
  // another route for the same state, and a view held still must not fail.
  if (!/^\d+$/.test(viewSeq)) return;
  const now = (await source.list({ limit: 1, updateSeq: true })).seq;
  if (now === undefined || now === viewSeq) return;
  throw new FatalError(
    `the registry changed while this view was crawled (update_seq ${viewSeq}, now ${now}): views ` +
      "have no catch-up, so the crawl cannot be proven; crawl it again while the registry holds " +
      "still (docs/design.md, Views)",
  );
}
