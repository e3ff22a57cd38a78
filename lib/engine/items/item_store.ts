/**
 * The store's item part: item records and document chunks, written in batches that fit KV's limits
 * by construction (read back by `item_read.ts`; keys-only rows go to `item_blocks.ts`). Keys come
 * from `store.ts` (`keys`), records from `_item_codec.ts`.
 *
 * @module
 */
import type { DocResult } from "../../plan/source.ts";
import {
  encodeItem,
  encodeRevOnly,
  idKeyPart,
  type ItemRecord,
  plainPartSize,
} from "./_item_codec.ts";
import { AtomicBudget, commitPlan, keys, keySize, MAX_VALUE_BYTES, OpPlan } from "../store/mod.ts";
import { PENDING_DOCS } from "../../base/retry_policy.ts";

/** Documents above this many bytes are chunked (with room for the record's other fields). */
export const INLINE_DOC_BYTES = 60_000;
/** Chunk size of larger documents, in bytes. */
export const CHUNK_BYTES = 60_000;
/**
 * Longest id an item record keeps, in UTF-16 units (a record is one KV value). A longer id is
 * crawled like any other (its key is hashed), but its item keeps only the id's start, says so, and
 * is an error: no document is stored for it.
 */
export const MAX_STORED_ID_UNITS = 16_000;

/** The item as stored: an id too long to keep makes it an error (see `MAX_STORED_ID_UNITS`). */
export function storedForm(it: ItemInput): ItemInput {
  if (it.id.length <= MAX_STORED_ID_UNITS) return it;
  return {
    id: it.id,
    rev: it.rev,
    doc: {
      kind: "error",
      status: 0,
      reason: `id of ${it.id.length} characters, longer than the ${MAX_STORED_ID_UNITS} an item ` +
        `keeps: stored cut, without its document`,
    },
  };
}

/** The start of an id that `MAX_STORED_ID_UNITS` cuts, never inside a surrogate pair. */
function idStart(id: string): string {
  const end = MAX_STORED_ID_UNITS;
  const c = id.charCodeAt(end - 1);
  return id.slice(0, c >= 0xd800 && c <= 0xdbff ? end - 1 : end);
}

/** Default largest stored document, in bytes (32 MiB); larger ones are recorded as too large. */
export const DEFAULT_MAX_DOC_BYTES = 32 * 1024 * 1024;

/**
 * A document already written to its item's chunks (`spillDocument`): the page holds only this,
 * not the document, until its op writes the record that points at them.
 */
export type StoredDoc = Extract<DocResult, { kind: "stored" }>;

/** An item to store: a listing row and, when documents are fetched, its document's outcome. */
export interface ItemInput {
  /** The item's id (its key in the listing). */
  id: string;
  /** Its revision when listed. */
  rev: string;
  /** Its document's outcome, when documents are fetched (or its chunks, already written). */
  doc?: DocResult;
}

/**
 * Writes a large document to the chunks of item `id` at once (idempotent: keyed by crawl, id and
 * chunk number), so that nothing waits holding it: the result stands for it in the page. A
 * document over `maxDocBytes` is `tooLarge` instead (nothing written). Documents short enough to be
 * kept inline are returned as they are.
 */
export async function spillDocument(
  kv: Deno.Kv,
  crawlId: string,
  item: { id: string; doc: DocResult },
  options: { maxDocBytes?: number } = {},
): Promise<DocResult> {
  const d = item.doc;
  if (d.kind === "doc" && d.json.length <= INLINE_DOC_BYTES / 3) return d;
  if (d.kind !== "doc" && d.kind !== "raw") return d;
  const bytes = d.kind === "raw" ? d.bytes : enc.encode(d.json);
  if (bytes.length <= INLINE_DOC_BYTES) return d;
  if (bytes.length > (options.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES)) {
    return { kind: "tooLarge", bytes: bytes.length };
  }
  const part = await idKeyPart(item.id);
  const chunks = Math.ceil(bytes.length / CHUNK_BYTES);
  const writes: ItemWrite[] = [];
  for (let i = 0; i < chunks; i++) {
    const key = keys.chunk(crawlId, part, i);
    writes.push({
      id: item.id,
      key,
      value: bytes.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES),
      keyBytes: keySize(key),
      role: "chunk",
    });
  }
  await setInBatches(kv, writes);
  return { kind: "stored", bytes: bytes.length, chunks };
}

/**
 * One KV `set` of an item's record, of one chunk of its document, or of its entry among the pending
 * documents. Chunks are written first and alone (idempotent); a record, and the entry that goes
 * with it, in the caller's guarded op.
 */
export interface ItemWrite {
  /** The item it belongs to. */
  id: string;
  /** The KV key. */
  key: Deno.KvKey;
  /** The value. */
  value: Uint8Array;
  /** Encoded size of the key. */
  keyBytes: number;
  /** What it is: the item's record, a chunk of its document, or its pending entry (`pending_docs.ts`). */
  role: "record" | "chunk" | "pending";
}

/** What a set of items holds, counted the way status reports it. */
export interface ItemCounts {
  /** Items. */
  items: number;
  /** Documents fetched (stored, or recorded as too large). */
  docs: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Documents that could not be had (pending ones, asked again, are not counted). */
  docErrors: number;
}

const enc = new TextEncoder();

/** Counts documents, errors and oversized documents among `items` (what a commit adds up). */
export function tallyItems(items: readonly ItemInput[], maxDocBytes: number): ItemCounts {
  const c: ItemCounts = { items: items.length, docs: 0, tooLarge: 0, docErrors: 0 };
  for (const it of items) {
    const d = storedForm(it).doc;
    if (!d) continue;
    if (d.kind === "error") {
      if (!d.later) c.docErrors++; // a pending document is neither: it is asked again
    } else if (d.kind === "stored") c.docs++;
    else if (d.kind === "raw") {
      c.docs++;
      if (d.bytes.length > maxDocBytes) c.tooLarge++;
    } else if (
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
  crawlId: string,
  items: readonly ItemInput[],
  options: { maxDocBytes?: number; inline?: boolean; nowMs?: number } = {},
): Promise<ItemWrite[]> {
  const maxDoc = options.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES;
  const out: ItemWrite[] = [];
  const prefix = keySize(keys.items(crawlId));
  for (const given of items) {
    const it = storedForm(given);
    // The hot path: a keys-only item under its own id, in one pass over the id and the revision.
    const plain = it.doc === undefined ? plainPartSize(it.id) : -1;
    const fast = plain > 0 ? encodeRevOnly(it.rev) : null;
    if (fast) {
      out.push({
        id: it.id,
        key: keys.item(crawlId, it.id),
        value: fast,
        keyBytes: prefix + plain,
        role: "record",
      });
      continue;
    }
    const part = await idKeyPart(it.id);
    const rec: ItemRecord = { rev: it.rev };
    if (typeof part !== "string") rec.id = it.id;
    if (it.id.length > MAX_STORED_ID_UNITS) [rec.id, rec.idLength] = [idStart(it.id), it.id.length];
    const d = it.doc;
    if (d?.kind === "error") {
      rec.error = { status: d.status, reason: d.reason.slice(0, 500) };
      if (d.later) rec.pending = true;
    } else if (d?.kind === "tooLarge") [rec.tooLarge, rec.docBytes] = [true, d.bytes];
    else if (d?.kind === "stored") [rec.docBytes, rec.chunks] = [d.bytes, d.chunks];
    else if (d?.kind === "doc" || d?.kind === "raw") {
      const doc = d.kind === "raw" ? d.bytes : enc.encode(d.json);
      rec.docBytes = doc.length;
      if (doc.length > maxDoc) rec.tooLarge = true;
      else if (doc.length <= INLINE_DOC_BYTES && options.inline !== false) rec.doc = doc;
      else {
        rec.chunks = Math.ceil(doc.length / CHUNK_BYTES);
        for (let i = 0; i < rec.chunks; i++) {
          const key = keys.chunk(crawlId, part, i);
          const value = doc.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
          out.push({ id: it.id, key, value, keyBytes: keySize(key), role: "chunk" });
        }
      }
    }
    const value = encodeItem(rec);
    if (value.length > MAX_VALUE_BYTES && rec.doc) {
      // An inline document plus a long id would not fit one value: chunk it instead.
      return await prepareWrites(crawlId, items, { ...options, inline: false });
    }
    const key = keys.item(crawlId, part);
    out.push({ id: it.id, key, value, keyBytes: keySize(key), role: "record" });
    if (rec.pending && d?.kind === "error") {
      out.push(pendingWrite(crawlId, part, { ...d, id: it.id, rev: it.rev }, options.nowMs ?? 0));
    }
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
  crawlId: string,
  items: readonly ItemInput[],
  options: { maxDocBytes?: number; batchMutations?: number; nowMs?: number } = {},
): Promise<ItemCounts> {
  const writes = await prepareWrites(crawlId, items, options);
  const reserve = new AtomicBudget();
  reserve.mutations = 1000 - Math.min(1000, options.batchMutations ?? 1000);
  await setInBatches(kv, writes, reserve);
  return tallyItems(items, options.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES);
}

/**
 * Sets `writes` without a guard, in as few atomic ops as KV's limits allow (with `reserve` left
 * free in each). Only for idempotent writes: a large document's chunks, tools and tests.
 */
export async function setInBatches(
  kv: Deno.Kv,
  writes: readonly ItemWrite[],
  reserve: AtomicBudget = new AtomicBudget(),
): Promise<void> {
  for (const batch of batchWrites(writes, reserve)) {
    const plan = new OpPlan();
    for (const w of batch) plan.set(w.key, w.value);
    await commitPlan(kv, plan);
  }
}

/** A pending document's entry: what its item waits for, and when it is asked again. */
export interface PendingDoc {
  /** The item's id. */
  id: string;
  /** The revision the item holds, whose document is awaited. */
  rev: string;
  /** When it was first found behind, epoch ms. */
  sinceMs: number;
  /** When it is asked again, epoch ms. */
  nextMs: number;
  /** Asks made again so far. */
  tries: number;
  /** The `ETag` of what the host served last (asked with `If-None-Match`), when it gave one. */
  etag?: string;
  /**
   * Still behind after the window: its item holds the error now, and it is asked again every
   * `PENDING_DOCS.afterWindowEveryMs` (the item takes the document when it comes).
   */
  expired?: true;
}

/**
 * When a pending document with `tries` asks behind it is asked next, from `nowMs`: after a pause
 * doubling to at most `maxPauseMs`, from `firstPauseMs` when it has an `etag` to ask with (a 304
 * is cheap) and from `unconditionalFirstPauseMs` when not (a 404 for a new package); past the
 * window (`expired`), an hour on.
 */
export function nextAskMs(
  nowMs: number,
  doc: { tries: number; expired?: true; etag?: string },
): number {
  if (doc.expired) return nowMs + PENDING_DOCS.afterWindowEveryMs;
  const first = doc.etag === undefined
    ? PENDING_DOCS.unconditionalFirstPauseMs
    : PENDING_DOCS.firstPauseMs;
  return nowMs + Math.min(PENDING_DOCS.maxPauseMs, first * 2 ** Math.min(doc.tries, 20));
}

/**
 * The entry of an item stored with its document pending (`doc`: the host's `later` answer), due a
 * first pause after `nowMs`. Bytes of JSON, as the item part's other writes.
 */
export function pendingWrite(
  crawlId: string,
  part: Deno.KvKeyPart,
  item: { id: string; rev: string; etag?: string },
  nowMs: number,
): ItemWrite {
  const entry: PendingDoc = {
    id: item.id,
    rev: item.rev,
    sinceMs: nowMs,
    nextMs: nextAskMs(nowMs, { tries: 0, etag: item.etag }),
    tries: 0,
    ...(item.etag !== undefined ? { etag: item.etag } : {}),
  };
  const key = keys.pendingDoc(crawlId, part);
  return {
    id: item.id,
    key,
    value: enc.encode(JSON.stringify(entry)),
    keyBytes: keySize(key),
    role: "pending",
  };
}
