/**
 * A shard's own end check, made by the page that reaches its end: where offsets are ranks and the
 * registry has not changed at all since the crawl started, the shard's count is held against
 * `rank(end) - rank(start)` at once, so that a range whose listing lost or kept rows is listed again
 * before the crawl ends. Otherwise the crawl's final check decides (`completion.ts`), as it does
 * for every range in the end. Both decide by the same comparison (`verify.countVerdict`).
 *
 * @module
 */
import type { Page, Source } from "../../plan/source.ts";
import { type CrawlRecord, listPending, type ShardRecord } from "../store/mod.ts";
import type { ShardCheck } from "../page/mod.ts";
import { allSettledOrThrow } from "../../base/pool.ts";
import type { Clock } from "../../base/clock.ts";
import { feedQuiet } from "../crawl/mod.ts";
import { completenessError, countVerdict, MAX_RELISTS, rangeSpan } from "./_verdicts.ts";

/**
 * Other shards still running, at most, for a shard's end check to be left to the final check: a
 * quarter of the plan's shards, within 1..8 (see {@linkcode checkShardEnd}).
 */
const LAST_STRETCH_SHARDS = 8;

/**
 * Checks a shard that just reached its end with `items` items in all, early: only when the
 * registry (or the view crawled) has not changed since the crawl started can its count be held
 * against the ranks now (`exact`, or `relist` when they disagree); otherwise the crawl's final
 * check decides (`later`).
 * Registries whose offsets are not ranks are always `later`, and so are the shards that end the
 * crawl, when `kv` tells which they are (the few still running with it: shards of equal counts end
 * close together, and the final check follows at once).
 * @throws CompletenessError when the range was listed again {@linkcode MAX_RELISTS} times already
 * and still disagrees with a registry that held still.
 */
export async function checkShardEnd(
  source: Source,
  shard: ShardRecord,
  o: {
    /** The shard's crawl. */
    crawl: CrawlRecord;
    /** Items the shard holds in all, with the page that reached its end. */
    items: number;
    /** The store, to tell the shards that end the crawl. @default none (every shard checked) */
    kv?: Deno.Kv;
    /** Time, for reads of the feed: the environment's. */
    clock: Clock;
  },
): Promise<ShardCheck> {
  const { crawl, items } = o;
  if (crawl.planMethod !== "rank") return "later";
  // The shards that end the crawl are held against the same ranks by its final check, which
  // follows at once: checking them here too would only make the crawl wait a round trip longer.
  // (A range that disagrees is then listed again after the others end rather than beside them.)
  if (o.kv && crawl.indexed && await lastStretch(o.kv, crawl, shard)) {
    return "later";
  }
  // A view has no start sequence (no feed) but its own, taken the same way when planned.
  const since = crawl.startSeq ?? crawl.viewSeq ?? null;
  if (since === null) return "later";
  // Each rank carries the sequence it was computed at where the registry says (one round trip).
  const [low, high] = await allSettledOrThrow<Pick<Page, "offset" | "total" | "seq">>([
    shard.start === null
      ? Promise.resolve({ offset: 0, total: 0, seq: since })
      : source.list({ start: shard.start, limit: 1, updateSeq: true }),
    source.list({ start: shard.end, limit: 1, updateSeq: true }),
  ]);
  // Equal to the start's, nothing changed before or while the ranks were read. Where listings do
  // not say (or a cluster spells the sequence otherwise), the feed is asked once the ranks are read:
  // nothing after the start sequence means the same. A count that disagrees lists the range again
  // only on the feed's word too (a listing's sequence may be as stuck as the database info).
  const listed = low.seq === since && high.seq === since;
  const quiet = () => crawl.startSeq !== null && feedSaysQuiet(source, crawl.startSeq, o.clock);
  if (!listed && !await quiet()) return "later";
  const span = rangeSpan(shard, { from: low, to: high });
  if (countVerdict(span, items, 0) === "equal") return "exact";
  if (listed && crawl.startSeq !== null && !await quiet()) return "later";
  const relists = shard.relists ?? 0;
  if (relists < MAX_RELISTS) return "relist";
  const view = Boolean(crawl.view);
  throw completenessError({ ...shard, relists, view }, { stored: items, span }, since);
}

/** The feed says nothing changed since `since` (false when it cannot say, or does not know it). */
function feedSaysQuiet(source: Source, since: string, clock: Clock): Promise<boolean> {
  return feedQuiet(source, since, clock).catch(() => false);
}

/** True when few other shards are still running (see `LAST_STRETCH_SHARDS`). */
async function lastStretch(kv: Deno.Kv, crawl: CrawlRecord, shard: ShardRecord): Promise<boolean> {
  const few = Math.min(LAST_STRETCH_SHARDS, Math.max(1, Math.floor(crawl.shards / 4)));
  const pending = await listPending(kv, crawl.id, { limit: few + 2 });
  return pending.filter((id) => id !== shard.id).length <= few;
}
