/**
 * Dynamic rebalancing: when a shard finishes while others still run, split the straggler with the
 * most remaining work at the middle rank of its remaining range (found with the planner's search),
 * so that the last shard never holds the crawl back (Dataflow's dynamic work rebalancing, Beam's
 * `trySplit`, done with the rank oracle).
 *
 * The split is ONE atomic op guarded by the victim's versionstamp and the crawl's (which hands out
 * shard ids): the victim's end shrinks to the split key, the child [split, old end) is created with
 * its cursor at the split key, and the child's first page is dispatched. The victim's in-flight page
 * sees the changed versionstamp at commit, re-reads, and counts only rows below its new end.
 *
 * @module
 */
import type { Dispatcher } from "./coordinator.ts";
import { compareKeys } from "../plan/keys.ts";
import { findKeysAtRanks } from "../plan/boundary_search.ts";
import { lastPoint } from "../plan/planner.ts";
import type { Point } from "../plan/points.ts";
import { pageSizeFor } from "./page.ts";
import type { Source } from "../plan/source.ts";
import {
  commitSplit,
  type CrawlRecord,
  getCrawl,
  listShards,
  listSplits,
  newShard,
  type ShardRecord,
} from "./store.ts";

/** Options of {@linkcode splitStraggler}. */
export interface RebalanceOptions {
  /** Never split a remaining range below twice this many pages. @default 1 */
  minPages?: number;
  /** Never grow a crawl past this many shards (plan + splits). @default 4 × planned, at least 64 */
  maxShards?: number;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
}

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

/**
 * Estimated seconds of work left in a shard: remaining items over its recent rate. A shard with no
 * rate yet (just created or split off) is assumed to run at `fallbackRate`, the median of the
 * others, so fresh children are not mistaken for stragglers.
 */
function remainingSeconds(s: ShardRecord, fallbackRate: number): number {
  const left = Math.max(0, s.expected - s.items);
  const rate = s.recentRate && s.recentRate > 0 ? s.recentRate : fallbackRate;
  return left / Math.max(rate, 1e-6);
}

function median(xs: number[]): number {
  if (xs.length === 0) return 1;
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/**
 * Splits the straggler with the most remaining work, if any is worth splitting. Returns the split,
 * or null when nothing qualifies (all done, ranges too small, shard bound reached, or a lost race).
 */
export async function splitStraggler(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  crawlId: string,
  options: RebalanceOptions = {},
): Promise<SplitResult | null> {
  const now = (options.now ?? Date.now)();
  for (let attempt = 0; attempt < 5; attempt++) {
    const crawlEntry = await getCrawl(deps.kv, crawlId);
    const crawl = crawlEntry.value;
    // Splitting needs ranks; a source whose offsets are not ranks was planned another way.
    if (!crawl || crawl.status !== "running" || !crawl.rebalance) return null;
    if (crawl.planMethod !== "rank") return null;
    const maxShards = options.maxShards ?? Math.max(64, 4 * crawl.shards);
    if (crawl.nextShardId >= maxShards) return null;
    const minItems = (options.minPages ?? 1) * pageSizeFor(crawl, deps.source);
    const shards = await listShards(deps.kv, crawlId);
    const rates = shards.map((e) => e.value.recentRate ?? 0).filter((r) => r > 0);
    const fallback = median(rates);
    const candidates = shards
      .filter((e) => !e.value.done && e.value.expected - e.value.items >= 2 * minItems)
      .sort((a, b) => remainingSeconds(b.value, fallback) - remainingSeconds(a.value, fallback));
    const victim = candidates[0];
    if (!victim) return null;
    const res = await trySplit(deps, crawlEntry as Deno.KvEntry<CrawlRecord>, victim, {
      minItems,
      now,
    });
    if (res !== "conflict") return res;
  }
  return null;
}

async function trySplit(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  crawlEntry: Deno.KvEntry<CrawlRecord>,
  victim: Deno.KvEntry<ShardRecord>,
  o: { minItems: number; now: number },
): Promise<SplitResult | null | "conflict"> {
  const v = victim.value;
  const crawl = crawlEntry.value;
  const from = await deps.source.list({ start: v.cursor, limit: 1 });
  const r0 = from.offset;
  let upper: Point;
  if (v.end === null) {
    upper = await lastPoint(deps.source, from.total);
  } else {
    upper = {
      key: v.end,
      rank: (await deps.source.list({ start: v.end, limit: 1 })).offset,
      real: false,
    };
  }
  const r1 = v.end === null ? from.total : upper.rank;
  if (r1 - r0 < 2 * o.minItems || from.rows.length === 0) return null;
  const mid = Math.floor((r0 + r1) / 2);
  const lower = { key: from.rows[0].id, rank: r0, real: true };
  const [key] = await findKeysAtRanks(deps.source, [mid], { lower, upper, maxPage: crawl.maxPage });
  if (v.cursor !== null && compareKeys(key, v.cursor) <= 0) return "conflict";
  if (v.end !== null && compareKeys(key, v.end) >= 0) return "conflict";
  const childId = crawl.nextShardId;
  const shrunk: ShardRecord = { ...v, end: key, expected: v.items + (mid - r0) };
  const child = newShard({ id: childId, start: key, end: v.end, cursor: key }, {
    expected: r1 - mid,
    nowMs: o.now,
    parent: v.id,
  });
  const seq = (await listSplits(deps.kv, crawl.id)).length;
  const ok = await commitSplit(deps.kv, {
    crawl: crawlEntry,
    victim,
    shrunk,
    child,
    split: {
      parent: v.id,
      child: childId,
      at: key,
      atMs: o.now,
      movedItems: r1 - mid,
    },
    seq,
  }, deps.dispatcher.attach ? (op) => deps.dispatcher.attach!(op, crawl.id, child) : undefined);
  if (!ok) return "conflict";
  if (!deps.dispatcher.attach) await deps.dispatcher.dispatch(crawl.id, child);
  return { parent: v.id, child: childId, key, movedItems: r1 - mid };
}
