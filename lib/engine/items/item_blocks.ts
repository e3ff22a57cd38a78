/**
 * Item blocks: how most rows are stored. One KV value per ~60 KB of a page's rows
 * (`["block", crawl, firstId]` → `[stride, id, rev, (doc,) id, rev, …]`, see `_block_codec.ts`)
 * instead of one per item, so a page of 4,000 names is one or two small values and export reads
 * 1,000 values per million items. Documents ride along as the JSON text the registry served.
 *
 * Rules that keep blocks exact:
 * - A block holds consecutive rows of one page, in key order; its key is its first id, so blocks
 *   are ordered and a block's rows lie between its key and the next block's key.
 * - A page's blocks, the deletes of what they make stale and the shard's new cursor are ONE atomic
 *   op; a page too big for one op is committed as consecutive parts, each moving the cursor on, so
 *   a retried or duplicate page never leaves half a part behind.
 * - A range is listed a second time only after a relist (a count mismatch), and the pages may
 *   be cut differently then: on a shard marked `revisit` (relisted, or split from one that was),
 *   every block or string-keyed record keyed inside the key range a part covers and not rewritten
 *   by it is stale and is deleted in the same op. Blocks never cross a shard's cursor or end.
 * - Rows a block cannot hold are item records (`item_store.ts`): ids that are not plain KV strings
 *   (never blockable, whatever the listing), rows over {@linkcode MAX_BLOCK_ROW_BYTES}, documents
 *   over {@linkcode MAX_BLOCK_DOC_UNITS}, too large, or not had (errors).
 *
 * @module
 */
import { ConflictError } from "../../base/errors.ts";
import { compareKeys } from "../../plan/keys.ts";
import { MAX_PLAIN_ID_KEY_BYTES, plainPartSize } from "./_item_codec.ts";
import { keys, keySize, MAX_VALUE_BYTES, partOfKey } from "../store/mod.ts";
import { type BlockRow, decodeBlock, encodeBlock } from "./_block_codec.ts";

/**
 * The item layout this version writes and reads (`CrawlRecord.itemLayout`): nothing stored ahead
 * of a shard's cursor, documents in blocks as raw JSON (`_block_codec.ts`). Crawls stored by
 * earlier versions (no layout: records ahead of the cursor; 2: documents as JSON strings) are
 * not read: {@linkcode checkItemLayout}.
 */
export const ITEM_LAYOUT = 3;

/**
 * Refuses a crawl stored in an earlier layout than {@linkcode ITEM_LAYOUT} (by a version before
 * 0.5), which this version neither resumes nor reads: run it again. A crawl never planned
 * (`planMethod` empty) holds no item: whatever made it, this version plans and writes it.
 * @throws ConflictError
 */
export function checkItemLayout(
  crawl: { id: string; itemLayout?: number; planMethod: string },
): void {
  const layout = crawl.itemLayout ?? 1;
  if (layout >= ITEM_LAYOUT || crawl.planMethod === "") return;
  throw new ConflictError(
    `crawl ${crawl.id} was stored by an earlier rankcrawl (item layout ${layout}; this version ` +
      `reads ${ITEM_LAYOUT}): delete it and run the crawl again`,
  );
}

/** Target encoded size of one block, in bytes (under KV's 65,536-byte value limit). */
export const BLOCK_BYTES = 60_000;
/** Rows whose id and revision together exceed this many UTF-16 units are item records. */
export const MAX_BLOCK_ROW_BYTES = 2_048;
/** Documents longer than this many UTF-16 units are item records (chunked when large). */
export const MAX_BLOCK_DOC_UNITS = 16_000;

/** A row as listed, with its document's outcome when fetched (`ItemInput`). */
export interface ListedRow {
  /** The item's id. */
  id: string;
  /** Its revision. */
  rev: string;
  /** The document's outcome. */
  doc?: { kind: string; json?: string };
}

/** A block to write: its key and encoded rows. */
export interface BlockWrite {
  /** `["block", crawl, firstId]`. */
  key: Deno.KvKey;
  /** UTF-8 JSON of the rows. */
  value: Uint8Array;
  /** Encoded key size. */
  keyBytes: number;
  /** Rows it holds. */
  rows: number;
}

/** A position in key order: keys at or after `cursor` (strictly after it when `after`). */
export interface Position {
  /** The key, or null for the very start. */
  cursor: string | null;
  /** Whether `cursor` itself is excluded. */
  after: boolean;
}

/** True when a row is stored in a block (decided by the row and its document alone). */
export function blockable(row: ListedRow): boolean {
  if (row.id.length + row.rev.length > MAX_BLOCK_ROW_BYTES || plainPartSize(row.id) <= 0) {
    return false;
  }
  const d = row.doc;
  return d === undefined || d.kind === "doc" && d.json!.length <= MAX_BLOCK_DOC_UNITS;
}

/** The block row of a blockable listed row. */
export function blockRow(row: ListedRow): BlockRow {
  return row.doc === undefined
    ? { id: row.id, rev: row.rev }
    : { id: row.id, rev: row.rev, doc: row.doc.json! };
}

/**
 * Cuts blockable rows (in key order) into blocks of about {@linkcode BLOCK_BYTES}, each exactly
 * under KV's value limit (a block that encodes larger, e.g. through JSON escapes, is halved).
 */
export function packBlocks(crawlId: string, rows: readonly BlockRow[]): BlockWrite[] {
  const out: BlockWrite[] = [];
  let from = 0;
  let size = 2;
  const close = (to: number) => {
    if (to > from) pushBlock(crawlId, rows.slice(from, to), out);
    from = to;
    size = 2;
  };
  for (let i = 0; i < rows.length; i++) {
    // UTF-16 units are a close estimate of UTF-8 bytes for names; the exact size is checked below.
    const add = rows[i].id.length + rows[i].rev.length + (rows[i].doc?.length ?? 0) + 9;
    if (size + add > BLOCK_BYTES) close(i);
    size += add;
  }
  close(rows.length);
  return out;
}

function pushBlock(crawlId: string, rows: BlockRow[], out: BlockWrite[]): void {
  const value = encodeBlock(rows);
  if (value.length > MAX_VALUE_BYTES && rows.length > 1) {
    const half = rows.length >> 1;
    pushBlock(crawlId, rows.slice(0, half), out);
    pushBlock(crawlId, rows.slice(half), out);
    return;
  }
  const key = keys.block(crawlId, rows[0].id);
  out.push({ key, value, keyBytes: keySize(key), rows: rows.length });
}

/**
 * The key part KV can hold at or below `key` in key order: cut before a lone surrogate or a length
 * KV would refuse.
 */
function floorKey(key: string): string {
  if (plainPartSize(key) > 0) return key;
  let bytes = 0;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    const d = key.charCodeAt(i + 1);
    const pair = c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff;
    if (c >= 0xd800 && c <= 0xdfff && !pair) return key.slice(0, i);
    bytes += pair ? 4 : c === 0 ? 2 : c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
    if (bytes > MAX_PLAIN_ID_KEY_BYTES) return key.slice(0, i);
    if (pair) i++;
  }
  return key;
}

/** True when `key` is at or after position `p`. */
function atOrAfter(key: string, p: Position): boolean {
  if (p.cursor === null) return true;
  const c = compareKeys(key, p.cursor);
  return p.after ? c > 0 : c >= 0;
}

/** Blocks and string-keyed item records keyed in a range of key order. */
export interface KeysInRange {
  /** Block keys. */
  blocks: Deno.KvKey[];
  /** Item record keys whose key part is a string (the id itself). */
  records: Deno.KvKey[];
}

/**
 * The blocks and string-keyed item records keyed in `[from, to)` (`to` null: to the crawl's last):
 * what a page part covering that range may have to delete.
 */
export async function keysIn(
  kv: Deno.Kv,
  crawlId: string,
  range: { from: Position; to: Position | null },
): Promise<KeysInRange> {
  const scan = async (prefix: Deno.KvKey, at: (k: string) => Deno.KvKey) => {
    const start = range.from.cursor === null ? undefined : at(floorKey(range.from.cursor));
    const out: Deno.KvKey[] = [];
    const iter = kv.list({ prefix, ...(start ? { start } : {}) }, { batchSize: 16 });
    for await (const e of iter) {
      const k = partOfKey(e.key);
      if (typeof k !== "string" || !atOrAfter(k, range.from)) continue;
      if (range.to !== null && atOrAfter(k, range.to)) break;
      out.push(e.key);
    }
    return out;
  };
  const [blocks, records] = await Promise.all([
    scan(keys.blocks(crawlId), (k) => keys.block(crawlId, k)),
    scan(keys.items(crawlId), (k) => keys.item(crawlId, k)),
  ]);
  return { blocks, records };
}

/**
 * The block whose range holds `id` (the one with the greatest key at or below it) and the row's
 * index in it (-1 when the block does not hold it), or null when no block is keyed at or below.
 */
export async function blockHolding(
  kv: Deno.Kv,
  crawlId: string,
  id: string,
): Promise<{ entry: Deno.KvEntry<Uint8Array>; rows: BlockRow[]; index: number } | null> {
  if (plainPartSize(id) <= 0) return null; // such ids are never in blocks
  const iter = kv.list<Uint8Array>({
    prefix: keys.blocks(crawlId),
    end: keys.block(crawlId, id + "\0"),
  }, { reverse: true, limit: 1 });
  for await (const entry of iter) {
    const rows = decodeBlock(entry.value);
    return { entry, rows, index: rows.findIndex((r) => r.id === id) };
  }
  return null;
}
