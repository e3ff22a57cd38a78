/**
 * Proving a shard complete: where offsets are ranks, the items a shard counted must equal the
 * number of keys the registry lists in its range, `rank(end) - rank(start)`. A mismatch while the
 * registry has not changed since the crawl started is real: the shard is listed again once, and a
 * second mismatch fails the crawl with the numbers (never "done" with items missing). A mismatch
 * while the registry changed is drift, left to `_changes` catch-up and the crawl's final check.
 *
 * @module
 */
import { FatalError } from "../base/errors.ts";
import type { Source } from "../plan/source.ts";
import type { CrawlRecord, ShardRecord } from "./store.ts";

/** What a shard's end check found. */
export type ShardCheck =
  | { kind: "exact" }
  | { kind: "drift"; span: number }
  | { kind: "relist"; span: number }
  | { kind: "skipped" };

/** A shard that disagrees with the registry after being listed again. */
export class CompletenessError extends FatalError {
  /** Error name. */
  override name = "CompletenessError";
}

function show(key: string | null): string {
  return key === null ? "(open)" : JSON.stringify(key.length > 60 ? key.slice(0, 60) + "…" : key);
}

/**
 * Checks a shard that just reached its end with `items` items in all.
 * @throws CompletenessError when it was listed again already and still disagrees.
 */
export async function checkShardEnd(
  source: Source,
  crawl: CrawlRecord,
  shard: ShardRecord,
  items: number,
): Promise<ShardCheck> {
  if (crawl.planMethod !== "rank") return { kind: "skipped" };
  const [low, high] = await Promise.all([
    shard.start === null ? 0 : source.list({ start: shard.start, limit: 1 }).then((p) => p.offset),
    source.list({ start: shard.end, limit: 1 }).then((p) =>
      shard.end === null ? p.total : p.offset
    ),
  ]);
  const span = high - low;
  if (span === items) return { kind: "exact" };
  const seq = await source.updateSeq().catch(() => null);
  const changed = seq !== null && crawl.startSeq !== null && seq !== crawl.startSeq;
  if (changed) return { kind: "drift", span };
  if ((shard.relists ?? 0) < 1) return { kind: "relist", span };
  throw new CompletenessError(
    `shard ${shard.id} ${show(shard.start)} → ${show(shard.end)} holds ${items} items but the ` +
      `registry lists ${span} there, also after listing it again`,
  );
}
