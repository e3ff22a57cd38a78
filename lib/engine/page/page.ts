/**
 * One page of one shard, by the worker holding the shard's lease: list rows from the cursor (see
 * `page_listing.ts`), fetch their documents when asked (`page_docs.ts`), then write the items and
 * the shard's new state (`_page_write.ts`), guarded by the shard's versionstamp, so that nothing is
 * re-read that the guard already protects.
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
import { fetchDocs } from "./page_docs.ts";
import { rowsDocBytes } from "../../plan/source.ts";
import { type ItemInput, spillDocument } from "../items/mod.ts";
import { Guard, type PageContext } from "./page_guard.ts";
import { valuedIds, withValues } from "./_page_values.ts";
import { type ListedPage, listPage, rowsPerPage } from "./page_listing.ts";
import { type PageResult, writePage } from "./_page_write.ts";
import type { CrawlRecord, ShardRecord } from "../store/mod.ts";

export type { PageContext } from "./page_guard.ts";
export type { PageResult } from "./_page_write.ts";

/** The crawl and the shard entry the worker holds (its versionstamp guards every write). */
export interface Held {
  /** The crawl. */
  crawl: CrawlRecord;
  /** The shard, as last committed or read by this worker. */
  entry: Deno.KvEntry<ShardRecord>;
}

/**
 * Lists the next page of `shard` (its cursor, end and short-page memory) for this crawl. A shard
 * listed again (`revisit`: its range was found wrong, or split from one that was) is always asked
 * of the registry: what the listing cache holds was listed before the event that made the range
 * wrong, and would bring back rows as they were.
 */
export function startListing(
  ctx: PageContext,
  crawl: CrawlRecord,
  shard: ShardRecord,
): Promise<ListedPage> {
  const size = rowsPerPage(crawl, ctx.source, { docMode: ctx.docMode });
  return listPage(ctx.source, crawl, shard, {
    size,
    includeDocs: crawl.docs && ctx.docMode === "include_docs",
    cached: ctx.listings && !shard.revisit
      ? ((request) =>
        ctx.listings!.take(crawl.id, request, {
          source: ctx.source,
          ranks: ranksFit(crawl),
          end: shard.end,
        }))
      : undefined,
  });
}

/**
 * Whether a request from below a cached answer may be sent up to it and the answer follow (see
 * `ListingCache.take`): the crawl's offsets must be ranks, its keys ids in code-point order.
 */
function ranksFit(crawl: CrawlRecord): boolean {
  return crawl.planMethod === "rank" && !crawl.view &&
    (crawl.idOrder ?? "codepoint") === "codepoint";
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
  const listed = await (options.listing ?? startListing(ctx, held.crawl, held.entry.value));
  // A cap learned here applies from the next page on; the runner keeps it with the crawl.
  const learnedCap = listed.learnedCap;
  const crawl = learnedCap
    ? { ...held.crawl, pageCap: Math.min(held.crawl.pageCap ?? Infinity, learnedCap) }
    : held.crawl;
  const from = listed.next;
  const next = from
    ? {
      from,
      // Listed before this page is written: its rows count as the shard's already.
      listing: startListing(ctx, crawl, {
        ...held.entry.value,
        ...from,
        shortOf: listed.shortOf,
        items: held.entry.value.items + listed.rows.length,
      }),
    }
    : undefined;
  next?.listing.catch(() => {}); // unused when the page is lost; its error resurfaces if used
  const guard = new Guard(ctx, held.entry);
  let items: ItemInput[] = listed.rows;
  const valued = valuedIds(listed.rows);
  if (crawl.docs && listed.rows.length > 0) {
    const beat = guard.heartbeat(listed.rows.length);
    try {
      items = await fetchDocs(ctx.source, listed.rows, {
        mode: ctx.docMode,
        limit: ctx.docLimit,
        slots: ctx.docSlots,
        currentEnd: () => guard.end(),
        pageFailures: held.entry.value.failures ?? 0,
        progress: (nextKey, started) => beat.progress(nextKey, started),
        memory: ctx.docMemory,
        // Large documents go to their chunks as they arrive: the page never holds them (a
        // row's with a value of its own goes there with the value, below).
        spill: (id, doc) =>
          valued.has(id)
            ? Promise.resolve(doc)
            : spillDocument(ctx.kv, crawl.id, { id, doc }, { maxDocBytes: ctx.maxDocBytes }),
      });
    } finally {
      await beat.stop();
    }
  }
  const charged = rowsDocBytes(items); // what the budget was charged for the page's documents
  try {
    if (guard.lost) return { kind: "lost", reason: guard.lost };
    if (valued.size > 0) {
      items = await withValues(ctx.kv, crawl.id, listed.rows, items, {
        maxDocBytes: ctx.maxDocBytes,
      });
    }
    return await finishPage(ctx, guard, crawl, { listed, items, next, learnedCap });
  } finally {
    ctx.docMemory?.refund(charged); // the page's documents are written (or dropped)
  }
}

async function finishPage(
  ctx: PageContext,
  guard: Guard,
  crawl: CrawlRecord,
  p: {
    listed: ListedPage;
    items: ItemInput[];
    next: Extract<PageResult, { kind: "committed" }>["next"];
    learnedCap?: number;
  },
): Promise<PageResult> {
  const { listed, items, next, learnedCap } = p;
  const res = await writePage(ctx, guard, crawl, { listed, items });
  if (res.kind !== "committed") return res;
  return { ...res, ...(next ? { next } : {}), ...(learnedCap ? { learnedCap } : {}) };
}
