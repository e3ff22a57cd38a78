/**
 * Writing a listed page: its items and the shard's new state (cursor, counters, renewed lease, or
 * done after the end check in `verify/_verdicts.ts`), guarded by the shard's versionstamp.
 *
 * A page is committed in ONE atomic op with the shard's new state (blocks of rows, item records
 * for the rows blocks cannot hold, and, on a shard listed a second time, the deletes of stale
 * blocks and records in the range it covers); a page too big for one op is committed in
 * consecutive parts, each moving the cursor on to the first row it left out. A crash at any
 * instant leaves whole parts behind: the rest of the page is listed again from the cursor. Only a
 * large document's chunks are written before the op (idempotent, keyed by id); the record that
 * points at them comes with the op.
 *
 * @module
 */
import { compareKeys } from "../../plan/keys.ts";
import {
  blockable,
  blockRow,
  chunkKeys,
  type ItemInput,
  keysIn,
  packBlocks,
  type Position,
  prepareWrites,
  setInBatches,
  tallyItems,
} from "../items/mod.ts";
import {
  addNote,
  AtomicBudget,
  commitRelist,
  commitShard,
  type CrawlRecord,
  keys,
  keySize,
  type Note,
  parseKey,
  relisted,
  type ShardRecord,
  shardStream,
  valueSizeBound,
} from "../store/mod.ts";
import { cursorAt, type ListedPage, type NextCursor } from "./page_listing.ts";
import type { Guard, PageContext } from "./page_guard.ts";

/** What became of one page. */
export type PageResult =
  | {
    kind: "committed";
    entry: Deno.KvEntry<ShardRecord>;
    rows: number;
    /** The next page, already being listed from where this one ended (when there is one). */
    next?: { from: NextCursor; listing: Promise<ListedPage> };
    /** The registry's page cap, learned by this page (the crawl should keep it). */
    learnedCap?: number;
  }
  | { kind: "lost"; reason: string };

/** Items still inside the shard's end, and whether the end cut the page. */
function trim(items: ItemInput[], end: string | null): { kept: ItemInput[]; cut: boolean } {
  if (end === null) return { kept: items, cut: false };
  const at = items.findIndex((r) => compareKeys(r.id, end) >= 0);
  return at < 0 ? { kept: items, cut: false } : { kept: items.slice(0, at), cut: true };
}

/** A page's note at most: two keys of the key space, in bytes as KV counts a record. */
const NOTE_VALUE_BYTES = 16_384;

/** Stale blocks and records deleted by one part at most (a relisted range rarely has a few). */
const MAX_STALE_DELETES = 300;

/**
 * Writes the page's items with the shard's new state, guarded by the shard's versionstamp: one
 * atomic op per part (usually the whole page), each moving the cursor on (`item_blocks.ts`).
 * Conflicts are resolved through the guard (a moved end trims the page); a lost lease or cursor
 * drops what is left.
 */
export async function writePage(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  page: { listed: ListedPage; items: ItemInput[] },
): Promise<PageResult> {
  let items = page.items;
  let rows = 0;
  for (let attempt = 0; attempt < 100; attempt++) {
    const cur = guard.entry.value;
    const { kept, cut } = trim(items, cur.end);
    const fit = await fitPart(ctx, crawl, { cur, kept, listed: page.listed, cut });
    const partial = fit.rows < kept.length;
    if (partial && fit.rows === 0 && fit.deletes.length === 0) {
      // Cannot happen within KV's limits (a block or record is at most a value); never loop on it.
      throw new Error(`row ${JSON.stringify(kept[0].id.slice(0, 80))} does not fit one atomic op`);
    }
    const next = !partial
      ? await nextState(ctx, guard, crawl, { listed: page.listed, kept, cut })
      : fit.rows === 0
      ? { ...cur, lease: guard.lease(), updatedAt: ctx.clock.now() } // only stale deletes fitted
      : await nextState(ctx, guard, crawl, {
        listed: {
          ...page.listed,
          next: cursorAt(kept[fit.rows - 1].id, kept[fit.rows].id),
          shortOf: undefined,
        },
        kept: kept.slice(0, fit.rows),
        cut: false,
      });
    // A range listed again starts its count afresh: the changes counted there go with it.
    const commit = (next.relists ?? 0) > (cur.relists ?? 0) ? commitRelist : commitShard;
    // What this part made true in the store, noted for sinks in the same op (`notes.ts`): the
    // keys from the cursor to where the part ends hold exactly what the store holds there.
    const noted = { ...next, notes: (cur.notes ?? 0) + 1 };
    const to = partial ? kept[fit.rows].id : endKey(pageEnd(cur, page.listed, cut));
    const note: Note = { kind: "range", from: cur.cursor, to };
    const done = await guard.serial(() =>
      commit(ctx.kv, crawl.id, guard.entry, noted, (op) => {
        for (const k of fit.deletes) op.delete(k);
        for (const w of fit.writes) op.set(w.key, w.value);
        addNote(op, crawl.id, { stream: shardStream(cur.id), n: noted.notes, note });
      })
    );
    if (done && !partial) return { kind: "committed", entry: done, rows: rows + fit.rows };
    if (done) {
      // The rest of the page goes on from the cursor this part moved to.
      guard.adopt(done);
      items = kept.slice(fit.rows);
      rows += fit.rows;
      attempt = 0;
    } else if (!await guard.refresh()) return { kind: "lost", reason: guard.lost! };
  }
  return { kind: "lost", reason: "commits kept conflicting" };
}

/** The first key past a position (its row is in when `after`); null: open. */
function endKey(p: Position | null): string | null {
  return p === null ? null : p.after ? p.cursor + "\0" : p.cursor;
}

/** Where the key range a page covers ends: its next cursor, or the shard's end. */
function pageEnd(cur: ShardRecord, listed: ListedPage, cut: boolean): Position | null {
  const n = listed.next;
  if (n === null || cut || (cur.end !== null && compareKeys(n.cursor, cur.end) >= 0)) {
    return cur.end === null ? null : { cursor: cur.end, after: false };
  }
  return n;
}

interface Part {
  /** Rows of the page (from its front) that this part commits. */
  rows: number;
  /** Sets: blocks and item records. */
  writes: { key: Deno.KvKey; value: Uint8Array }[];
  /** Stale blocks and records in the range the part covers (and their chunks). */
  deletes: Deno.KvKey[];
}

/** The id a string-keyed block or item record is keyed by (where it sorts among the rows). */
function keyedAt(key: Deno.KvKey): string {
  const k = parseKey(key)!;
  return k.kind === "block" ? k.first : k.part as string;
}

/**
 * As long a front part of the page as fits one op with the shard's own check and set: its rows in
 * order as blocks (runs of blockable rows) and item records (the other rows; a large document's
 * chunks are written first, idempotently, outside the op), and the deletes of what it makes stale.
 */
async function fitPart(
  ctx: PageContext,
  crawl: CrawlRecord,
  page: { cur: ShardRecord; kept: ItemInput[]; listed: ListedPage; cut: boolean },
): Promise<Part> {
  const { cur, kept } = page;
  const shardKey = keys.shard(crawl.id, cur.id);
  // The shard's own check and set, and its note (two keys at most), with the old note's delete.
  const noteKey = keys.note(crawl.id, shardStream(cur.id), Number.MAX_SAFE_INTEGER);
  const budget = new AtomicBudget().check(keySize(shardKey))
    .set(keySize(shardKey), valueSizeBound(cur) + 8192)
    .set(keySize(noteKey), NOTE_VALUE_BYTES).delete(keySize(noteKey));
  const { stale, chunks, stop } = await staleKeys(ctx, crawl, page);
  for (const k of [...stale, ...[...chunks.values()].flat()]) budget.delete(keySize(k));
  const limit = stop === null ? -1 : kept.findIndex((r) => compareKeys(r.id, stop) >= 0);
  const { rows, writes } = await fillRows(
    ctx,
    crawl,
    kept.slice(0, limit < 0 ? kept.length : limit),
    budget,
  );
  if (stale.length === 0) return { rows, writes, deletes: [] };
  // Deletes only inside the range this part covers; a stale key it rewrites is set, not deleted.
  const partEnd = rows < kept.length ? kept[rows].id : null;
  const written = new Set(writes.map((w) => JSON.stringify(w.key)));
  const deletes: Deno.KvKey[] = [];
  for (const k of stale) {
    if (partEnd !== null && compareKeys(keyedAt(k), partEnd) >= 0) continue;
    if (written.has(JSON.stringify(k))) continue;
    deletes.push(k, ...(chunks.get(JSON.stringify(k)) ?? []));
  }
  return { rows, writes, deletes };
}

/**
 * What an earlier listing left in the range this page covers (only a range listed before can hold
 * any, see `item_blocks.ts`): its string-keyed blocks and records in key order, at most
 * {@linkcode MAX_STALE_DELETES} (then `stop` is the first left out: the part ends before it), and
 * the chunks of those records.
 */
async function staleKeys(
  ctx: PageContext,
  crawl: CrawlRecord,
  page: { cur: ShardRecord; listed: ListedPage; cut: boolean },
): Promise<{ stale: Deno.KvKey[]; chunks: Map<string, Deno.KvKey[]>; stop: string | null }> {
  const { cur } = page;
  if (!cur.revisit) return { stale: [], chunks: new Map(), stop: null };
  const found = await keysIn(ctx.kv, crawl.id, {
    from: { cursor: cur.cursor, after: cur.after },
    to: pageEnd(cur, page.listed, page.cut),
  });
  const all = [...found.blocks, ...found.records]
    .sort((a, b) => compareKeys(keyedAt(a), keyedAt(b)));
  const stop = all.length > MAX_STALE_DELETES ? keyedAt(all[MAX_STALE_DELETES]) : null;
  const stale = all.slice(0, MAX_STALE_DELETES);
  const chunks = new Map<string, Deno.KvKey[]>();
  for (const k of stale) {
    if (parseKey(k)?.kind !== "item") continue;
    chunks.set(JSON.stringify(k), await chunkKeys(ctx.kv, crawl.id, keyedAt(k)));
  }
  return { stale, chunks, stop };
}

/** As many front rows as fit `budget`: runs of blockable rows as blocks, the others as records. */
async function fillRows(
  ctx: PageContext,
  crawl: CrawlRecord,
  kept: ItemInput[],
  budget: AtomicBudget,
): Promise<{ rows: number; writes: { key: Deno.KvKey; value: Uint8Array }[] }> {
  const writes: { key: Deno.KvKey; value: Uint8Array }[] = [];
  let rows = 0;
  fill: while (rows < kept.length) {
    let run = rows;
    while (run < kept.length && blockable(kept[run])) run++;
    if (run > rows) {
      for (const b of packBlocks(crawl.id, kept.slice(rows, run).map(blockRow))) {
        if (!budget.fitsSet(b.keyBytes, b.value.length)) break fill;
        budget.set(b.keyBytes, b.value.length);
        writes.push(b);
        rows += b.rows;
      }
      continue;
    }
    const ws = await prepareWrites(crawl.id, [kept[rows]], {
      maxDocBytes: ctx.maxDocBytes,
      nowMs: ctx.clock.now(),
    });
    // The record, and a pending document's entry with it (`pending_docs.ts`), in the guarded op.
    const guarded = ws.filter((w) => w.role !== "chunk");
    const [record, entry] = guarded;
    if (!budget.fitsSet(record.keyBytes, record.value.length)) break;
    const withRecord = new AtomicBudget().set(record.keyBytes, record.value.length);
    if (entry && !budget.fitsSet(entry.keyBytes, entry.value.length, withRecord)) break;
    await setInBatches(ctx.kv, ws.filter((w) => w.role === "chunk")); // chunks first, idempotent
    for (const w of guarded) {
      budget.set(w.keyBytes, w.value.length);
      writes.push(w);
    }
    rows++;
  }
  return { rows, writes };
}

/**
 * The shard after this page: the cursor moved on, the counters added, the lease renewed; or, when
 * the page reached the range's end, checked against the registry (`ctx.checkEnd`) and done, or reset
 * to be listed again.
 */
async function nextState(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  page: { listed: ListedPage; kept: ItemInput[]; cut: boolean },
): Promise<ShardRecord> {
  const cur = guard.entry.value;
  const now = ctx.clock.now();
  const t = tallyItems(page.kept, ctx.maxDocBytes);
  const rate = page.kept.length / Math.max(0.001, (now - cur.updatedAt) / 1000);
  const next = page.listed.next;
  const base: ShardRecord = {
    ...cur,
    items: cur.items + t.items,
    pages: cur.pages + 1,
    docs: cur.docs + t.docs,
    docErrors: cur.docErrors + t.docErrors,
    tooLarge: cur.tooLarge + t.tooLarge,
    updatedAt: now,
    recentRate: cur.recentRate ? (cur.recentRate + rate) / 2 : rate,
    failures: 0,
    retryAt: 0,
    inflight: null,
    shortOf: page.listed.shortOf ?? null,
  };
  const past = next !== null && cur.end !== null && compareKeys(next.cursor, cur.end) >= 0;
  if (next !== null && !page.cut && !past) {
    return {
      ...base,
      cursor: next.cursor,
      after: next.after,
      skip: next.skip ?? null,
      lease: guard.lease(),
    };
  }
  const check = await ctx.checkEnd(cur, { crawl, items: base.items });
  if (check === "relist") return relisted(base, now, guard.lease());
  return { ...base, done: true, lease: null, verified: check === "exact" ? "exact" : null };
}
