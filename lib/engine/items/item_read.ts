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
import { keys, kvOp, partOfKey, utf8Length } from "../store/mod.ts";

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
  /** The whole id's length, when `id` is only its start (too long to keep). */
  idLength?: number;
}

type Part = string | Uint8Array;
type Pending = ExportedItem & { chunks?: number };
/** Items with their KV key parts (where they sort), in order. */
interface Run {
  items: Pending[];
  parts: Part[];
}

const dec = new TextDecoder();

/** A record's item; a chunked document is left for `withChunks`; `bare`: no document. */
function toItem(e: Deno.KvEntry<Uint8Array>, bare = false): Pending {
  const part = partOfKey(e.key) as Part;
  const r = decodeItem(e.value);
  const out: Pending = { id: typeof part === "string" ? part : r.id!, rev: r.rev };
  if (r.doc && !bare) out.doc = dec.decode(r.doc);
  if (r.chunks) out.chunks = r.chunks;
  if (r.docBytes !== undefined) out.docBytes = r.docBytes;
  if (r.tooLarge) out.tooLarge = true;
  if (r.error) out.error = r.error;
  if (r.idLength !== undefined) out.idLength = r.idLength;
  return out;
}

/** KV order of two key parts: byte strings before strings, strings in code point order. */
export function comparePart(a: Part, b: Part): number {
  if (typeof a === "string") return typeof b === "string" ? compareKeys(a, b) : 1;
  if (typeof b === "string") return -1;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/**
 * A key range of items, by key part; `after` excludes everything up to and including a part;
 * `bare`: documents are not decoded (for counting); `reverse`: last key first.
 */
interface Range {
  from?: string;
  to?: string;
  after?: Part;
  bare?: boolean;
  /** Last key first (no `after`). */
  reverse?: boolean;
}

/** The list selector of keys under `prefix` from `start` (inclusive) to `end` (exclusive). */
export function selectorBetween(
  prefix: Deno.KvKey,
  start?: Deno.KvKey,
  end?: Deno.KvKey,
): Deno.KvListSelector {
  if (start && end) return { start, end };
  return start ? { prefix, start } : end ? { prefix, end } : { prefix };
}

async function* recordRuns(kv: Deno.Kv, crawlId: string, r: Range): AsyncGenerator<Run> {
  const prefix = keys.items(crawlId);
  const start = r.after !== undefined
    ? keys.item(crawlId, r.after)
    : r.from !== undefined
    ? keys.item(crawlId, r.from)
    : undefined;
  const end = r.to !== undefined ? keys.item(crawlId, r.to) : undefined;
  const selector = selectorBetween(prefix, start, end);
  let run: Run = { items: [], parts: [] };
  for await (const e of kv.list<Uint8Array>(selector, { batchSize: 1000, reverse: r.reverse })) {
    const part = partOfKey(e.key) as Part;
    if (r.after !== undefined && comparePart(part, r.after) <= 0) continue;
    run.items.push(toItem(e, r.bare));
    run.parts.push(part);
    if (run.items.length === 1000) yield run, run = { items: [], parts: [] };
  }
  if (run.items.length > 0) yield run;
}

async function* blockRuns(kv: Deno.Kv, crawlId: string, r: Range): AsyncGenerator<Run> {
  const prefix = keys.blocks(crawlId);
  let from = r.from;
  if (typeof r.after === "string") {
    // Resuming inside a block: start at the block that holds the position.
    const holding = await blockHolding(kv, crawlId, r.after);
    from = holding ? partOfKey(holding.entry.key) as string : r.after;
  }
  const start = from !== undefined ? keys.block(crawlId, from) : undefined;
  const end = r.to !== undefined ? keys.block(crawlId, r.to) : undefined;
  const selector = selectorBetween(prefix, start, end);
  for await (const e of kv.list<Uint8Array>(selector, { batchSize: 100, reverse: r.reverse })) {
    let rows = decodeBlock(e.value, { docs: !r.bare });
    if (r.reverse) rows.reverse();
    if (typeof r.after === "string") {
      const after = r.after;
      rows = rows.filter((x) => compareKeys(x.id, after) > 0);
    }
    if (rows.length === 0) continue;
    const items: Pending[] = rows;
    for (const it of items) if (it.doc !== undefined) it.docBytes = utf8Length(it.doc);
    yield { items, parts: rows.map((x) => x.id) };
  }
}

/**
 * Merges two ordered streams of runs (pass-through while only one has items); `dir` -1: both are
 * in descending order.
 */
async function* merge(
  a: AsyncGenerator<Run>,
  b: AsyncGenerator<Run>,
  dir: 1 | -1 = 1,
): AsyncGenerator<Run> {
  const side = (g: AsyncGenerator<Run>) => ({ g, run: null as Run | null, at: 0, done: false });
  const x = side(a);
  const y = side(b);
  const fill = async (s: ReturnType<typeof side>) => {
    while (!s.done && (s.run === null || s.at >= s.run.items.length)) {
      const n = await s.g.next();
      if (n.done) s.done = true;
      else (s.run = n.value, s.at = 0);
    }
  };
  for (;;) {
    await Promise.all([fill(x), fill(y)]);
    if (x.done && y.done) return;
    const only = x.done ? y : y.done ? x : null;
    if (only) {
      const r = only.run!;
      yield only.at === 0 ? r : { items: r.items.slice(only.at), parts: r.parts.slice(only.at) };
      only.at = r.items.length;
      continue;
    }
    const out: Run = { items: [], parts: [] };
    const rx = x.run!;
    const ry = y.run!;
    while (x.at < rx.items.length && y.at < ry.items.length) {
      const s = comparePart(rx.parts[x.at], ry.parts[y.at]) * dir <= 0 ? x : y;
      out.items.push(s.run!.items[s.at]);
      out.parts.push(s.run!.parts[s.at++]);
    }
    yield out;
  }
}

function runs(kv: Deno.Kv, crawlId: string, r: Range): AsyncGenerator<Run> {
  return merge(recordRuns(kv, crawlId, r), blockRuns(kv, crawlId, r));
}

/** The item with its chunked document read back, if it has one. */
async function withChunks(kv: Deno.Kv, crawlId: string, item: Pending): Promise<ExportedItem> {
  const { chunks, ...rest } = item;
  if (!chunks) return rest;
  const part = await idKeyPart(item.id);
  return { ...rest, doc: await readChunks(kv, crawlId, part, chunks, item.id) };
}

async function readChunks(
  kv: Deno.Kv,
  crawlId: string,
  part: Part,
  count: number,
  id: string,
): Promise<string> {
  const parts: Uint8Array[] = [];
  const range = { start: keys.chunk(crawlId, part, 0), end: keys.chunk(crawlId, part, count) };
  for await (const c of kv.list<Uint8Array>(range)) parts.push(c.value);
  if (parts.length !== count) {
    throw new Error(`item ${JSON.stringify(id)}: ${parts.length} of ${count} chunks`);
  }
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (all.set(p, at), at += p.length);
  return dec.decode(all);
}

async function finish(kv: Deno.Kv, crawlId: string, items: Pending[]): Promise<ExportedItem[]> {
  return items.some((it) => it.chunks)
    ? await Promise.all(items.map((it) => withChunks(kv, crawlId, it)))
    : items;
}

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

/**
 * The items the crawl stores in `[from, to)` (null: open), in key order (`descending`: last key
 * first), in batches of at most 1,000 (documents read back). Ids KV cannot hold as string keys (ill-formed UTF-16) are only read
 * with an open start, where they sort.
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
  const gen = merge(
    recordRuns(kv, crawlId, { from: plain(from), to: plain(to), bare, reverse }),
    blockRuns(kv, crawlId, { from: blockFrom, to: plain(to), bare, reverse }),
    reverse ? -1 : 1,
  );
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
  const reads: Promise<void>[] = [];
  for (let i = 0; i < wanted.length; i += 10) {
    const slice = parts.slice(i, i + 10).map((p) => keys.item(crawlId, p));
    reads.push((async () => {
      const got = await kvOp(() => kv.getMany<Uint8Array[]>(slice));
      for (const e of got) {
        if (e.value === null) continue;
        const it = await withChunks(kv, crawlId, toItem(e as Deno.KvEntry<Uint8Array>));
        out.set(it.id, it);
      }
    })());
  }
  await Promise.all(reads);
  // The rest may be rows of blocks: each block read once, its rows kept while ids fall in it.
  const rest = wanted.filter((id) => !out.has(id) && plainPartSize(id) > 0).sort(compareKeys);
  let held: { first: string; last: string; byId: Map<string, Pending> } | null = null;
  for (const id of rest) {
    const inHeld = held !== null && compareKeys(id, held.first) >= 0 &&
      compareKeys(id, held.last) <= 0;
    if (!inHeld) {
      const block = await blockHolding(kv, crawlId, id);
      if (!block || block.rows.length === 0) continue;
      const rows: Pending[] = block.rows;
      for (const r of rows) if (r.doc !== undefined) r.docBytes = utf8Length(r.doc);
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
  const out: { key: Deno.KvKey; versionstamp: string | null }[] = [];
  for (let i = 0; i < keyList.length; i += 10) {
    const got = await kvOp(() => kv.getMany(keyList.slice(i, i + 10)));
    for (const e of got) out.push({ key: e.key, versionstamp: e.versionstamp });
  }
  return out;
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
