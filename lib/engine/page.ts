/**
 * One page of one shard, by the worker holding the shard's lease: list rows from the cursor (see
 * `page_listing.ts`), fetch their documents when asked (`page_docs.ts`), then write the items in
 * batches that fit KV's limits, each guarded by the shard's versionstamp; the last batch also
 * carries the shard's new state (cursor, counters, renewed lease), so a page commits in as few
 * atomic ops as its items need and nothing is re-read that the guard already protects.
 *
 * A guard that fails means the shard record changed under us: if it is still ours and only its end
 * moved (a split), the page is trimmed to the new end and the write goes on; if the lease or the
 * cursor moved, the attempt is dropped. A crash before the last batch leaves only idempotent item
 * writes behind, and the page is redone. While documents are fetched, a heartbeat renews the lease
 * and publishes what is in flight (for the rebalancer), about once a second; it also notices a
 * paused or cancelled crawl, which drops the page at once rather than after its slowest document.
 *
 * @module
 */
import { compareKeys } from "../plan/keys.ts";
import type { DocMode, Source } from "../plan/source.ts";
import { batchWrites, type ItemInput, prepareWrites, tallyItems } from "./item_store.ts";
import { AtomicBudget, keySize, valueSizeBound } from "./kv_limits.ts";
import type { AdaptiveLimit } from "../base/adaptive_limit.ts";
import { fetchDocs } from "./page_docs.ts";
import { type ListedPage, listPage, rowsPerPage } from "./page_listing.ts";
import {
  commitShard,
  type CrawlRecord,
  getShard,
  type InFlight,
  keys,
  kvOp,
  type ShardRecord,
} from "./store.ts";
import { checkShardEnd } from "./verify.ts";

/** What one page needs from the worker that holds the shard. */
export interface PageContext {
  /** The store. */
  kv: Deno.Kv;
  /** The crawl's source. */
  source: Source;
  /** Who holds the lease. */
  owner: string;
  /** Lease length, in milliseconds (each commit and heartbeat renews it). */
  leaseMs: number;
  /** Clock, epoch ms. */
  now: () => number;
  /** Documents above this many bytes are recorded as too large. */
  maxDocBytes: number;
  /** How documents are fetched (resolved from the crawl). */
  docMode: DocMode;
  /** The shard's document concurrency (kept across its pages). */
  docLimit: AdaptiveLimit;
  /** Called once the registry's page cap is learned. */
  onCapLearned?: (cap: number) => Promise<void>;
}

/** The crawl and the shard entry the worker holds (its versionstamp guards every write). */
export interface Held {
  /** The crawl. */
  crawl: CrawlRecord;
  /** The shard, as last committed or read by this worker. */
  entry: Deno.KvEntry<ShardRecord>;
}

/** What became of one page. */
export type PageResult =
  | {
    kind: "committed";
    entry: Deno.KvEntry<ShardRecord>;
    rows: number;
    /** The next page, already being listed from where this one ended (when there is one). */
    next?: { from: { cursor: string; after: boolean }; listing: Promise<ListedPage> };
  }
  | { kind: "lost"; reason: string };

/** Lists the next page of `shard` (its cursor, end and short-page memory) for this crawl. */
export function startListing(
  ctx: PageContext,
  crawl: CrawlRecord,
  shard: ShardRecord,
): Promise<ListedPage> {
  const size = rowsPerPage(crawl, ctx.source, { docRows: docRows(crawl, ctx.docMode) });
  return listPage(ctx.source, crawl, shard, {
    size,
    includeDocs: crawl.docs && ctx.docMode === "include_docs",
  });
}

/** Rows per page when documents are fetched one by one: about 25 round trips. */
function docRows(crawl: CrawlRecord, mode: DocMode): number | undefined {
  if (!crawl.docs) return undefined;
  if (mode === "include_docs") return 500;
  if (mode === "bulk_get") return 1000;
  return Math.max(50, crawl.concurrency * 25);
}

/**
 * Processes the next page of the held shard (listed now, or already being listed: `listing`).
 * While it writes, the page after it is listed (so registry latency hides behind KV writes).
 * Resolves with the committed entry, or `lost` when the shard is no longer ours; throws on source
 * failures (the caller retries or fails the crawl).
 */
export async function processPage(
  ctx: PageContext,
  held: Held,
  options: { listing?: Promise<ListedPage> } = {},
): Promise<PageResult> {
  const { crawl } = held;
  const listed = await (options.listing ?? startListing(ctx, crawl, held.entry.value));
  if (listed.learnedCap) {
    ctx.source.capabilities.maxPage = Math.min(ctx.source.capabilities.maxPage, listed.learnedCap);
    await ctx.onCapLearned?.(listed.learnedCap);
  }
  const from = listed.next;
  const next = from
    ? {
      from,
      listing: startListing(ctx, crawl, { ...held.entry.value, ...from, shortOf: listed.shortOf }),
    }
    : undefined;
  next?.listing.catch(() => {}); // unused when the page is lost; its error resurfaces if used
  const guard = new Guard(ctx, held.entry);
  let items: ItemInput[] = listed.rows;
  if (crawl.docs && listed.rows.length > 0) {
    const beat = guard.heartbeat(listed.rows.length);
    try {
      items = await fetchDocs(ctx.source, listed.rows, {
        mode: ctx.docMode,
        limit: ctx.docLimit,
        currentEnd: () => guard.lost ? "" : guard.entry.value.end,
        pageFailures: held.entry.value.failures ?? 0,
        progress: (nextKey, started) => beat.progress(nextKey, started),
      });
    } finally {
      await beat.stop();
    }
  }
  if (guard.lost) return { kind: "lost", reason: guard.lost };
  const res = await writePage(ctx, guard, crawl, { listed, items });
  return res.kind === "committed" && next ? { ...res, next } : res;
}

/** The shard entry a page writes against, kept fresh through conflicts and heartbeats. */
class Guard {
  /** The shard as last committed or adopted. */
  entry: Deno.KvEntry<ShardRecord>;
  /** Why the page was given up, once it was. */
  lost: string | null = null;
  #ctx: PageContext;
  #cursor: string | null;
  #after: boolean;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(ctx: PageContext, entry: Deno.KvEntry<ShardRecord>) {
    this.#ctx = ctx;
    this.entry = entry;
    this.#cursor = entry.value.cursor;
    this.#after = entry.value.after;
  }

  /** Runs KV writes one at a time (heartbeats and batches share the versionstamp). */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(fn);
    this.#queue = p.catch(() => {});
    return p;
  }

  /**
   * After a failed guard: re-reads the shard and adopts it when it is still ours at the same
   * cursor (a split moved its end, or a heartbeat raced); records why not otherwise.
   */
  async refresh(): Promise<boolean> {
    const e = await getShard(this.#ctx.kv, crawlOf(this.entry), this.entry.value.id);
    const s = e.value;
    if (!s) this.lost = "shard vanished";
    else if (s.lease?.owner !== this.#ctx.owner) this.lost = "lease lost";
    else if (s.done || s.cursor !== this.#cursor || s.after !== this.#after) {
      this.lost = "superseded";
    } else this.entry = e as Deno.KvEntry<ShardRecord>;
    return this.lost === null;
  }

  /** A lease for this worker from now. */
  lease(): NonNullable<ShardRecord["lease"]> {
    return { owner: this.#ctx.owner, untilMs: this.#ctx.now() + this.#ctx.leaseMs };
  }

  /** Renews the lease and publishes progress about once a second until stopped. */
  heartbeat(
    rows: number,
  ): { progress(key: string | null, n: number): void; stop(): Promise<void> } {
    const since = this.#ctx.now();
    let inflight: InFlight = { nextKey: null, started: 0, rows, since };
    const every = Math.max(50, Math.min(1000, this.#ctx.leaseMs / 3));
    const beat = () =>
      this.serial(async () => {
        // A paused or cancelled crawl stops here, not after a page of slow documents: no new
        // document is started and the page is dropped (redone on resume from the same cursor).
        const crawl = (await this.#ctx.kv.get<CrawlRecord>(keys.crawl(crawlOf(this.entry)))).value;
        if (crawl?.status !== "running") {
          return void (this.lost = `crawl ${crawl?.status ?? "gone"}`);
        }
        for (let i = 0; i < 10 && !this.lost; i++) {
          const next = { ...this.entry.value, inflight, lease: this.lease() };
          const done = await commitShard(this.#ctx.kv, crawlOf(this.entry), this.entry, next);
          if (done) return void (this.entry = done);
          if (!await this.refresh()) return;
        }
      });
    const timer = setInterval(() => void beat().catch(() => {}), every);
    return {
      progress: (nextKey, started) => {
        inflight = { nextKey, started, rows, since };
      },
      stop: async () => {
        clearInterval(timer);
        await this.#queue;
      },
    };
  }
}

function crawlOf(entry: Deno.KvEntry<ShardRecord>): string {
  return entry.key[1] as string;
}

/** Items still inside the shard's end, and whether the end cut the page. */
function trim(items: ItemInput[], end: string | null): { kept: ItemInput[]; cut: boolean } {
  if (end === null) return { kept: items, cut: false };
  const at = items.findIndex((r) => compareKeys(r.id, end) >= 0);
  return at < 0 ? { kept: items, cut: false } : { kept: items.slice(0, at), cut: true };
}

/** Writes the page's items in guarded batches; the last batch commits the shard's new state. */
async function writePage(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  page: { listed: ListedPage; items: ItemInput[] },
): Promise<PageResult> {
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
