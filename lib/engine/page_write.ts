/**
 * Writing a listed page: its items and the shard's new state (cursor, counters, renewed lease, or
 * done after the end check in `verify.ts`), guarded by the shard's versionstamp.
 *
 * Keys-only pages go to blocks (`item_blocks.ts`) in ONE atomic op with the shard's new state and
 * the deletes of stale blocks in the range the page covers; a page that would not fit one op
 * commits a prefix of its rows and the next page starts at the first row left out. Pages with
 * documents go to item records in batches that fit KV's limits, each guarded; the last batch
 * carries the shard's new state, so a crash before it leaves only idempotent item writes behind.
 *
 * @module
 */
import { compareKeys } from "../plan/keys.ts";
import { blockable, blocksIn, packBlocks, type Position } from "./item_blocks.ts";
import { batchWrites, type ItemInput, prepareWrites, tallyItems } from "./item_store.ts";
import { AtomicBudget, keySize, valueSizeBound } from "./kv_limits.ts";
import type { ListedPage } from "./page_listing.ts";
import type { Guard, PageContext } from "./page_guard.ts";
import { commitShard, type CrawlRecord, keys, kvOp, type ShardRecord } from "./store.ts";
import { checkShardEnd } from "./verify.ts";

/** What became of one page. */
export type PageResult =
  | {
    kind: "committed";
    entry: Deno.KvEntry<ShardRecord>;
    rows: number;
    /** Only a prefix of the page fitted one op: the rest is listed again from the new cursor. */
    partial?: boolean;
    /** The next page, already being listed from where this one ended (when there is one). */
    next?: { from: { cursor: string; after: boolean }; listing: Promise<ListedPage> };
  }
  | { kind: "lost"; reason: string };

/** Items still inside the shard's end, and whether the end cut the page. */
function trim(items: ItemInput[], end: string | null): { kept: ItemInput[]; cut: boolean } {
  if (end === null) return { kept: items, cut: false };
  const at = items.findIndex((r) => compareKeys(r.id, end) >= 0);
  return at < 0 ? { kept: items, cut: false } : { kept: items.slice(0, at), cut: true };
}

/**
 * Writes the page's items and commits the shard's new state: blocks in one op for keys-only
 * crawls, guarded batches of item records otherwise.
 */
export async function writePage(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  page: { listed: ListedPage; items: ItemInput[] },
): Promise<PageResult> {
  if (!crawl.docs) return await writeBlockPage(ctx, guard, crawl, page);
  const shardKey = keys.shard(crawl.id, guard.entry.value.id);
  const reserve = new AtomicBudget().check(keySize(shardKey))
    .set(keySize(shardKey), valueSizeBound(guard.entry.value) + 8192);
  let pending = await prepareWrites(crawl.id, page.items, { maxDocBytes: ctx.maxDocBytes });
  for (let attempt = 0; attempt < 100; attempt++) {
    const { kept, cut } = trim(page.items, guard.entry.value.end);
    if (cut) {
      const ids = new Set(kept.map((k) => k.id));
      pending = pending.filter((w) => ids.has(w.id));
    }
    const batches = batchWrites(pending, reserve);
    let conflict = false;
    for (let b = 0; b < batches.length - 1 && !conflict; b++) {
      const res = await guard.serial(() =>
        kvOp(() => {
          const op = ctx.kv.atomic().check(guard.entry);
          for (const w of batches[b]) op.set(w.key, w.value);
          return op.commit();
        })
      );
      if (res.ok) pending = pending.slice(batches[b].length);
      else conflict = true;
    }
    if (!conflict) {
      const next = await nextState(ctx, guard, crawl, { listed: page.listed, kept, cut });
      const last = batches.at(-1) ?? [];
      const done = await guard.serial(() =>
        commitShard(ctx.kv, crawl.id, guard.entry, next, (op) => {
          for (const w of last) op.set(w.key, w.value);
        })
      );
      if (done) return { kind: "committed", entry: done, rows: kept.length };
    }
    if (!await guard.refresh()) return { kind: "lost", reason: guard.lost! };
  }
  return { kind: "lost", reason: "commits kept conflicting" };
}

/** Stale blocks deleted by one page at most (a relisted range rarely has more than a few). */
const MAX_STALE_DELETES = 300;

/** One atomic op: the page's blocks (or a prefix of them), stale blocks gone, the shard moved on. */
async function writeBlockPage(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  page: { listed: ListedPage; items: ItemInput[] },
): Promise<PageResult> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const cur = guard.entry.value;
    const { kept, cut } = trim(page.items, cur.end);
    const fit = await fitPage(ctx, crawl, { cur, kept, listed: page.listed, cut });
    const partial = fit.rows < kept.length;
    const listed: ListedPage = partial
      ? { ...page.listed, next: { cursor: kept[fit.rows].id, after: false }, shortOf: undefined }
      : page.listed;
    const next = fit.rows === 0 && partial
      ? { ...cur, lease: guard.lease(), updatedAt: ctx.now() } // only stale deletes fitted
      : await nextState(ctx, guard, crawl, {
        listed,
        kept: kept.slice(0, fit.rows),
        cut: !partial && cut,
      });
    const done = await guard.serial(() =>
      commitShard(ctx.kv, crawl.id, guard.entry, next, (op) => {
        for (const k of fit.deletes) op.delete(k);
        for (const w of fit.writes) op.set(w.key, w.value);
      })
    );
    if (done && fit.rows === 0 && partial) {
      guard.entry = done;
      continue;
    }
    if (done) return { kind: "committed", entry: done, rows: fit.rows, partial };
    if (!await guard.refresh()) return { kind: "lost", reason: guard.lost! };
  }
  return { kind: "lost", reason: "commits kept conflicting" };
}

/** Where the key range a page covers ends: its next cursor, or the shard's end. */
function pageEnd(cur: ShardRecord, listed: ListedPage, cut: boolean): Position | null {
  const n = listed.next;
  if (n === null || cut || (cur.end !== null && compareKeys(n.cursor, cur.end) >= 0)) {
    return cur.end === null ? null : { cursor: cur.end, after: false };
  }
  return n;
}

/**
 * The writes of as long a prefix of the page as fits one op with the shard's own check and set:
 * its rows in order as blocks (runs of blockable rows) and item records (the other rows), after
 * the deletes of the stale blocks in the range it covers.
 */
async function fitPage(
  ctx: PageContext,
  crawl: CrawlRecord,
  page: { cur: ShardRecord; kept: ItemInput[]; listed: ListedPage; cut: boolean },
): Promise<
  { rows: number; writes: { key: Deno.KvKey; value: Uint8Array }[]; deletes: Deno.KvKey[] }
> {
  const { cur, kept } = page;
  const shardKey = keys.shard(crawl.id, cur.id);
  const budget = new AtomicBudget().check(keySize(shardKey))
    .set(keySize(shardKey), valueSizeBound(cur) + 8192);
  let stale = await blocksIn(ctx.kv, crawl.id, {
    from: { cursor: cur.cursor, after: cur.after },
    to: pageEnd(cur, page.listed, page.cut),
  });
  // Too many stale blocks for one op: this op covers rows only up to the first one left.
  const stop = stale.length > MAX_STALE_DELETES ? stale[MAX_STALE_DELETES][2] as string : null;
  stale = stale.slice(0, MAX_STALE_DELETES);
  const deletes: Deno.KvKey[] = [];
  for (const k of stale) (deletes.push(k), budget.delete(keySize(k)));
  const writes: { key: Deno.KvKey; value: Uint8Array }[] = [];
  let rows = 0;
  const limit = stop === null ? kept.length : kept.findIndex((r) => compareKeys(r.id, stop) >= 0);
  const end = limit < 0 ? kept.length : limit;
  while (rows < end) {
    let run = rows;
    while (run < end && blockable(kept[run])) run++;
    const units = run > rows
      ? packBlocks(crawl.id, kept.slice(rows, run))
      : (await prepareWrites(crawl.id, [kept[rows]], { maxDocBytes: ctx.maxDocBytes }))
        .map((w) => ({ ...w, rows: 1 }));
    for (const u of units) {
      if (!budget.fitsSet(u.keyBytes, u.value.length)) return { rows, writes, deletes };
      budget.set(u.keyBytes, u.value.length);
      writes.push(u);
      rows += u.rows;
    }
  }
  // A stale key rewritten by this page is set, not deleted.
  const written = new Set(writes.map((w) => w.key[0] === "block" ? w.key[2] : null));
  return { rows, writes, deletes: deletes.filter((k) => !written.has(k[2] as string)) };
}

/**
 * The shard after this page: the cursor moved on, the counters added, the lease renewed; or, when
 * the page reached the range's end, checked against the registry (`verify.ts`) and done, or reset
 * to be listed again.
 */
async function nextState(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  page: { listed: ListedPage; kept: ItemInput[]; cut: boolean },
): Promise<ShardRecord> {
  const cur = guard.entry.value;
  const now = ctx.now();
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
    return { ...base, cursor: next.cursor, after: next.after, lease: guard.lease() };
  }
  const check = await checkShardEnd(ctx.source, crawl, cur, base.items);
  if (check.kind === "relist") {
    return {
      ...base,
      cursor: cur.start,
      after: false,
      items: 0,
      docs: 0,
      docErrors: 0,
      tooLarge: 0,
      relists: (cur.relists ?? 0) + 1,
      shortOf: null,
      lease: guard.lease(),
    };
  }
  const verified = check.kind === "exact" ? "exact" : check.kind === "drift" ? "drift" : null;
  return { ...base, done: true, lease: null, verified };
}
