/**
 * The worker: process one page of one shard. List rows in [cursor, end), optionally fetch each
 * row's document with bounded concurrency, write the items (idempotent, keyed by id), then in ONE
 * atomic op guarded by the shard's versionstamp advance the cursor, add the counters, bump the token
 * and add the dispatcher's own mutation (the next page's message, a lease). A duplicate or stale
 * attempt finds the token moved on and changes nothing; a crash before the commit leaves only
 * idempotent item writes behind, and the page is redone.
 *
 * @module
 */
import { compareKeys } from "../plan/keys.ts";
import { mapPool } from "../base/pool.ts";
import { OPEN_END, type Row, type Source } from "../plan/source.ts";
import { commitShard, type CrawlRecord, getCrawl, getShard, type ShardRecord } from "./store.ts";
import { type ItemInput, writeItems } from "./item_store.ts";

/** What a worker needs from its surroundings (all injected). */
export interface WorkerDeps {
  /** The store. */
  kv: Deno.Kv;
  /** Opens the source a crawl reads from (cached by the caller as it likes). */
  openSource: (crawl: CrawlRecord) => Source;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Documents above this many bytes are recorded as too large. @default 33554432 */
  maxDocBytes?: number;
}

/** Default largest stored document, in bytes (32 MiB). */
export const DEFAULT_MAX_DOC_BYTES = 32 * 1024 * 1024;

/** The result of one attempt at a page. */
export type PageOutcome =
  | { kind: "committed"; crawl: CrawlRecord; shard: ShardRecord; rows: number }
  | { kind: "skipped"; reason: string };

/** Which page to process: a shard, and the token the caller believes current (if any). */
export interface PageTarget {
  /** The crawl. */
  crawlId: string;
  /** The shard. */
  shardId: number;
  /** Expected token; an attempt with another token is stale. Omit to take the current one. */
  token?: number;
}

/**
 * Processes one page of a shard. `extra` is called with the atomic op and the shard's next state so
 * a dispatcher can add its own mutations to the commit. With `lease`, the page is only processed and
 * committed while `lease.owner` holds the shard's lease, and the commit renews it (or drops it when
 * the shard is done). A commit that loses a race re-reads the
 * shard: if a split shrank its end meanwhile, the page is trimmed to the new end and committed
 * again; if the token moved on, the attempt is dropped.
 */
export async function processPage(
  deps: WorkerDeps,
  target: PageTarget,
  extra?: (op: Deno.AtomicOperation, next: ShardRecord) => void,
  lease?: { owner: string; leaseMs: number },
): Promise<PageOutcome> {
  const { kv } = deps;
  const now = deps.now ?? Date.now;
  const crawlEntry = await getCrawl(kv, target.crawlId);
  const crawl = crawlEntry.value;
  if (!crawl) return { kind: "skipped", reason: "unknown crawl" };
  if (crawl.status !== "running") return { kind: "skipped", reason: `crawl ${crawl.status}` };
  let entry = await getShard(kv, target.crawlId, target.shardId);
  if (!entry.value) return { kind: "skipped", reason: "unknown shard" };
  if (entry.value.done) return { kind: "skipped", reason: "shard done" };
  const token = target.token ?? entry.value.token;
  if (entry.value.token !== token) return { kind: "skipped", reason: "stale token" };
  if (lease && entry.value.lease?.owner !== lease.owner) {
    return { kind: "skipped", reason: "lease lost" };
  }

  const source = deps.openSource(crawl);
  const pageSize = pageSizeFor(crawl, source);
  const shard0 = entry.value;
  // One row more than the page: its key is the next cursor, so no `skip` is ever needed.
  // Sources planned without ranks (pouchdb-like) need an explicit end key to list everything.
  const end = shard0.end ?? (crawl.planMethod === "rank" ? null : OPEN_END);
  const page = await source.list({ start: shard0.cursor, end, limit: pageSize + 1 });
  const rows = page.rows.slice(0, pageSize);
  const nextCursor = page.rows.length > pageSize ? page.rows[pageSize].id : null;
  const items = crawl.docs
    ? await fetchDocs(source, rows, {
      concurrency: crawl.concurrency,
      // A split may shrink this shard while its documents are fetched: stop at the new end.
      currentEnd: async () => (await getShard(kv, crawl.id, target.shardId)).value?.end ?? null,
      now,
    })
    : rows;
  await writeItems(kv, crawl.id, items, {
    maxDocBytes: deps.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES,
  });

  for (let attempt = 0; attempt < 100; attempt++) {
    const cur: ShardRecord = entry.value;
    if (cur.token !== token || cur.done) return { kind: "skipped", reason: "superseded" };
    // A lease worker may only commit while it holds the lease; each commit renews it.
    if (lease && cur.lease?.owner !== lease.owner) return { kind: "skipped", reason: "lease lost" };
    // A split may have moved the end below what this page read: count only what is still ours.
    let counted = items;
    let cursor = nextCursor;
    if (cur.end !== null) {
      const cut = items.findIndex((r) => compareKeys(r.id, cur.end!) >= 0);
      if (cut >= 0) {
        counted = items.slice(0, cut);
        cursor = null;
      } else if (cursor !== null && compareKeys(cursor, cur.end) >= 0) cursor = null;
    }
    const c = countDocs(counted, deps.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES);
    const next: ShardRecord = {
      ...cur,
      cursor: cursor ?? cur.cursor,
      done: cursor === null,
      items: cur.items + counted.length,
      pages: cur.pages + 1,
      docs: cur.docs + c.docs,
      docErrors: cur.docErrors + c.docErrors,
      tooLarge: cur.tooLarge + c.tooLarge,
      token: cur.token + 1,
      updatedAt: now(),
      recentRate: movingRate(cur, counted.length, now()),
      lease: lease && cursor !== null
        ? { owner: lease.owner, untilMs: now() + lease.leaseMs }
        : (lease ? null : cur.lease),
    };
    if (await commitShard(kv, crawl.id, entry, next, (op) => extra?.(op, next))) {
      return { kind: "committed", crawl, shard: next, rows: counted.length };
    }
    const again = await getShard(kv, crawl.id, target.shardId);
    if (!again.value) return { kind: "skipped", reason: "shard vanished" };
    entry = again as Deno.KvEntry<ShardRecord>;
  }
  return { kind: "skipped", reason: "commit kept conflicting" };
}

/** Items per second of this page, averaged with the shard's earlier pages (weight 1/2). */
function movingRate(shard: ShardRecord, items: number, nowMs: number): number {
  const rate = items / Math.max(0.001, (nowMs - shard.updatedAt) / 1000);
  return shard.recentRate ? (shard.recentRate + rate) / 2 : rate;
}

/** Counts documents, misses and oversized documents the way the store classifies them. */
function countDocs(
  items: ItemInput[],
  maxDocBytes: number,
): { docs: number; docErrors: number; tooLarge: number } {
  let docs = 0;
  let docErrors = 0;
  let tooLarge = 0;
  const enc = new TextEncoder();
  for (const it of items) {
    if (it.error) docErrors++;
    else if (it.docJson !== undefined) {
      docs++;
      // A UTF-16 unit is at most 3 UTF-8 bytes: only measure when the bound is in doubt.
      if (it.docJson.length * 3 > maxDocBytes && enc.encode(it.docJson).length > maxDocBytes) {
        tooLarge++;
      }
    }
  }
  return { docs, docErrors, tooLarge };
}

/**
 * Rows per page: the listing page, less the row that only carries the next cursor. With documents,
 * a page is cut to about 25 round trips of document fetches, so commits (and splits) stay frequent
 * however slow documents are; listing requests are a small share of the work then.
 */
export function pageSizeFor(crawl: CrawlRecord, source: Source): number {
  const page = Math.min(crawl.maxPage, source.capabilities.maxPage) - 1;
  const size = crawl.docs ? Math.min(page, Math.max(50, crawl.concurrency * 25)) : page;
  return Math.max(1, size);
}

/**
 * Fetches each row's document, `concurrency` at a time; permanent misses become item errors. Rows
 * at or past the shard's current end (re-read at most every 200 ms) are dropped unfetched: they
 * belong to a split-off shard now.
 */
async function fetchDocs(
  source: Source,
  rows: Row[],
  o: { concurrency: number; currentEnd: () => Promise<string | null>; now: () => number },
): Promise<ItemInput[]> {
  let end: string | null = rows.length ? await o.currentEnd() : null;
  let checkedAt = o.now();
  let refreshing: Promise<void> | null = null;
  const out = await mapPool(rows, async (row): Promise<ItemInput | null> => {
    if (o.now() - checkedAt > 200 && !refreshing) {
      refreshing = o.currentEnd().then((e) => {
        end = e;
        checkedAt = o.now();
        refreshing = null;
      });
    }
    if (end !== null && compareKeys(row.id, end) >= 0) return null;
    const res = await source.doc(row.id);
    if (res.ok) return { id: row.id, rev: row.rev, docJson: res.json };
    return { id: row.id, rev: row.rev, error: { status: res.status, reason: res.reason } };
  }, { concurrency: o.concurrency });
  // Everything from the first dropped row on is outside the shard; keep the prefix only.
  const cut = out.findIndex((x) => x === null);
  return (cut < 0 ? out : out.slice(0, cut)) as ItemInput[];
}
