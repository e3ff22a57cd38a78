/**
 * Dynamic rebalancing: when a shard finishes while others still run, split the straggler with the
 * most remaining time at the middle rank of what it has not started yet (found with the planner's
 * search), so that the last shard never holds the crawl back (Dataflow's dynamic work
 * rebalancing, Beam's `trySplit`, done with the rank oracle).
 *
 * Remaining time counts documents in flight: a worker publishes the first row of its page it has
 * not started and how fast it starts them (`ShardRecord.inflight`), so a shard stuck on slow
 * documents inside one page is seen as the straggler it is, and can be split inside that page, down
 * to a few documents: its unstarted rows past the split key go to the new shard.
 *
 * The split is ONE atomic op guarded by the victim's versionstamp and the crawl's (which hands out
 * shard ids): the victim's end shrinks to the split key, the child [split, old end) is created with
 * its cursor at the split key, and the split is logged; then the child is dispatched. The victim's
 * worker sees its end move at its next row when it runs in this process (the new entry is posted to
 * `notices`), else at its next heartbeat or write; it stops starting rows past it, and counts only
 * rows below it.
 *
 * @module
 */
import { findKeysAtRanks, type Point } from "../../plan/search/mod.ts";
import { compareKeys } from "../../plan/keys.ts";
import { lastPoint } from "../../plan/locate.ts";
import { shortCut } from "../../plan/planner.ts";
import type { Source } from "../../plan/source.ts";
import type { CrawlContext } from "./context.ts";
import { pageLimit, rowsPerPage } from "../page/mod.ts";
import {
  commitSplit,
  type CrawlRecord,
  getCrawl,
  getShard,
  getShards,
  leaseHeld,
  listPending,
  listShards,
  listSplits,
  newShard,
  present,
  readLiveness,
  type ShardRecord,
} from "../store/mod.ts";

/** Options of {@linkcode splitStraggler}. */
export interface RebalanceOptions {
  /**
   * Never leave either side of a split with fewer items than this. @default with documents,
   * twice the document concurrency (at least 2); keys only, one page
   */
  minItems?: number;
  /** Never grow a crawl past this many shards (plan + splits). @default 4 × planned, at least 64 */
  maxShards?: number;
}

/**
 * What {@linkcode splitStraggler} needs: the store, the crawl's source (ranks and the split key's
 * search), where the child shard goes, the time, and where the victim's new end is posted for its
 * worker in this process (optional).
 */
export type SplitContext = Pick<CrawlContext, "kv" | "source" | "dispatcher" | "clock" | "notices">;

/** What a split did, for logs and tests. */
export interface SplitResult {
  /** The shard that was split. */
  parent: number;
  /** The new shard. */
  child: number;
  /** The split key: the child starts there. */
  key: string;
  /** Items moved to the child (by rank). */
  movedItems: number;
}

/** Where a shard's unstarted work begins: the first unstarted row of its page, or its cursor. */
function position(s: ShardRecord): string | null {
  const next = s.inflight?.nextKey;
  return next !== undefined && next !== null ? next : s.cursor;
}

/**
 * Estimated seconds of work left in a shard: items not yet started over the rate it starts them
 * (its page in flight when it has run a while, else its recent commits, else `fallbackRate`, the
 * median of the others, so fresh children are not mistaken for stragglers).
 */
export function remainingSeconds(s: ShardRecord, fallbackRate: number, nowMs: number): number {
  const started = s.inflight?.started ?? 0;
  const left = Math.max(0, s.expected - s.items - started);
  const runningS = s.inflight ? (nowMs - s.inflight.since) / 1000 : 0;
  const rate = runningS >= 1 && started > 0
    ? started / runningS
    : s.recentRate && s.recentRate > 0
    ? s.recentRate
    : fallbackRate;
  return left / Math.max(rate, 1e-6);
}

function median(xs: number[]): number {
  if (xs.length === 0) return 1;
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/** The smallest side a split may leave, in items. */
function minItemsOf(crawl: CrawlRecord, source: Source, options: RebalanceOptions): number {
  if (options.minItems !== undefined) return Math.max(1, options.minItems);
  // A page is what a shard takes at a time, and splitting helps only where at least two are left;
  // documents fetched one by one are counted as they start (`inflight`), so a few fetches' worth.
  const byGet = crawl.docs && (crawl.docMode ?? "get") === "get";
  return byGet
    ? Math.max(2, 2 * crawl.concurrency)
    : rowsPerPage(crawl, source, { docMode: crawl.docMode ?? undefined });
}

/**
 * True when a shard nobody works on is waiting (in a bounded window of the pending index): then
 * no worker is idle for lack of work, and nothing needs splitting.
 */
async function unclaimedWork(kv: Deno.Kv, crawl: CrawlRecord, nowMs: number): Promise<boolean> {
  if (!crawl.indexed) return false;
  const ids = await listPending(kv, crawl.id, { limit: 64 });
  const liveness = await readLiveness(kv, nowMs);
  return (await getShards(kv, crawl.id, ids)).some((e) =>
    !e.value.done && (e.value.retryAt ?? 0) <= nowMs &&
    !leaseHeld(e.value.lease, nowMs, { liveness })
  );
}

/**
 * Splits the straggler with the most remaining time, if any is worth splitting. Returns the split,
 * or null when nothing qualifies (all done, ranges too small, shard bound reached, or a lost race).
 */
export async function splitStraggler(
  deps: SplitContext,
  crawlId: string,
  options: RebalanceOptions = {},
): Promise<SplitResult | null> {
  const now = deps.clock.now();
  for (let attempt = 0; attempt < 5; attempt++) {
    const crawlEntry = await getCrawl(deps.kv, crawlId);
    const crawl = crawlEntry.value;
    // Splitting needs ranks; a source whose offsets are not ranks was planned another way.
    if (!crawl || crawl.status !== "running" || !crawl.rebalance) return null;
    if (crawl.planMethod !== "rank") return null;
    if (crawl.nextShardId >= (options.maxShards ?? Math.max(64, 4 * crawl.shards))) return null;
    if (await unclaimedWork(deps.kv, crawl, now)) return null; // an idle worker has work anyway
    const minItems = minItemsOf(crawl, deps.source, options);
    const shards = await listShards(deps.kv, crawlId);
    // A shard waiting out a failure says the registry is failing now, not that a range is slow:
    // a split would only add work for a host that answers nothing (an outage split 19 shards
    // into 27).
    if (shards.some((e) => !e.value.done && (e.value.retryAt ?? 0) > now)) return null;
    const fallback = median(shards.map((e) => e.value.recentRate ?? 0).filter((r) => r > 0));
    const left = (s: ShardRecord) => s.expected - s.items - (s.inflight?.started ?? 0);
    const victim = shards
      .filter((e) => !e.value.done && left(e.value) >= 2 * minItems)
      .sort((a, b) =>
        remainingSeconds(b.value, fallback, now) - remainingSeconds(a.value, fallback, now)
      )[0];
    if (!victim) return null;
    const res = await trySplit(deps, present(crawlEntry)!, victim, {
      minItems,
      now,
    });
    if (res !== "conflict") return res;
  }
  return null;
}

async function trySplit(
  deps: SplitContext,
  crawlEntry: Deno.KvEntry<CrawlRecord>,
  victim: Deno.KvEntry<ShardRecord>,
  o: { minItems: number; now: number },
): Promise<SplitResult | null | "conflict"> {
  const v = victim.value;
  const crawl = crawlEntry.value;
  const from = await deps.source.list({ start: position(v), limit: 1 });
  const r0 = from.offset;
  const upper: Point = v.end === null ? await lastPoint(deps.source, from.total) : {
    key: v.end,
    rank: (await deps.source.list({ start: v.end, limit: 1 })).offset,
    real: false,
  };
  const r1 = v.end === null ? from.total : upper.rank;
  if (r1 - r0 < 2 * o.minItems || from.rows.length === 0) return null;
  const mid = Math.floor((r0 + r1) / 2);
  const lower = { key: from.rows[0].id, rank: r0, real: true };
  const [found] = mid === r0 ? [lower.key] : await findKeysAtRanks(deps.source, [mid], {
    lower,
    upper,
    maxPage: pageLimit(crawl, deps.source),
  });
  const key = await shortCut(deps.source, found);
  const childId = crawl.nextShardId;
  const child: ShardRecord = {
    ...newShard({ id: childId, start: key, end: v.end, cursor: key }, {
      expected: r1 - mid,
      nowMs: o.now,
      parent: v.id,
    }),
    // A relisted shard's range still holds its first listing's items: the child's part too.
    ...(v.revisit ? { revisit: true } : {}),
  };
  const seq = (await listSplits(deps.kv, crawl.id)).length;
  const split = { parent: v.id, child: childId, at: key, atMs: o.now, movedItems: r1 - mid };
  // The victim keeps committing pages while the key is found: its fresh record is taken as long
  // as the key is still ahead of everything it started (a busy shard would never be split if
  // each of its commits sent the search back to the start).
  let shrunkEntry: Deno.KvEntry<ShardRecord> | null = null;
  for (let attempt = 0; attempt < 10 && !shrunkEntry; attempt++) {
    const fresh = attempt === 0 ? victim : present(await getShard(deps.kv, crawl.id, v.id));
    if (!fresh || fresh.value.done || fresh.value.end !== v.end) return "conflict";
    const f = fresh.value;
    const floor = position(f);
    if (floor !== null && compareKeys(key, floor) <= 0) return "conflict";
    if (f.cursor !== null && compareKeys(key, f.cursor) <= 0) return "conflict";
    if (f.end !== null && compareKeys(key, f.end) >= 0) return "conflict";
    const started = v.inflight?.started ?? 0;
    const shrunk: ShardRecord = { ...f, end: key, expected: v.items + started + (mid - r0) };
    shrunkEntry = await commitSplit(deps.kv, {
      crawl: crawlEntry,
      victim: fresh,
      shrunk,
      child,
      split,
      seq,
    });
  }
  if (!shrunkEntry) return "conflict";
  // The victim's worker, when it runs here, stops at the split key at its next row.
  deps.notices?.post(shrunkEntry);
  await deps.dispatcher.dispatch(crawl.id, childId);
  return { parent: v.id, child: childId, key, movedItems: r1 - mid };
}
