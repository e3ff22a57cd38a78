/**
 * What readers read of crawls beside their status (`status.ts`): the list of crawls, a crawl's
 * record, its items page by page, in batches and as NDJSON blocks, its document errors, and its plan
 * picture. Readers (the HTTP app, the CLI, export) go through here, never to the store directly.
 *
 * @module
 */
import { redactUrl } from "../../../base/redact.ts";
import { ConflictError, NotFoundError } from "../../../base/errors.ts";
import type { CrawlSpec } from "../../../base/spec.ts";
import { idOfKey } from "../../../plan/id_order.ts";
import { compareKeys } from "../../../plan/keys.ts";
import type { PlanPicture } from "../../../plan/plan_svg.ts";
import {
  blockNdjsonBatches,
  checkItemLayout,
  type DocError,
  type ExportedItem,
  hasRecords,
  itemBatches,
  iterateItems,
  pageDocErrors,
  pageItems,
} from "../../items/mod.ts";
import {
  type CrawlRecord,
  type CrawlStatus,
  getCrawl,
  listCrawlEntries,
  listCrawls,
  listShards,
} from "../../store/mod.ts";

/** One line of the crawl list. */
export interface CrawlSummary {
  /** Crawl id. */
  id: string;
  /** Lifecycle state. */
  status: CrawlStatus;
  /** The source, without credentials. */
  source: string;
  /** Items in the registry when planned. */
  total: number;
  /** When the crawl was created (ISO 8601). */
  createdAt: string;
  /** Why it failed, if it did. */
  error: string | null;
}

/** A crawl's source as readers see it: without credentials (a demo source as it is). */
export function shownSource(crawl: CrawlRecord): string {
  return crawl.source.startsWith("demo:") ? crawl.source : redactUrl(crawl.source);
}

/** A crawl record as one line of the crawl list. */
function summaryOf(r: CrawlRecord): CrawlSummary {
  return {
    id: r.id,
    status: r.status,
    source: shownSource(r),
    total: r.total,
    createdAt: new Date(r.createdAt).toISOString(),
    error: r.error,
  };
}

/** Every crawl record in the store, oldest first (what a reader of every crawl needs). */
export async function crawlsOldestFirst(kv: Deno.Kv): Promise<CrawlRecord[]> {
  return (await listCrawls(kv)).sort((a, b) => a.createdAt - b.createdAt);
}

/** Every crawl in the store, oldest first. */
export async function listCrawlSummaries(kv: Deno.Kv): Promise<CrawlSummary[]> {
  return (await crawlsOldestFirst(kv)).map(summaryOf);
}

/** A crawl as a listing of a KV file shows it (`deno task crawls`): what it is and how far. */
export interface CrawlListing extends CrawlSummary {
  /** What it was asked to do; URLs without credentials. */
  spec: CrawlSpec;
  /** Items stored so far, over all its shards. */
  itemsStored: number;
  /** When it ended (done, failed, cancelled; ISO 8601), or null. */
  finishedAt: string | null;
}

/**
 * Every crawl in the store with its spec and items stored, oldest first. Reads every crawl's
 * shard records: for a listing of a file, not for a page a browser polls.
 */
export async function listCrawlListings(kv: Deno.Kv): Promise<CrawlListing[]> {
  const out: CrawlListing[] = [];
  for (const r of await crawlsOldestFirst(kv)) {
    const shards = await listShards(kv, r.id);
    out.push({
      ...summaryOf(r),
      spec: specOf(r),
      itemsStored: shards.reduce((sum, e) => sum + e.value.items, 0),
      finishedAt: r.finishedAt === null ? null : new Date(r.finishedAt).toISOString(),
    });
  }
  return out;
}

/** The spec part of a crawl record, its URLs without credentials. */
export function specOf(r: CrawlRecord): CrawlSpec {
  const spec: CrawlSpec = {
    source: shownSource(r),
    docsUrl: r.docsUrl === null ? null : redactUrl(r.docsUrl),
    shards: r.shards,
    docs: r.docs,
    concurrency: r.concurrency,
    maxPage: r.maxPage,
    rebalance: r.rebalance,
  };
  if (r.follow) spec.follow = true;
  if (r.view) spec.view = r.view;
  if (r.rate !== undefined) spec.rate = r.rate;
  if (r.docFields) spec.docFields = r.docFields;
  if (r.abbreviated) spec.abbreviated = true;
  return spec;
}

/** Every crawl's id, state and record versionstamp (what changed since a look, at a glance). */
export async function listCrawlVersions(
  kv: Deno.Kv,
): Promise<{ id: string; status: CrawlStatus; versionstamp: string }[]> {
  return (await listCrawlEntries(kv)).map((e) => ({
    id: e.value.id,
    status: e.value.status,
    versionstamp: e.versionstamp,
  }));
}

/** The crawl record of `id`. @throws NotFoundError when there is none. */
export async function requireCrawl(kv: Deno.Kv, id: string): Promise<CrawlRecord> {
  const crawl = (await getCrawl(kv, id)).value;
  if (!crawl) throw new NotFoundError(`no crawl with id ${id}`);
  return crawl;
}

/** The crawl record of `id` as stored, or null: what readers need beyond its status. */
export async function findCrawl(kv: Deno.Kv, id: string): Promise<CrawlRecord | null> {
  return (await getCrawl(kv, id)).value;
}

/**
 * A crawl whose items may be read: not one being deleted (its items are half gone), nor one
 * stored in an earlier item layout.
 */
export async function requireItems(kv: Deno.Kv, id: string): Promise<CrawlRecord> {
  const crawl = await requireCrawl(kv, id);
  if (crawl.status === "deleting") {
    throw new ConflictError(`crawl ${id} is being deleted; its items cannot be read`);
  }
  checkItemLayout(crawl);
  return crawl;
}

/** The starts of a crawl's shards (splits included) in key order, the open first one left out. */
async function shardStarts(kv: Deno.Kv, id: string): Promise<string[]> {
  return (await listShards(kv, id)).map((e) => e.value.start)
    .filter((s): s is string => s !== null).sort(compareKeys);
}

/**
 * One page of a crawl's items after `cursor` (opaque, from the previous page); the next cursor is
 * null at the end. @throws NotFoundError for an unknown crawl; InputError for a forged cursor.
 */
export async function crawlItemsPage(
  kv: Deno.Kv,
  id: string,
  options: { limit: number; cursor?: string },
): Promise<{ items: ExportedItem[]; cursor: string | null }> {
  await requireItems(kv, id);
  return await pageItems(kv, id, options);
}

/**
 * One page of a crawl's document errors (`{id, status, reason}`) after `cursor`; see
 * `pageDocErrors`. @throws NotFoundError for an unknown crawl; InputError for a forged cursor.
 */
export async function crawlDocErrors(
  kv: Deno.Kv,
  id: string,
  options: { limit: number; cursor?: string },
): Promise<{ errors: DocError[]; cursor: string | null }> {
  await requireItems(kv, id);
  return await pageDocErrors(kv, id, options);
}

/** Every item of a crawl in key order, streamed. @throws NotFoundError for an unknown crawl. */
export async function* crawlItems(kv: Deno.Kv, id: string): AsyncGenerator<ExportedItem> {
  await requireCrawl(kv, id);
  yield* iterateItems(kv, id);
}

/**
 * Every item of a crawl in key order, in batches, the shards' ranges read ahead in parallel (the
 * fastest way out; `concurrency` ranges at once, 1 for the least memory while the reader is the
 * slower side). @throws NotFoundError for an unknown crawl.
 */
export async function* crawlItemBatches(
  kv: Deno.Kv,
  id: string,
  o: {
    /** Ranges read ahead at once. @default 4 */
    concurrency?: number;
  } = {},
): AsyncGenerator<ExportedItem[]> {
  await requireItems(kv, id);
  const starts = await shardStarts(kv, id);
  yield* itemBatches(kv, id, { bounds: starts, concurrency: o.concurrency });
}

/**
 * Every item of a crawl as NDJSON bytes (`{"id","rev","doc"?}` lines), straight from its blocks
 * without decoding them, when the crawl allows it: not a view, no item records. Null otherwise
 * (use {@linkcode crawlItemBatches}). @throws NotFoundError for an unknown crawl; ConflictError
 * for one being deleted, or stored by an earlier version (`checkItemLayout`).
 */
export async function crawlNdjsonBlocks(
  kv: Deno.Kv,
  id: string,
): Promise<AsyncIterable<{ bytes: Uint8Array; rows: number }> | null> {
  const crawl = await requireItems(kv, id);
  if (crawl.view !== undefined || await hasRecords(kv, id)) return null;
  const starts = await shardStarts(kv, id);
  return blockNdjsonBatches(kv, id, { bounds: starts });
}

/**
 * What the plan picture of a crawl shows: the even split's cuts with their ranks (recorded when it
 * was planned; none for crawls planned without ranks) and the current balanced cuts, splits
 * included. @throws NotFoundError for an unknown crawl.
 */
export async function crawlPicture(kv: Deno.Kv, id: string): Promise<PlanPicture> {
  const crawl = await requireCrawl(kv, id);
  // Shards in key order; each cut's rank is the items its shards before it were planned with
  // (a split hands part of its parent's to the child).
  const shards = (await listShards(kv, id)).map((e) => e.value)
    .sort((a, b) => a.start === null ? -1 : b.start === null ? 1 : compareKeys(a.start, b.start));
  const cuts: string[] = [];
  const cutRanks: number[] = [];
  const show = shownBound(crawl);
  let before = 0;
  for (const s of shards) {
    if (s.start !== null) {
      cuts.push(show(s.start)!);
      cutRanks.push(before);
    }
    before += s.expected;
  }
  return {
    total: crawl.total,
    even: crawl.evenSplit ?? [],
    cuts,
    cutRanks,
    title: `${id}: ${cuts.length + 1} shards over ${crawl.total.toLocaleString("en-US")} items`,
  };
}

/**
 * How a crawl's shard bounds are shown: as the registry's own ids, mapped back from the keys a
 * registry ordering ids by UTF-16 unit carries them as (`id_order.ts`); a view's encoded rows as
 * they are (their decoding is the page's).
 */
export function shownBound(crawl: CrawlRecord): (key: string | null) => string | null {
  if (crawl.view || (crawl.idOrder ?? "codepoint") === "codepoint") return (k) => k;
  return (k) => k === null ? null : idOfKey(k, crawl.idOrder);
}
