/**
 * Reading a crawl's items back: item records (documents, and rows that cannot be in blocks) and
 * item blocks (keys-only rows, `item_blocks.ts`) merged into one stream in KV key order (byte-key
 * records first, then ids in code point order), as batches, page by page behind an opaque cursor,
 * or counted. Every item is in exactly one of the two layouts, so the merge never has to choose.
 *
 * @module
 */
import { InputError } from "../../base/errors.ts";
import { readAhead } from "../../base/read_ahead.ts";
import { compareKeys } from "../../plan/keys.ts";
import { blockHolding } from "./item_blocks.ts";
import { blockNdjson, decodeBlock } from "./_block_codec.ts";
import { decodeItem, idKeyPart, plainPartSize } from "./_item_codec.ts";
import { getEntries, keys, kvOp, partOfKey } from "../store/mod.ts";
import {
  type ExportedItem,
  finish,
  type Part,
  type Pending,
  type Range,
  runs,
  selectorBetween,
} from "./_item_runs.ts";

export type { ExportedItem };

/** Distinct bounds that KV can hold as string key parts (others would only merge two ranges). */
function cutBounds(bounds: readonly string[] = []): string[] {
  return [...new Set(bounds)].filter((b) => plainPartSize(b) > 0);
}

/** The ranges between sorted bounds: below the first, between each two, from the last on. */
function rangesOf(bounds: readonly string[]): Range[] {
  if (bounds.length === 0) return [{}];
  return [
    { to: bounds[0] },
    ...bounds.slice(1).map((b, i) => ({ from: bounds[i], to: b })),
    { from: bounds.at(-1)! },
  ];
}

/**
 * A crawl's items in key order, in batches. With `bounds` (sorted keys, e.g. the shards' starts),
 * the ranges between them are read ahead in parallel (KV answers several range reads faster than
 * one) and still come out in order. Memory stays bounded.
 */
export async function* itemBatches(
  kv: Deno.Kv,
  crawlId: string,
  options: { bounds?: readonly string[]; concurrency?: number } = {},
): AsyncGenerator<ExportedItem[]> {
  const readers = rangesOf(cutBounds(options.bounds)).map((r) => () => runs(kv, crawlId, r));
  for await (const run of readAhead(readers, { concurrency: options.concurrency ?? 4 })) {
    yield await finish(kv, crawlId, run.items);
  }
}

/** True when a crawl has item records (not only blocks). */
export async function hasRecords(kv: Deno.Kv, crawlId: string): Promise<boolean> {
  for await (const _ of kv.list({ prefix: keys.items(crawlId) }, { limit: 1 })) return true;
  return false;
}

/**
 * A crawl held in blocks alone, as NDJSON bytes in key order, a block at a time, the ranges
 * between `bounds` read ahead in parallel (see {@linkcode itemBatches}); the fastest way out.
 * Callers check first that the crawl has no item records.
 */
export async function* blockNdjsonBatches(
  kv: Deno.Kv,
  crawlId: string,
  options: { bounds?: readonly string[]; concurrency?: number } = {},
): AsyncGenerator<{ bytes: Uint8Array; rows: number }> {
  const prefix = keys.blocks(crawlId);
  const at = (b: string | undefined) => b === undefined ? undefined : keys.block(crawlId, b);
  const selectors = rangesOf(cutBounds(options.bounds)).map((r) =>
    selectorBetween(prefix, at(r.from), at(r.to))
  );
  const read = async function* (selector: Deno.KvListSelector) {
    for await (const e of kv.list<Uint8Array>(selector, { batchSize: 100 })) {
      yield blockNdjson(e.value);
    }
  };
  const readers = selectors.map((s) => () => read(s));
  yield* readAhead(readers, { concurrency: options.concurrency ?? 4 });
}

/** Streams a crawl's items in key order, reassembling chunked documents. Memory stays flat. */
export async function* iterateItems(kv: Deno.Kv, crawlId: string): AsyncGenerator<ExportedItem> {
  for await (const batch of itemBatches(kv, crawlId)) yield* batch;
}

/** An opaque cursor after the record keyed `part` (an item or document-error page's position). */
export function encodePartCursor(part: Part): string {
  const text = typeof part === "string" ? "s" + part : "b" + btoa(String.fromCharCode(...part));
  return btoa(String.fromCharCode(...new TextEncoder().encode(JSON.stringify(text))))
    .replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
}

/** The record key part a cursor from {@linkcode encodePartCursor} is after. @throws InputError */
export function decodePartCursor(cursor: string): Part {
  try {
    const b64 = cursor.replaceAll("-", "+").replaceAll("_", "/");
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const text = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
    if (typeof text !== "string" || text.length < 1) throw new Error("not a position");
    // A string position is always a plain KV string (record ids that are not are byte keys).
    if (text[0] === "s" && plainPartSize(text.slice(1)) > 0) return text.slice(1);
    if (text[0] === "b") return Uint8Array.from(atob(text.slice(1)), (c) => c.charCodeAt(0));
    throw new Error("not a position");
  } catch (err) {
    throw new InputError("cursor is malformed", { cause: err });
  }
}

/**
 * One page of a crawl's items after `cursor` (an opaque cursor from the previous page). Returns
 * the next cursor, or null at the end. @throws InputError for a cursor that is not one of ours.
 */
export async function pageItems(
  kv: Deno.Kv,
  crawlId: string,
  options: { limit: number; cursor?: string },
): Promise<{ items: ExportedItem[]; cursor: string | null }> {
  const after = options.cursor === undefined ? undefined : decodePartCursor(options.cursor);
  const items: Pending[] = [];
  let last: Part | null = null;
  const gen = runs(kv, crawlId, after === undefined ? {} : { after });
  try {
    for await (const run of gen) {
      const take = Math.min(run.items.length, options.limit - items.length);
      items.push(...run.items.slice(0, take));
      if (take > 0) last = run.parts[take - 1];
      if (items.length === options.limit) break;
    }
  } finally {
    await gen.return(undefined);
  }
  const more = items.length === options.limit && last !== null;
  return { items: await finish(kv, crawlId, items), cursor: more ? encodePartCursor(last!) : null };
}

/** Number of stored items of a crawl (a full scan; for tests and verification). */
export async function countItems(kv: Deno.Kv, crawlId: string): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix: keys.items(crawlId) }, { batchSize: 1000 })) n++;
  for await (const e of kv.list<Uint8Array>({ prefix: keys.blocks(crawlId) }, { batchSize: 100 })) {
    n += decodeBlock(e.value, { docs: false }).length;
  }
  return n;
}

/** Whether each id has an item record now, with the versionstamps to check against (10 a read). */
export async function itemPresence(
  kv: Deno.Kv,
  crawlId: string,
  ids: readonly string[],
): Promise<{ key: Deno.KvKey; versionstamp: string | null }[]> {
  const keyList = await Promise.all(ids.map(async (id) => keys.item(crawlId, await idKeyPart(id))));
  const got = await getEntries(kv, keyList);
  return got.map((e) => ({ key: e.key, versionstamp: e.versionstamp }));
}

/** The chunk keys of an item (to delete them with it). */
export async function chunkKeys(kv: Deno.Kv, crawlId: string, id: string): Promise<Deno.KvKey[]> {
  const out: Deno.KvKey[] = [];
  const prefix = keys.chunks(crawlId, await idKeyPart(id));
  for await (const e of kv.list({ prefix })) out.push(e.key);
  return out;
}

/** The revision the crawl stores for `id` (in a record or a block), or null when it has none. */
export async function storedRevision(
  kv: Deno.Kv,
  crawlId: string,
  id: string,
): Promise<string | null> {
  const e = await kvOp(async () => kv.get<Uint8Array>(keys.item(crawlId, await idKeyPart(id))));
  if (e.value) return decodeItem(e.value).rev;
  const block = await blockHolding(kv, crawlId, id);
  return block && block.index >= 0 ? block.rows[block.index].rev : null;
}

/**
 * Up to `count` items the crawl stores at the start of `[start, end)` (ids and revisions), from
 * the first block and the first records keyed there: what the final check asks the registry
 * about. Empty when the range's start is not a plain key.
 */
export async function sampleStored(
  kv: Deno.Kv,
  crawlId: string,
  range: { start: string | null; end: string | null },
  count: number,
): Promise<{ id: string; rev: string }[]> {
  if (range.start !== null && plainPartSize(range.start) <= 0) return [];
  const inRange = (id: string) =>
    (range.start === null || compareKeys(id, range.start) >= 0) &&
    (range.end === null || compareKeys(id, range.end) < 0);
  const from = (prefix: Deno.KvKey, key: Deno.KvKey) =>
    range.start === null ? { prefix } : { prefix, start: key };
  const out: { id: string; rev: string }[] = [];
  await kvOp(async () => {
    const blocks = kv.list<Uint8Array>(
      from(keys.blocks(crawlId), keys.block(crawlId, range.start ?? "")),
      { limit: 1 },
    );
    for await (const e of blocks) {
      for (const r of decodeBlock(e.value, { docs: false })) {
        if (inRange(r.id)) out.push({ id: r.id, rev: r.rev });
      }
    }
    const records = kv.list<Uint8Array>(
      from(keys.items(crawlId), keys.item(crawlId, range.start ?? "")),
      { limit: count },
    );
    for await (const e of records) {
      const id = partOfKey(e.key);
      if (typeof id === "string" && inRange(id)) out.push({ id, rev: decodeItem(e.value).rev });
    }
  });
  return out.sort((a, b) => compareKeys(a.id, b.id)).slice(0, count);
}
