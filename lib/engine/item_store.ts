/**
 * Items in the store: idempotent batched writes with chunked documents, drift batches from
 * `_changes`, and streaming reads. Key layouts come from `store.ts` (`keys`), the one module that
 * defines them.
 *
 * @module
 */
import { FatalError } from "../base/errors.ts";
import {
  BATCH_BYTES,
  BATCH_MUTATIONS,
  commitOrThrow,
  type CrawlRecord,
  type DriftState,
  type ItemRecord,
  keys,
  withLockRetry,
} from "./store.ts";

/** Largest inline document, in bytes (a KV value holds 65,536 with some room for the record). */
export const INLINE_DOC_BYTES = 60_000;
/** Chunk size for larger documents, in bytes. */
export const CHUNK_BYTES = 60_000;

/** An item to store: listing row plus, optionally, its fetched document. */
export interface ItemInput {
  /** The item's id (its key in the listing). */
  id: string;
  /** Its revision when listed. */
  rev: string;
  /** The document's JSON text. */
  docJson?: string;
  /** Why its document could not be fetched (a permanent error). */
  error?: { status: number; reason: string };
}

/** Counts of what {@linkcode writeItems} stored. */
export interface WriteStats {
  /** Items written. */
  items: number;
  /** Documents among them. */
  docs: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Documents that could not be fetched. */
  docErrors: number;
}

/**
 * Writes items idempotently (keyed by crawl and id), in atomic batches that fit KV's limits. A
 * document above {@linkcode INLINE_DOC_BYTES} is written as chunks first and its item last, so a
 * crash in between leaves no item that points at missing chunks; one above `maxDocBytes` is stored
 * as an item marked `tooLarge` (never dropped silently). `batchMutations` (default 1,000, at most
 * 1,000) sets how many writes share one atomic op.
 */
export async function writeItems(
  kv: Deno.Kv,
  crawl: string,
  items: ItemInput[],
  options: {
    maxDocBytes?: number;
    batchMutations?: number;
    /** Hand item records to the caller instead of writing them (chunks are still written). */
    onRecord?: (key: Deno.KvKey, rec: ItemRecord) => void;
  } = {},
): Promise<WriteStats> {
  const maxDoc = options.maxDocBytes ?? 32 * 1024 * 1024;
  const batchMutations = Math.min(1000, options.batchMutations ?? BATCH_MUTATIONS);
  const enc = new TextEncoder();
  const stats: WriteStats = { items: 0, docs: 0, tooLarge: 0, docErrors: 0 };
  let op = kv.atomic();
  let count = 0;
  let bytes = 0;
  const flush = async () => {
    if (count === 0) return;
    await commitOrThrow(op, "writing items");
    op = kv.atomic();
    count = 0;
    bytes = 0;
  };
  const add = async (key: Deno.KvKey, value: unknown, size: number) => {
    if (count + 1 > batchMutations || bytes + size > BATCH_BYTES) await flush();
    op.set(key, value);
    count++;
    bytes += size;
  };
  for (const it of items) {
    const rec: ItemRecord = { id: it.id, rev: it.rev };
    const keySize = enc.encode(it.id).length + crawl.length + 16;
    if (it.error) {
      rec.error = it.error;
      stats.docErrors++;
    } else if (it.docJson !== undefined) {
      const doc = enc.encode(it.docJson);
      rec.docBytes = doc.length;
      stats.docs++;
      if (doc.length > maxDoc) {
        rec.tooLarge = true;
        stats.tooLarge++;
      } else if (doc.length <= INLINE_DOC_BYTES) {
        rec.doc = doc;
      } else {
        const n = Math.ceil(doc.length / CHUNK_BYTES);
        for (let i = 0; i < n; i++) {
          const part = doc.subarray(i * CHUNK_BYTES, (i + 1) * CHUNK_BYTES);
          await add(keys.chunk(crawl, it.id, i), part, part.length + keySize);
        }
        rec.chunks = n;
      }
    }
    if (options.onRecord) options.onRecord(keys.item(crawl, it.id), rec);
    else {await add(
        keys.item(crawl, it.id),
        rec,
        keySize + it.rev.length + (rec.doc?.length ?? 0) + 64,
      );}
    stats.items++;
  }
  await flush();
  return stats;
}

/** One change to apply: a deletion, or an item (with its document when fetched). */
export type DriftChange = { id: string; deleted: true } | (ItemInput & { deleted?: false });

/**
 * Applies one batch of `_changes` while the caller holds the crawl record as `claimed`: documents
 * are written first (idempotent), then ONE op guarded by the crawl's versionstamp writes the item
 * records, deletes removed items and their chunks, and moves `drift` on with exact counters
 * (an item counts as inserted only if it was absent, as deleted only if it was present). Returns the
 * new crawl entry, or null when the claim was lost (nothing counted).
 */
export async function applyDrift(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<CrawlRecord>,
  changes: DriftChange[],
  next: { seq: string; nowMs: number; maxDocBytes?: number; caughtUp: boolean },
): Promise<Deno.KvEntry<CrawlRecord> | null> {
  const crawl = claimed.value.id;
  const drift: DriftState = claimed.value.drift ?? {
    seq: claimed.value.startSeq ?? "0",
    inserted: 0,
    updated: 0,
    deleted: 0,
    lease: null,
    caughtUpAt: null,
  };
  // The latest change per id wins within a batch.
  const last = new Map<string, DriftChange>();
  for (const c of changes) last.set(c.id, c);
  const present = new Map<string, boolean>();
  await Promise.all([...last.keys()].map(async (id) => {
    present.set(id, (await kv.get(keys.item(crawl, id))).versionstamp !== null);
  }));
  const upserts = [...last.values()].filter((c): c is ItemInput & { deleted?: false } =>
    !c.deleted
  );
  const deletions = [...last.values()].filter((c) => c.deleted).map((c) => c.id);
  const chunkKeys: Deno.KvKey[] = [];
  for (const id of deletions) {
    for await (const e of kv.list({ prefix: keys.chunks(crawl, id) })) chunkKeys.push(e.key);
  }
  const counts = { inserted: 0, updated: 0, deleted: 0 };
  for (const c of upserts) counts[present.get(c.id) ? "updated" : "inserted"]++;
  for (const id of deletions) if (present.get(id)) counts.deleted++;
  // Item records go into the guarded op; large documents' chunks are written before it.
  const records: [Deno.KvKey, ItemRecord][] = [];
  await writeItems(kv, crawl, upserts, {
    maxDocBytes: next.maxDocBytes,
    onRecord: (key, rec) => records.push([key, rec]),
  });
  const mutations: ((op: Deno.AtomicOperation) => void)[] = [
    ...records.map(([k, v]) => (op: Deno.AtomicOperation) => op.set(k, v)),
    ...deletions.map((id) => (op: Deno.AtomicOperation) => op.delete(keys.item(crawl, id))),
    ...chunkKeys.map((k) => (op: Deno.AtomicOperation) => op.delete(k)),
  ];
  if (mutations.length > 900) {
    throw new FatalError(`a drift batch of ${mutations.length} mutations is too large for one op`);
  }
  const value: CrawlRecord = {
    ...claimed.value,
    drift: {
      ...drift,
      seq: next.seq,
      inserted: drift.inserted + counts.inserted,
      updated: drift.updated + counts.updated,
      deleted: drift.deleted + counts.deleted,
      caughtUpAt: next.caughtUp ? next.nowMs : drift.caughtUpAt,
    },
    updatedAt: next.nowMs,
  };
  const res = await withLockRetry(() => {
    const op = kv.atomic().check(claimed).set(keys.crawl(crawl), value);
    for (const m of mutations) m(op);
    return op.commit();
  });
  return res.ok ? { key: claimed.key, value, versionstamp: res.versionstamp } : null;
}

/** An exported item: the record with its document reassembled as JSON text. */
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
  /** Why the document could not be fetched. */
  error?: { status: number; reason: string };
}

/** An item record with its document reassembled from chunks. */
async function assemble(kv: Deno.Kv, crawl: string, r: ItemRecord): Promise<ExportedItem> {
  const dec = new TextDecoder();
  const out: ExportedItem = { id: r.id, rev: r.rev };
  if (r.doc) out.doc = dec.decode(r.doc);
  if (r.chunks) {
    const parts: Uint8Array[] = [];
    for await (const c of kv.list<Uint8Array>({ prefix: keys.chunks(crawl, r.id) })) {
      parts.push(c.value);
    }
    if (parts.length !== r.chunks) {
      throw new FatalError(`item ${JSON.stringify(r.id)}: ${parts.length} of ${r.chunks} chunks`);
    }
    const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) (all.set(p, at), at += p.length);
    out.doc = dec.decode(all);
  }
  if (r.docBytes !== undefined) out.docBytes = r.docBytes;
  if (r.tooLarge) out.tooLarge = true;
  if (r.error) out.error = r.error;
  return out;
}

/** Streams a crawl's items in key order, reassembling chunked documents. Memory stays flat. */
export async function* iterateItems(kv: Deno.Kv, crawl: string): AsyncGenerator<ExportedItem> {
  for await (const e of kv.list<ItemRecord>({ prefix: keys.items(crawl) }, { batchSize: 1000 })) {
    yield await assemble(kv, crawl, e.value);
  }
}

/**
 * One page of a crawl's items after `cursor` (an opaque KV list cursor from the previous page).
 * Returns the next cursor, or null at the end.
 */
export async function pageItems(
  kv: Deno.Kv,
  crawl: string,
  options: { limit: number; cursor?: string },
): Promise<{ items: ExportedItem[]; cursor: string | null }> {
  const iter = kv.list<ItemRecord>({ prefix: keys.items(crawl) }, {
    limit: options.limit,
    cursor: options.cursor,
  });
  const items: ExportedItem[] = [];
  for await (const e of iter) items.push(await assemble(kv, crawl, e.value));
  return { items, cursor: items.length === options.limit && iter.cursor ? iter.cursor : null };
}

/** Number of stored items of a crawl (a full key scan; for tests and verification). */
export async function countItems(kv: Deno.Kv, crawl: string): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix: keys.items(crawl) }, { batchSize: 1000 })) n++;
  return n;
}
