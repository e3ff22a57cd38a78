/**
 * The runs every reader of a crawl's items is made of (private to this room): records and blocks
 * listed in KV key order, as runs of items with the key parts they sort by, merged into one stream
 * (either direction), documents read back from their chunks when a reader needs them.
 *
 * @module
 */
import { compareKeys } from "../../plan/keys.ts";
import { blockHolding } from "./item_blocks.ts";
import { type BlockRow, decodeBlock } from "./_block_codec.ts";
import { decodeItem, idKeyPart } from "./_item_codec.ts";
import { getEntries, keys, partOfKey, utf8Length } from "../store/mod.ts";

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
  /**
   * The document is pending: its host answered `error` (an older revision, or not found yet) and
   * it is asked again until it serves the item's revision (then the item holds it).
   */
  pending?: true;
  /** The whole id's length, when `id` is only its start (too long to keep). */
  idLength?: number;
}

export type Part = string | Uint8Array;
export type Pending = ExportedItem & { chunks?: number };
/** Items with their KV key parts (where they sort), in order. */
export interface Run {
  items: Pending[];
  parts: Part[];
}

const dec = new TextDecoder();

/** A record's item; a chunked document is left for `withChunks`; `bare`: no document. */
export function toItem(e: Deno.KvEntry<Uint8Array>, bare = false): Pending {
  const part = partOfKey(e.key) as Part;
  const r = decodeItem(e.value);
  const out: Pending = { id: typeof part === "string" ? part : r.id!, rev: r.rev };
  if (r.doc && !bare) out.doc = dec.decode(r.doc);
  if (r.chunks) out.chunks = r.chunks;
  if (r.docBytes !== undefined) out.docBytes = r.docBytes;
  if (r.tooLarge) out.tooLarge = true;
  if (r.error) out.error = r.error;
  if (r.pending) out.pending = true;
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
export interface Range {
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

export async function* recordRuns(kv: Deno.Kv, crawlId: string, r: Range): AsyncGenerator<Run> {
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

/** A block's rows as items: each document's size told, as a record's is. */
export function blockItems(rows: BlockRow[]): Pending[] {
  const items: Pending[] = rows;
  for (const it of items) if (it.doc !== undefined) it.docBytes = utf8Length(it.doc);
  return items;
}

export async function* blockRuns(kv: Deno.Kv, crawlId: string, r: Range): AsyncGenerator<Run> {
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
    yield { items: blockItems(rows), parts: rows.map((x) => x.id) };
  }
}

/**
 * Merges two ordered streams of runs (pass-through while only one has items); `dir` -1: both are
 * in descending order.
 */
export async function* merge(
  a: AsyncGenerator<Run>,
  b: AsyncGenerator<Run>,
  dir: 1 | -1 = 1,
  by: "part" | "id" = "part",
): AsyncGenerator<Run> {
  const order = by === "part"
    ? (x: Run, i: number, y: Run, j: number) => comparePart(x.parts[i], y.parts[j])
    : (x: Run, i: number, y: Run, j: number) => compareKeys(x.items[i].id, y.items[j].id);
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
      const s = order(rx, x.at, ry, y.at) * dir <= 0 ? x : y;
      out.items.push(s.run!.items[s.at]);
      out.parts.push(s.run!.parts[s.at++]);
    }
    yield out;
  }
}

/**
 * The items under byte-string key parts (ids KV cannot hold as string keys: ill-formed UTF-16, or
 * too long) whose ids `keep` takes, by id (`reverse`: last first). KV sorts those parts before
 * every string, not where their ids sort, so their ids are read first (the records alone, no
 * chunks) and sorted, then their records read again a thousand at a time.
 */
export async function* byteKeyRuns(
  kv: Deno.Kv,
  crawlId: string,
  r: { keep: (id: string) => boolean; bare: boolean; reverse: boolean },
): AsyncGenerator<Run> {
  const found: { item: Pending; part: Part }[] = [];
  const region = { prefix: keys.items(crawlId), end: keys.item(crawlId, "") };
  for await (const e of kv.list<Uint8Array>(region, { batchSize: 1000 })) {
    const item = toItem(e, true);
    if (r.keep(item.id)) found.push({ item, part: partOfKey(e.key) as Part });
  }
  const dir = r.reverse ? -1 : 1;
  found.sort((a, b) => compareKeys(a.item.id, b.item.id) * dir);
  for (let i = 0; i < found.length; i += 1000) {
    const batch = found.slice(i, i + 1000);
    const run: Run = { items: [], parts: [] };
    if (r.bare) {
      for (const f of batch) (run.items.push(f.item), run.parts.push(f.part));
    } else {
      const got = await getEntries<Uint8Array>(kv, batch.map((f) => keys.item(crawlId, f.part)));
      for (const e of got) {
        if (e.value === null) continue; // deleted meanwhile
        run.items.push(toItem(e as Deno.KvEntry<Uint8Array>));
        run.parts.push(partOfKey(e.key) as Part);
      }
    }
    if (run.items.length > 0) yield run;
  }
}

export function runs(kv: Deno.Kv, crawlId: string, r: Range): AsyncGenerator<Run> {
  return merge(recordRuns(kv, crawlId, r), blockRuns(kv, crawlId, r));
}

/** The item with its chunked document read back, if it has one. */
export async function withChunks(
  kv: Deno.Kv,
  crawlId: string,
  item: Pending,
): Promise<ExportedItem> {
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

export async function finish(
  kv: Deno.Kv,
  crawlId: string,
  items: Pending[],
): Promise<ExportedItem[]> {
  return items.some((it) => it.chunks)
    ? await Promise.all(items.map((it) => withChunks(kv, crawlId, it)))
    : items;
}
