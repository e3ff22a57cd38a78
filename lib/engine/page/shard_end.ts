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
import type { CrawlRecord, ShardRecord } from "../store/mod.ts";
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
  range: { id: number; start: string | null; end: string | null; relists: number },
  counts: { stored: number; span: number; why?: string },
  at: string | null,
): CompletenessError {
  return new CompletenessError(
    `shard ${range.id} ${showKey(range.start)} → ${showKey(range.end)} holds ${counts.stored} ` +
      `items but the registry lists ${counts.span} there${at === null ? "" : ` at seq ${at}`}` +
      `${counts.why ? ` (${counts.why})` : ""}, also after listing it again ${range.relists} ` +
      `time(s)`,
  );
}

/** What a shard's own end check found. */
export type ShardCheck = "exact" | "relist" | "later";

/**
 * Checks a shard that just reached its end with `items` items in all, early: only when the
 * registry has not changed since the crawl started can its count be held against the ranks now
 * (`exact`, or `relist` when they disagree); otherwise the crawl's final check decides (`later`).
 * Registries whose offsets are not ranks are always `later`.
 * @throws CompletenessError when the range was listed again {@linkcode MAX_RELISTS} times already
 * and still disagrees with a registry that held still.
 */
export async function checkShardEnd(
  source: Source,
  crawl: CrawlRecord,
  shard: ShardRecord,
  items: number,
): Promise<ShardCheck> {
  if (crawl.planMethod !== "rank") return "later";
  const [low, high] = await allSettledOrThrow([
    shard.start === null
      ? Promise.resolve(0)
      : source.list({ start: shard.start, limit: 1 }).then((p) => p.offset),
    source.list({ start: shard.end, limit: 1 }).then((p) =>
      shard.end === null ? p.total : p.offset
    ),
  ]);
  // Read after the ranks: equal to the start's, nothing changed before or while they were read.
  const seq = crawl.startSeq === null ? null : await source.updateSeq().catch(() => undefined);
  if (seq !== crawl.startSeq) return "later";
  const span = high - low;
  if (span === items) return "exact";
  const relists = shard.relists ?? 0;
  if (relists < MAX_RELISTS) return "relist";
  throw completenessError({ ...shard, relists }, { stored: items, span }, seq);
}
