/**
 * Item blocks: how a keys-only crawl stores its rows. One KV value per ~60 KB of a page's rows
 * (`["block", crawl, firstId]` → UTF-8 JSON `[id, rev, id, rev, …]`) instead of one per item, so a
 * page of 500 names is one small atomic op, and export reads 1,000 values per million items.
 *
 * Rules that keep blocks exact:
 * - A block holds rows of one page, in key order; its key is its first id, so blocks are ordered
 *   and a block's rows lie between its key and the next block's key.
 * - A page's blocks, its stale blocks' deletes and the shard's new cursor are ONE atomic op (a page
 *   that would not fit commits a prefix of its rows; the rest is listed again), so a retried or
 *   duplicate page never leaves half a page behind.
 * - Listing a range again (a shard relisted after a count mismatch, or after its page size
 *   changed) can cut pages differently: every block keyed inside the key range a page covers and
 *   not rewritten by it is stale and is deleted in the same op. Blocks never cross a shard's
 *   cursor or end, so a page never touches another shard's blocks.
 * - A row that cannot be in a block (an id that is not a plain KV string, or a row over
 *   {@linkcode MAX_BLOCK_ROW_BYTES}) is always an item record (`item_store.ts`): the choice depends
 *   on the row alone, so a relisted row keeps its layout and can never be stored twice.
 *
 * @module
 */
import { compareKeys } from "../plan/keys.ts";
import { MAX_PLAIN_ID_KEY_BYTES, plainPartSize } from "./item_codec.ts";
import { keySize, MAX_VALUE_BYTES } from "./kv_limits.ts";
import { keys } from "./store.ts";

/** Target encoded size of one block, in bytes (under KV's 65,536-byte value limit). */
export const BLOCK_BYTES = 60_000;
/** Rows whose id and revision together exceed this many UTF-16 units are item records. */
export const MAX_BLOCK_ROW_BYTES = 2_048;

/** One row of a block: an id and its revision. */
export interface BlockRow {
  /** The item's id. */
  id: string;
  /** Its revision (for view rows, the value's JSON). */
  rev: string;
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

const enc = new TextEncoder();
const dec = new TextDecoder();

/** True when a row is stored in a block (decided by the row alone). */
export function blockable(row: BlockRow): boolean {
  return row.id.length + row.rev.length <= MAX_BLOCK_ROW_BYTES && plainPartSize(row.id) > 0;
}

/** Encodes rows as one block value (JSON keeps every UTF-16 string exactly, lone surrogates too). */
export function encodeBlock(rows: readonly BlockRow[]): Uint8Array {
  const flat: string[] = new Array(rows.length * 2);
  for (let i = 0; i < rows.length; i++) (flat[2 * i] = rows[i].id, flat[2 * i + 1] = rows[i].rev);
  return enc.encode(JSON.stringify(flat));
}

/** Decodes a block value. @throws RangeError for bytes that are not a block. */
export function decodeBlock(value: Uint8Array): BlockRow[] {
  let flat: unknown;
  try {
    flat = JSON.parse(dec.decode(value));
  } catch (err) {
    throw new RangeError("item block is not JSON", { cause: err });
  }
  if (!Array.isArray(flat) || flat.length % 2 !== 0) {
    throw new RangeError("item block is malformed");
  }
  const out: BlockRow[] = new Array(flat.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = { id: flat[2 * i], rev: flat[2 * i + 1] };
  return out;
}

/**
 * Cuts blockable rows (in key order) into blocks of about {@linkcode BLOCK_BYTES}, each exactly
 * under KV's value limit (a block that encodes larger, e.g. through JSON escapes, is halved).
 */
export function packBlocks(crawl: string, rows: readonly BlockRow[]): BlockWrite[] {
  const out: BlockWrite[] = [];
  let from = 0;
  let size = 2;
  const close = (to: number) => {
    if (to > from) pushBlock(crawl, rows.slice(from, to), out);
    from = to;
    size = 2;
  };
  for (let i = 0; i < rows.length; i++) {
    // UTF-16 units are a close estimate of UTF-8 bytes for names; the exact size is checked below.
    const add = rows[i].id.length + rows[i].rev.length + 6;
    if (size + add > BLOCK_BYTES) close(i);
    size += add;
  }
  close(rows.length);
  return out;
}

function pushBlock(crawl: string, rows: BlockRow[], out: BlockWrite[]): void {
  const value = encodeBlock(rows);
  if (value.length > MAX_VALUE_BYTES && rows.length > 1) {
    const half = rows.length >> 1;
    pushBlock(crawl, rows.slice(0, half), out);
    pushBlock(crawl, rows.slice(half), out);
    return;
  }
  const key = keys.block(crawl, rows[0].id);
  out.push({ key, value, keyBytes: keySize(key), rows: rows.length });
}

/** The key part KV can hold at or below `key` in key order: cut before a lone surrogate or a length KV would refuse. */
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

/**
 * Keys of the blocks keyed in `[from, to)` (`to` null: to the crawl's last block): what a page
 * that covers that range must delete unless it rewrites them.
 */
export async function blocksIn(
  kv: Deno.Kv,
  crawl: string,
  range: { from: Position; to: Position | null },
): Promise<Deno.KvKey[]> {
  const prefix = keys.blocks(crawl);
  const start = range.from.cursor === null
    ? undefined
    : keys.block(crawl, floorKey(range.from.cursor));
  const out: Deno.KvKey[] = [];
  const iter = kv.list({ prefix, ...(start ? { start } : {}) }, { batchSize: 16 });
  for await (const e of iter) {
    const k = e.key[2] as string;
    if (!atOrAfter(k, range.from)) continue;
    if (range.to !== null && atOrAfter(k, range.to)) break;
    out.push(e.key);
  }
  return out;
}

/**
 * The block whose range holds `id` (the one with the greatest key at or below it) and the row's
 * index in it (-1 when the block does not hold it), or null when no block is keyed at or below.
 */
export async function blockHolding(
  kv: Deno.Kv,
  crawl: string,
  id: string,
): Promise<{ entry: Deno.KvEntry<Uint8Array>; rows: BlockRow[]; index: number } | null> {
  if (plainPartSize(id) <= 0) return null; // such ids are never in blocks
  const iter = kv.list<Uint8Array>({
    prefix: keys.blocks(crawl),
    end: keys.block(crawl, id + "\0"),
  }, { reverse: true, limit: 1 });
  for await (const entry of iter) {
    const rows = decodeBlock(entry.value);
    return { entry, rows, index: rows.findIndex((r) => r.id === id) };
  }
  return null;
}
