/**
 * What a crawl stores in a key range, counted from the items themselves and cut into parts: how the
 * final check proves a range that never holds still as a whole one part at a time
 * (`range_parts.ts`). Ids are placed by code point order, the registry's: blocks and string-keyed
 * records by their key, byte-keyed records (ids KV cannot hold as strings) by the id they keep.
 *
 * @module
 */
import { compareKeys } from "../../plan/keys.ts";
import { blockHolding } from "./item_blocks.ts";
import { decodeBlock } from "./_block_codec.ts";
import { decodeItem, plainPartSize } from "./_item_codec.ts";
import { selectorBetween } from "./_item_runs.ts";
import { keys, kvOp, partOfKey } from "../store/mod.ts";

/** A key range `[start, end)` of a crawl (null: open) with the items the store holds there. */
export interface StoredPart {
  /** First key; null = open. */
  start: string | null;
  /** End key (exclusive); null = open. */
  end: string | null;
  /** Items the store holds in the range. */
  stored: number;
}

/** An item the store holds: its id and revision. */
export interface StoredRow {
  /** The item's id. */
  id: string;
  /** Its revision (a view row's value JSON). */
  rev: string;
}

/** Options of {@linkcode cutStored}. */
export interface CutOptions {
  /** Parts to cut the range into (at most; fewer when it holds fewer items). @default 1 */
  parts?: number;
  /** Items the range is expected to hold: the cuts are spaced by it. @default the count read */
  expectedItems?: number;
}

/**
 * The items the crawl stores in `range`, cut at stored ids into up to `parts` parts of about
 * `expectedItems / parts` items each: the parts cover the range in order, each with its exact count
 * (`parts: 1` just counts). Cuts are only made at ids a listing can start from (well-formed, short
 * enough for a KV key). Returns null when the range holds an id the store keeps only by its start
 * (over `MAX_STORED_ID_UNITS`): where it sorts among cuts is not known, so the range cannot be cut
 * or counted by id. Reads the range once; memory holds the cuts and the byte-keyed ids only.
 */
export async function cutStored(
  kv: Deno.Kv,
  crawlId: string,
  range: { start: string | null; end: string | null },
  options: CutOptions = {},
): Promise<StoredPart[] | null> {
  const inRange = within(range);
  const rows = await storedRows(kv, crawlId, range, inRange);
  if (rows === null) return null;
  const parts = Math.max(1, Math.floor(options.parts ?? 1));
  const expected = options.expectedItems ??
    (parts > 1 ? (await cutStored(kv, crawlId, range))![0].stored : 0);
  // The k-th cut goes at the item with k·expected/parts items before it.
  const cutAt = (k: number) => Math.max(1, Math.round(expected * k / parts));
  const out: StoredPart[] = [{ start: range.start, end: range.end, stored: 0 }];
  let seen = 0;
  for await (const batch of rows) {
    for (const { id } of batch) {
      const last = out[out.length - 1];
      if (
        out.length < parts && seen >= cutAt(out.length) && last.stored > 0 && plainPartSize(id) > 0
      ) {
        last.end = id;
        out.push({ start: id, end: range.end, stored: 0 });
      }
      out[out.length - 1].stored++;
      seen++;
    }
  }
  return out;
}

/**
 * Every item the crawl stores in `range`, in order, with its revision: what a part is held against
 * when it is checked by its rows. Null when it holds more than `maxRows`, or an id the store keeps
 * only by its start (see {@linkcode cutStored}).
 */
export async function storedItems(
  kv: Deno.Kv,
  crawlId: string,
  range: { start: string | null; end: string | null },
  options: { maxRows: number },
): Promise<StoredRow[] | null> {
  const inRange = within(range);
  const rows = await storedRows(kv, crawlId, range, inRange);
  if (rows === null) return null;
  const out: StoredRow[] = [];
  for await (const batch of rows) {
    out.push(...batch);
    if (out.length > options.maxRows) return null;
  }
  return out;
}

/** Whether an id lies in `[start, end)` (null: open). */
function within(range: { start: string | null; end: string | null }): (id: string) => boolean {
  return (id) =>
    (range.start === null || compareKeys(id, range.start) >= 0) &&
    (range.end === null || compareKeys(id, range.end) < 0);
}

/** The stored rows of a range as one sorted stream; null when one is kept only by its start. */
async function storedRows(
  kv: Deno.Kv,
  crawlId: string,
  range: { start: string | null; end: string | null },
  inRange: (id: string) => boolean,
): Promise<AsyncGenerator<StoredRow[]> | null> {
  const odd = await byteKeyedRows(kv, crawlId, inRange);
  if (odd === null) return null;
  const sources = [blockRows(kv, crawlId, range, inRange), recordRows(kv, crawlId, range, inRange)];
  return mergeSorted(mergeSorted(sources[0], sources[1]), once(odd));
}

/** Block rows in the range, in order (from the block holding its start). */
async function* blockRows(
  kv: Deno.Kv,
  crawlId: string,
  range: { start: string | null; end: string | null },
  inRange: (id: string) => boolean,
): AsyncGenerator<StoredRow[]> {
  const prefix = keys.blocks(crawlId);
  // Bounds KV cannot hold as string keys (ill-formed ids) are left to the filter.
  let start: Deno.KvKey | undefined;
  if (range.start !== null && plainPartSize(range.start) > 0) {
    const holding = await kvOp(() => blockHolding(kv, crawlId, range.start!));
    start = holding ? holding.entry.key : keys.block(crawlId, range.start);
  }
  const end = plainEnd(range.end) ? keys.block(crawlId, range.end!) : undefined;
  for await (
    const e of kv.list<Uint8Array>(selectorBetween(prefix, start, end), { batchSize: 100 })
  ) {
    yield decodeBlock(e.value, { docs: false }).filter((r) => inRange(r.id))
      .map((r) => ({ id: r.id, rev: r.rev }));
  }
}

/** True when `end` bounds a KV listing (a string KV can hold). */
function plainEnd(end: string | null): boolean {
  return end !== null && plainPartSize(end) > 0;
}

/** String-keyed item records in the range, in order (their keys are the ids). */
async function* recordRows(
  kv: Deno.Kv,
  crawlId: string,
  range: { start: string | null; end: string | null },
  inRange: (id: string) => boolean,
): AsyncGenerator<StoredRow[]> {
  // From the first string key part at the earliest: byte-keyed records sort before it (see
  // `byteKeyedIds`). Bounds KV cannot hold as string keys are left to the filter.
  const from = range.start !== null && plainPartSize(range.start) > 0 ? range.start : "";
  const end = plainEnd(range.end) ? keys.item(crawlId, range.end!) : undefined;
  const selector = selectorBetween(keys.items(crawlId), keys.item(crawlId, from), end);
  let batch: StoredRow[] = [];
  for await (const e of kv.list<Uint8Array>(selector, { batchSize: 1000 })) {
    const id = partOfKey(e.key) as string;
    if (!inRange(id)) {
      if (range.start !== null && compareKeys(id, range.start) < 0) continue;
      break; // past the end
    }
    batch.push({ id, rev: decodeItem(e.value).rev });
    if (batch.length === 1000) yield batch, batch = [];
  }
  if (batch.length > 0) yield batch;
}

/** Byte-keyed records in the range, sorted; null when one is kept only by its start. */
async function byteKeyedRows(
  kv: Deno.Kv,
  crawlId: string,
  inRange: (id: string) => boolean,
): Promise<StoredRow[] | null> {
  const out: StoredRow[] = [];
  const selector = { prefix: keys.items(crawlId), end: keys.item(crawlId, "") };
  for await (const e of kv.list<Uint8Array>(selector, { batchSize: 1000 })) {
    const r = decodeItem(e.value);
    if (r.idLength !== undefined) return null;
    if (r.id !== undefined && inRange(r.id)) out.push({ id: r.id, rev: r.rev });
  }
  return out.sort((a, b) => compareKeys(a.id, b.id));
}

async function* once(batch: StoredRow[]): AsyncGenerator<StoredRow[]> {
  if (batch.length > 0) yield batch;
}

/** Merges two streams of row batches sorted by id into one sorted stream. */
async function* mergeSorted(
  a: AsyncGenerator<StoredRow[]>,
  b: AsyncGenerator<StoredRow[]>,
): AsyncGenerator<StoredRow[]> {
  const side = (g: AsyncGenerator<StoredRow[]>) => ({
    g,
    batch: [] as StoredRow[],
    at: 0,
    done: false,
  });
  const x = side(a);
  const y = side(b);
  const fill = async (s: ReturnType<typeof side>) => {
    while (!s.done && s.at >= s.batch.length) {
      const n = await s.g.next();
      if (n.done) s.done = true;
      else (s.batch = n.value, s.at = 0);
    }
  };
  for (;;) {
    await Promise.all([fill(x), fill(y)]);
    if (x.done && y.done) return;
    const only = x.done ? y : y.done ? x : null;
    if (only) {
      yield only.batch.slice(only.at);
      only.at = only.batch.length;
      continue;
    }
    const out: StoredRow[] = [];
    while (x.at < x.batch.length && y.at < y.batch.length) {
      const s = compareKeys(x.batch[x.at].id, y.batch[y.at].id) <= 0 ? x : y;
      out.push(s.batch[s.at++]);
    }
    yield out;
  }
}
