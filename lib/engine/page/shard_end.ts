/**
 * A shard's own end check, made by the page that reaches its end: where offsets are ranks and the
 * registry has not changed at all since the crawl started, the shard's count is held against
 * `rank(end) - rank(start)` at once, so that a range whose listing lost or kept rows is listed again
 * before the crawl ends. Otherwise the crawl's final check decides (`crawl/verify.ts`), as it does
 * for every range in the end.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import type { Source } from "../../plan/source.ts";
import { type CrawlRecord, listPending, type ShardRecord } from "../store/mod.ts";
import { allSettledOrThrow } from "../../base/pool.ts";

/** Times a shard's range is listed again after a count that disagrees, before the crawl fails. */
export const MAX_RELISTS = 2;

/** A shard that disagrees with the registry after being listed again. */
export class CompletenessError extends FatalError {
  /** Error name. */
  override name = "CompletenessError";
}

/** Shows a key in a message. */
export function showKey(key: string | null): string {
  return key === null ? "(open)" : JSON.stringify(key.length > 60 ? key.slice(0, 60) + "…" : key);
}

/** The failure of a range that still disagrees after being listed again. */
export function completenessError(
  range: { id: number; start: string | null; end: string | null; relists: number; view?: boolean },
  counts: { stored: number; span: number; why?: string },
  at: string | null,
): CompletenessError {
  return new CompletenessError(
    `shard ${range.id} ${showKey(range.start)} → ${showKey(range.end)} holds ${counts.stored} ` +
      `items but the registry lists ${counts.span} there${at === null ? "" : ` at seq ${at}`}` +
      `${counts.why ? ` (${counts.why})` : ""}, also after listing it again ${range.relists} ` +
      `time(s)` +
      // A view's rows move with every document change and nothing applies those changes: on a
      // live registry the likeliest cause, said so.
      (range.view
        ? "; views have no catch-up, so a view whose rows change while it is crawled cannot be " +
          "proven (docs/design.md, Views)"
        : ""),
  );
}

/**
 * Other shards still running, at most, for a shard's end check to be left to the final check: a
 * quarter of the plan's shards, within 1..8 (see {@linkcode checkShardEnd}).
 */
const LAST_STRETCH_SHARDS = 8;

/** What a shard's own end check found. */
export type ShardCheck = "exact" | "relist" | "later";

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
  crawl: CrawlRecord,
  shard: ShardRecord,
  items: number,
  options: { kv?: Deno.Kv } = {},
): Promise<ShardCheck> {
  if (crawl.planMethod !== "rank") return "later";
  // The shards that end the crawl are held against the same ranks by its final check, which
  // follows at once: checking them here too would only make the crawl wait a round trip longer.
  // (A range that disagrees is then listed again after the others end rather than beside them.)
  if (options.kv && crawl.indexed && await lastStretch(options.kv, crawl, shard)) {
    return "later";
  }
  // A view has no start sequence (no feed) but its own, taken the same way when planned.
  const since = crawl.startSeq ?? crawl.viewSeq ?? null;
  // Each rank carries the sequence it was computed at where the registry says (one round trip);
  // elsewhere the sequence is read after both.
  const [low, high] = await allSettledOrThrow([
    shard.start === null
      ? Promise.resolve({ rank: 0, seq: since ?? undefined })
      : source.list({ start: shard.start, limit: 1, updateSeq: true })
        .then((p) => ({ rank: p.offset, seq: p.seq })),
    source.list({ start: shard.end, limit: 1, updateSeq: true }).then((p) => ({
      rank: shard.end === null ? p.total : p.offset,
      seq: p.seq,
    })),
  ]);
  // Equal to the start's, nothing changed before or while the ranks were read. (A sequence
  // string may be spelled otherwise by another route of a cluster: unequal ones are read again.)
  const seq = since === null
    ? null
    : low.seq === since && high.seq === since
    ? since
    : await source.updateSeq().catch(() => undefined);
  if (seq !== since) return "later";
  const span = high.rank - low.rank;
  if (span === items) return "exact";
  const relists = shard.relists ?? 0;
  if (relists < MAX_RELISTS) return "relist";
  const view = Boolean(crawl.view);
  throw completenessError({ ...shard, relists, view }, { stored: items, span }, seq);
}

/** True when few other shards are still running (see `LAST_STRETCH_SHARDS`). */
async function lastStretch(kv: Deno.Kv, crawl: CrawlRecord, shard: ShardRecord): Promise<boolean> {
  const few = Math.min(LAST_STRETCH_SHARDS, Math.max(1, Math.floor(crawl.shards / 4)));
  const pending = await listPending(kv, crawl.id, { limit: few + 2 });
  return pending.filter((id) => id !== shard.id).length <= few;
}
