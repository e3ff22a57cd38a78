/**
 * The store's item part: item records and document chunks, written in batches that fit KV's limits
 * by construction, read back as a stream or page by page, and drift from `_changes` applied with
 * exact counts. Keys come from `store.ts` (`keys`), records from `item_codec.ts`.
 *
 * @module
 */
import { InputError } from "../base/errors.ts";
import { readAhead } from "../base/read_ahead.ts";
import type { DocResult } from "../plan/source.ts";
import {
  decodeItem,
  encodeItem,
  encodeRevOnly,
  idKeyPart,
  type ItemRecord,
  plainPartSize,
} from "./item_codec.ts";
import { AtomicBudget, keySize, MAX_VALUE_BYTES } from "./kv_limits.ts";
import { keys, kvOp } from "./store.ts";

/** Documents above this many bytes are chunked (with room for the record's other fields). */
export const INLINE_DOC_BYTES = 60_000;
/** Chunk size of larger documents, in bytes. */
export const CHUNK_BYTES = 60_000;
/** Default largest stored document, in bytes (32 MiB); larger ones are recorded as too large. */
export const DEFAULT_MAX_DOC_BYTES = 32 * 1024 * 1024;

/** An item to store: a listing row and, when documents are fetched, its document's outcome. */
export interface ItemInput {
  /** The item's id (its key in the listing). */
  id: string;
  /** Its revision when listed. */
  rev: string;
  /** Its document's outcome, when documents are fetched. */
  doc?: DocResult;
}

/** One KV `set` of an item's record or of one chunk of its document. */
export interface ItemWrite {
  /** The item it belongs to. */
  id: string;
  /** The KV key. */
  key: Deno.KvKey;
  /** The value. */
  value: Uint8Array;
  /** Encoded size of the key. */
  keyBytes: number;
}

/** What a set of items holds, counted the way status reports it. */
export interface ItemCounts {
  /** Items. */
  items: number;
  /** Documents fetched (stored, or recorded as too large). */
  docs: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Documents that could not be had. */
  docErrors: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Counts documents, errors and oversized documents among `items` (what a commit adds up). */
export function tallyItems(items: readonly ItemInput[], maxDocBytes: number): ItemCounts {
  const c: ItemCounts = { items: items.length, docs: 0, tooLarge: 0, docErrors: 0 };
  for (const it of items) {
    const d = it.doc;
    if (!d) continue;
    if (d.kind === "error") c.docErrors++;
    else if (
      d.kind === "tooLarge" || d.json.length > maxDocBytes / 3 && tooBig(d.json, maxDocBytes)
    ) {
      c.docs++;
      c.tooLarge++;
    } else c.docs++;
  }
  return c;
}

function tooBig(json: string, maxDocBytes: number): boolean {
  return enc.encode(json).length > maxDocBytes;
}

/**
 * The writes that store `items`: for each item, the chunks of a large document first, then its
 * record (so a crash in between leaves no record pointing at missing chunks). A document over
 * `maxDocBytes` becomes a `tooLarge` record; nothing is dropped.
 */
export async function prepareWrites(
  crawl: string,
  items: readonly ItemInput[],
  options: { maxDocBytes?: number; inline?: boolean } = {},
): Promise<ItemWrite[]> {
  const maxDoc = options.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES;
  const out: ItemWrite[] = [];
  const prefix = keySize(keys.items(crawl));
  for (const it of items) {
    // The hot path: a keys-only item under its own id, in one pass over the id and the revision.
    const plain = it.doc === undefined ? plainPartSize(it.id) : -1;
    const fast = plain > 0 ? encodeRevOnly(it.rev) : null;
    if (fast) {
      out.push({ id: it.id, key: keys.item(crawl, it.id), value: fast, keyBytes: prefix + plain });
      continue;
    }
    const part = await idKeyPart(it.id);
    const rec: ItemRecord = { rev: it.rev };
    if (typeof part !== "string") rec.id = it.id;
    const d = it.doc;
    if (d?.kind === "error") rec.error = { status: d.status, reason: d.reason.slice(0, 500) };
    else if (d?.kind === "tooLarge") [rec.tooLarge, rec.docBytes] = [true, d.bytes];
    else if (d?.kind === "doc") {
      const doc = enc.encode(d.json);
      rec.docBytes = doc.length;
      if (doc.length > maxDoc) rec.tooLarge = true;
      else if (doc.length <= INLINE_DOC_BYTES && options.inline !== false) rec.doc = doc;
      else {
        rec.chunks = Math.ceil(doc.length / CHUNK_BYTES);
        for (let i = 0; i < rec.chunks; i++) {
          const key = keys.chunk(crawl, part, i);
          const value = doc.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
          out.push({ id: it.id, key, value, keyBytes: keySize(key) });
        }
      }
    }
    const value = encodeItem(rec);
    if (value.length > MAX_VALUE_BYTES && rec.doc) {
      // An inline document plus a long id would not fit one value: chunk it instead.
      return await prepareWrites(crawl, items, { ...options, inline: false });
    }
    const key = keys.item(crawl, part);
    out.push({ id: it.id, key, value, keyBytes: keySize(key) });
  }
  return out;
}

/**
 * Cuts writes into batches that each fit one atomic op together with `reserve` (the caller's own
 * check and shard record), in order.
 */
export function batchWrites(writes: readonly ItemWrite[], reserve: AtomicBudget): ItemWrite[][] {
  const batches: ItemWrite[][] = [];
  let batch: ItemWrite[] = [];
  let budget = new AtomicBudget();
  for (const w of writes) {
    if (!budget.fitsSet(w.keyBytes, w.value.length, reserve) && batch.length > 0) {
      batches.push(batch);
      batch = [];
      budget = new AtomicBudget();
    }
    budget.set(w.keyBytes, w.value.length);
    batch.push(w);
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/**
 * Writes items without a guard, in batches that fit KV's limits (idempotent: keyed by crawl and
 * id). For tools and tests; crawls write through the page's guarded batches instead.
 */
export async function writeItems(
  kv: Deno.Kv,
  crawl: string,
  items: readonly ItemInput[],
  options: { maxDocBytes?: number; batchMutations?: number } = {},
): Promise<ItemCounts> {
  const writes = await prepareWrites(crawl, items, options);
  const reserve = new AtomicBudget();
  reserve.mutations = 1000 - Math.min(1000, options.batchMutations ?? 1000);
  for (const batch of batchWrites(writes, reserve)) {
    await kvOp(() => {
      const op = kv.atomic();
      for (const w of batch) op.set(w.key, w.value);
      return op.commit();
    });
  }
  return tallyItems(items, options.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES);
}

/** An exported item: the record with its id and its document reassembled as JSON text. */
export interface ExportedItem {
  /** The item's id. */
  id: string;
  /** Its revision. */
  rev: string;
  /** The document's JSON text, when fetched and stored. */
  doc?: string;
  /** The document's size in bytes, when fetched. */
  docBytes?: number;
  /** Present when the document was over the size limit. */
  tooLarge?: boolean;
  /** Why the document could not be had. */
  error?: { status: number; reason: string };
}

/** An item entry turned back into an item; a chunked document is left for `withChunks`. */
function toItem(e: Deno.KvEntry<Uint8Array>): ExportedItem & { chunks?: number } {
  const part = e.key[2] as string | Uint8Array;
  const r = decodeItem(e.value);
  const out: ExportedItem & { chunks?: number } = {
    id: typeof part === "string" ? part : r.id!,
    rev: r.rev,
  };
  if (r.doc) out.doc = dec.decode(r.doc);
  if (r.chunks) out.chunks = r.chunks;
  if (r.docBytes !== undefined) out.docBytes = r.docBytes;
  if (r.tooLarge) out.tooLarge = true;
  if (r.error) out.error = r.error;
  return out;
}

/** The item with its chunked document read back, if it has one. */
async function withChunks(
  kv: Deno.Kv,
  crawl: string,
  item: ExportedItem & { chunks?: number },
): Promise<ExportedItem> {
  const { chunks, ...rest } = item;
  if (!chunks) return rest;
  const part = await idKeyPart(item.id);
  return { ...rest, doc: await readChunks(kv, crawl, part, chunks, item.id) };
}

/**
 * A crawl's items in key order, a batch (up to 1,000) at a time. With `bounds` (sorted keys, e.g.
 * the shards' starts), the ranges between them are read ahead in parallel (KV answers several
 * range reads faster than one) and still come out in order. Memory stays bounded.
 */
export async function* itemBatches(
  kv: Deno.Kv,
  crawl: string,
  options: { bounds?: readonly string[]; concurrency?: number } = {},
): AsyncGenerator<ExportedItem[]> {
  const prefix = keys.items(crawl);
  const bounds = [...new Set(options.bounds ?? [])];
  const selectors: Deno.KvListSelector[] = bounds.length === 0 ? [{ prefix }] : [
    { prefix, end: keys.item(crawl, bounds[0]) },
    ...bounds.slice(1).map((b, i) => ({
      start: keys.item(crawl, bounds[i]),
      end: keys.item(crawl, b),
    })),
    { prefix, start: keys.item(crawl, bounds.at(-1)!) },
  ];
  const range = async function* (selector: Deno.KvListSelector) {
    let batch: (ExportedItem & { chunks?: number })[] = [];
    for await (const e of kv.list<Uint8Array>(selector, { batchSize: 1000 })) {
      batch.push(toItem(e));
      if (batch.length === 1000) yield batch, batch = [];
    }
    if (batch.length > 0) yield batch;
  };
  for await (
    const batch of readAhead(selectors.map((s) => () => range(s)), {
      concurrency: options.concurrency ?? 4,
    })
  ) {
    yield batch.some((it) => it.chunks)
      ? await Promise.all(batch.map((it) => withChunks(kv, crawl, it)))
      : batch;
  }
}

async function readChunks(
  kv: Deno.Kv,
  crawl: string,
  part: string | Uint8Array,
  count: number,
  id: string,
): Promise<string> {
  const parts: Uint8Array[] = [];
  const range = { start: keys.chunk(crawl, part, 0), end: keys.chunk(crawl, part, count) };
  for await (const c of kv.list<Uint8Array>(range)) parts.push(c.value);
  if (parts.length !== count) {
    throw new Error(`item ${JSON.stringify(id)}: ${parts.length} of ${count} chunks`);
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (all.set(p, at), at += p.length);
  return dec.decode(all);
}

/** Streams a crawl's items in key order, reassembling chunked documents. Memory stays flat. */
export async function* iterateItems(kv: Deno.Kv, crawl: string): AsyncGenerator<ExportedItem> {
  for await (const batch of itemBatches(kv, crawl)) yield* batch;
}

/**
 * One page of a crawl's items after `cursor` (an opaque cursor from the previous page). Returns
 * the next cursor, or null at the end. @throws InputError for a cursor that is not one of ours.
 */
export async function pageItems(
  kv: Deno.Kv,
  crawl: string,
  options: { limit: number; cursor?: string },
): Promise<{ items: ExportedItem[]; cursor: string | null }> {
  const items: ExportedItem[] = [];
  let iter: Deno.KvListIterator<Uint8Array>;
  try {
    iter = kv.list<Uint8Array>({ prefix: keys.items(crawl) }, {
      limit: options.limit,
      cursor: options.cursor,
    });
    for await (const e of iter) items.push(await withChunks(kv, crawl, toItem(e)));
  } catch (err) {
    if (options.cursor !== undefined && err instanceof TypeError) {
      throw new InputError("cursor is malformed", { cause: err });
    }
    throw err;
  }
  return { items, cursor: items.length === options.limit && iter.cursor ? iter.cursor : null };
}

/** Number of stored items of a crawl (a full key scan; for tests and verification). */
export async function countItems(kv: Deno.Kv, crawl: string): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix: keys.items(crawl) }, { batchSize: 1000 })) n++;
  return n;
}

/** Whether each id has an item now, with the versionstamps to check against (10 per read). */
export async function itemPresence(
  kv: Deno.Kv,
  crawl: string,
  ids: readonly string[],
): Promise<{ key: Deno.KvKey; versionstamp: string | null }[]> {
  const keyList = await Promise.all(ids.map(async (id) => keys.item(crawl, await idKeyPart(id))));
  const out: { key: Deno.KvKey; versionstamp: string | null }[] = [];
  for (let i = 0; i < keyList.length; i += 10) {
    const got = await kvOp(() => kv.getMany(keyList.slice(i, i + 10)));
    for (const e of got) out.push({ key: e.key, versionstamp: e.versionstamp });
  }
  return out;
}

/** The chunk keys of an item (to delete them with it). */
export async function chunkKeys(kv: Deno.Kv, crawl: string, id: string): Promise<Deno.KvKey[]> {
  const out: Deno.KvKey[] = [];
  const prefix = keys.chunks(crawl, await idKeyPart(id));
  for await (const e of kv.list({ prefix })) out.push(e.key);
  return out;
}
