/**
 * Reading a crawl's items the way a served copy is asked for them: a key range in either
 * direction, a range counted without its documents, and ids by point reads (a page of neighbours
 * in a few reads).
 *
 * @module
 */
import { compareKeys } from "../../plan/keys.ts";
import { blockHolding } from "./item_blocks.ts";
import { idKeyPart, plainPartSize } from "./_item_codec.ts";
import { getEntries, keys, partOfKey } from "../store/mod.ts";
import {
  blockItems,
  blockRuns,
  byteKeyRuns,
  type ExportedItem,
  finish,
  merge,
  type Pending,
  recordRuns,
  toItem,
  withChunks,
} from "./_item_runs.ts";

/**
 * The items the crawl stores in `[from, to)` (null: open), in key order (`descending`: last key
 * first), in batches of at most 1,000 (documents read back). Ids KV holds under byte-string keys
 * (ill-formed UTF-16, or over 1,900 bytes) come where their ids sort too: every call reads those
 * ids (not their documents) to sort them, cheap while a crawl has few.
 */
export async function* itemsBetween(
  kv: Deno.Kv,
  crawlId: string,
  range: { from: string | null; to: string | null; descending?: boolean },
): AsyncGenerator<ExportedItem[]> {
  for await (const items of runsBetween(kv, crawlId, range, false)) {
    yield await finish(kv, crawlId, items);
  }
}

/**
 * How many items the crawl stores in `[from, to)` (null: open), as {@linkcode itemsBetween} would
 * give them, without reading documents back (no decoding, no chunks).
 */
export async function countItemsBetween(
  kv: Deno.Kv,
  crawlId: string,
  range: { from: string | null; to: string | null },
): Promise<number> {
  let n = 0;
  for await (const items of runsBetween(kv, crawlId, range, true)) n += items.length;
  return n;
}

async function* runsBetween(
  kv: Deno.Kv,
  crawlId: string,
  range: { from: string | null; to: string | null; descending?: boolean },
  bare: boolean,
): AsyncGenerator<Pending[]> {
  const reverse = range.descending ?? false;
  const { from, to } = range;
  const inRange = (id: string) =>
    (from === null || compareKeys(id, from) >= 0) && (to === null || compareKeys(id, to) < 0);
  const plain = (k: string | null) => k !== null && plainPartSize(k) > 0 ? k : undefined;
  // Blocks from the one holding `from` (its first row may sort below it).
  const holding = plain(from) === undefined ? null : await blockHolding(kv, crawlId, from!);
  const blockFrom = holding ? partOfKey(holding.entry.key) as string : plain(from);
  const dir = reverse ? -1 : 1;
  // Records under string parts only (from "": KV sorts byte-string parts before every string);
  // those under byte-string parts come sorted by id from their own read and merge in by id.
  const strings = merge(
    recordRuns(kv, crawlId, { from: plain(from) ?? "", to: plain(to), bare, reverse }),
    blockRuns(kv, crawlId, { from: blockFrom, to: plain(to), bare, reverse }),
    dir,
  );
  const gen = merge(strings, byteKeyRuns(kv, crawlId, { keep: inRange, bare, reverse }), dir, "id");
  for await (const run of gen) {
    const items = run.items.filter((it) => inRange(it.id));
    if (items.length > 0) yield items;
  }
}

/**
 * The items stored under `ids` (at most 10,000), by id; an id the crawl does not store is absent.
 * Point reads, ten records a read and each block once, so asking for a page of neighbours costs
 * a few reads rather than a range read per id.
 */
export async function itemsByIds(
  kv: Deno.Kv,
  crawlId: string,
  ids: readonly string[],
): Promise<Map<string, ExportedItem>> {
  const wanted = [...new Set(ids)];
  const out = new Map<string, ExportedItem>();
  const parts = await Promise.all(wanted.map((id) => idKeyPart(id)));
  const got = await getEntries<Uint8Array>(kv, parts.map((p) => keys.item(crawlId, p)));
  await Promise.all(got.map(async (e) => {
    if (e.value === null) return;
    const it = await withChunks(kv, crawlId, toItem(e as Deno.KvEntry<Uint8Array>));
    out.set(it.id, it);
  }));
  // The rest may be rows of blocks: each block read once, its rows kept while ids fall in it.
  const rest = wanted.filter((id) => !out.has(id) && plainPartSize(id) > 0).sort(compareKeys);
  let held: { first: string; last: string; byId: Map<string, Pending> } | null = null;
  for (const id of rest) {
    const inHeld = held !== null && compareKeys(id, held.first) >= 0 &&
      compareKeys(id, held.last) <= 0;
    if (!inHeld) {
      const block = await blockHolding(kv, crawlId, id);
      if (!block || block.rows.length === 0) continue;
      const rows = blockItems(block.rows);
      held = {
        first: rows[0].id,
        last: rows.at(-1)!.id,
        byId: new Map(rows.map((r) => [r.id, r])),
      };
    }
    const row = held!.byId.get(id);
    if (row) out.set(id, row);
  }
  return out;
}
