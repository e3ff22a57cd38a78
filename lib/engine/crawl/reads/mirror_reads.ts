/**
 * What the served mirror reads of a crawl's store: items in a key range, one item by id, how many
 * items there are, and the rank of a key (the items before it), from the shards' counts and one
 * range of items counted, so that the mirror answers `_all_docs` with CouchDB's `offset`.
 *
 * @module
 */
import { compareKeys } from "../../../plan/keys.ts";
import { countItemsBetween, type ExportedItem, itemsBetween, itemsByIds } from "../../items/mod.ts";
import { listRangeDrift, listShards, shardStored, storedCount } from "../../store/mod.ts";
import { requireItems } from "./crawl_reads.ts";

/**
 * The items crawl `id` stores in `[from, to)` (null: open), in key order (`descending`: last
 * first), in batches (documents read back).
 * @throws NotFoundError for an unknown crawl; ConflictError for one being deleted.
 */
export async function* crawlItemsBetween(
  kv: Deno.Kv,
  id: string,
  range: { from: string | null; to: string | null; descending?: boolean },
): AsyncGenerator<ExportedItem[]> {
  await requireItems(kv, id);
  yield* itemsBetween(kv, id, range);
}

/** Item `itemId` of crawl `id` as stored, or null. */
export async function crawlItem(
  kv: Deno.Kv,
  id: string,
  itemId: string,
): Promise<ExportedItem | null> {
  return (await itemsByIds(kv, id, [itemId])).get(itemId) ?? null;
}

/**
 * The items of crawl `id` stored under `ids` (at most 10,000), by id; ids it does not store are
 * absent. Point reads: what `_bulk_get` and `_changes?include_docs` ask, a page at a time.
 */
export async function crawlItems(
  kv: Deno.Kv,
  id: string,
  ids: readonly string[],
): Promise<Map<string, ExportedItem>> {
  return await itemsByIds(kv, id, ids);
}

/** How many items crawl `id` stores now. */
export async function crawlItemCount(kv: Deno.Kv, id: string): Promise<number> {
  const shards = (await listShards(kv, id)).map((e) => e.value);
  return await storedCount(kv, id, shards);
}

/**
 * The rank of `key` in crawl `id`: how many items it stores before it (the shards wholly before
 * it by their counts, the one it falls in counted up to it, documents not read back).
 */
export async function crawlRank(kv: Deno.Kv, id: string, key: string): Promise<number> {
  const shards = (await listShards(kv, id)).map((e) => e.value);
  const drift = await listRangeDrift(kv, id);
  let rank = 0;
  for (const s of shards) {
    if (s.end !== null && compareKeys(s.end, key) <= 0) {
      rank += shardStored(s, drift);
      continue;
    }
    if (s.start !== null && compareKeys(s.start, key) >= 0) continue;
    rank += await countItemsBetween(kv, id, { from: s.start, to: key });
  }
  return rank;
}
