/**
 * What readers see of crawls: the status report behind `GET /crawls/:id`, the progress bars and
 * the summary; the list of crawls; items page by page and as a stream. Readers (the HTTP app, the
 * CLI, export) go through here, never to the store directly.
 *
 * @module
 */
import { redactUrl } from "../base/redact.ts";
import { NotFoundError } from "../base/errors.ts";
import { type ExportedItem, iterateItems, pageItems } from "./item_store.ts";
import {
  type CrawlRecord,
  type CrawlStatus,
  getCrawl,
  listCrawls,
  listDeadLetters,
  listShards,
  listSplits,
  type ShardRecord,
  type SplitRecord,
} from "./store.ts";

/** Progress of one shard, as status reports it. */
export interface ShardStatus {
  /** Shard id. */
  id: number;
  /** First key; null = open. */
  start: string | null;
  /** End key (exclusive); null = open. */
  end: string | null;
  /** Items committed. */
  items: number;
  /** Items planned for it (after splits). */
  expected: number;
  /** Finished. */
  done: boolean;
  /** Pages committed. */
  pages: number;
  /** Items per second since the shard started. */
  rate: number;
  /** The shard it was split from, if any. */
  parent: number | null;
}

/** A crawl's status: what `GET /crawls/:id` and the CLI show. */
export interface CrawlStatusReport {
  /** Crawl id. */
  id: string;
  /** Lifecycle state. */
  status: CrawlStatus;
  /** The source, without credentials. */
  source: string;
  /** Whether documents are fetched. */
  docs: boolean;
  /** Items in the registry when planned. */
  total: number;
  /** Items stored (shard counters plus drift inserts minus deletions). */
  itemsStored: number;
  /** Pages committed. */
  pages: number;
  /** Documents fetched. */
  documents: number;
  /** Documents that could not be fetched (permanent errors). */
  docErrors: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Shards, including split-off ones. */
  shardCount: number;
  /** Shards finished. */
  shardsDone: number;
  /** Items per second since the crawl started. */
  rate: number;
  /** Seconds to completion at the current rate; null when unknown. */
  etaSeconds: number | null;
  /** When the crawl was created (ISO 8601). */
  createdAt: string;
  /** When it finished, if it did. */
  finishedAt: string | null;
  /** Why it failed, if it did. */
  error: string | null;
  /** Page messages that exhausted their retries and are not yet revived. */
  deadLetters: number;
  /** Dynamic splits so far. */
  splits: SplitRecord[];
  /** Registry drift applied from `_changes` after the shards finished. */
  drift: { seq: string; inserted: number; updated: number; deleted: number } | null;
  /** Why drift catch-up could not run, if it could not. */
  driftError: string | null;
  /** Per-shard progress. */
  shards: ShardStatus[];
}

/** Builds the status report of a crawl. @throws NotFoundError for an unknown id. */
export async function crawlStatus(
  kv: Deno.Kv,
  id: string,
  options: { now?: () => number } = {},
): Promise<CrawlStatusReport> {
  const now = (options.now ?? Date.now)();
  const crawl = (await getCrawl(kv, id)).value;
  if (!crawl) throw new NotFoundError(`no crawl with id ${id}`);
  const shards = (await listShards(kv, id)).map((e) => e.value);
  const sum = (f: (s: ShardRecord) => number) => shards.reduce((n, s) => n + f(s), 0);
  const d = crawl.drift;
  const itemsStored = sum((s) => s.items) + (d ? d.inserted - d.deleted : 0);
  const end = crawl.finishedAt ?? now;
  const elapsedS = Math.max(0.001, (end - crawl.createdAt) / 1000);
  const rate = itemsStored / elapsedS;
  const left = Math.max(0, crawl.total - itemsStored);
  return {
    id,
    status: crawl.status,
    source: shownSource(crawl),
    docs: crawl.docs,
    total: crawl.total,
    itemsStored,
    pages: sum((s) => s.pages),
    documents: sum((s) => s.docs),
    docErrors: sum((s) => s.docErrors),
    tooLarge: sum((s) => s.tooLarge),
    shardCount: shards.length,
    shardsDone: shards.filter((s) => s.done).length,
    rate,
    etaSeconds: crawl.status === "done" ? 0 : rate > 0 ? left / rate : null,
    createdAt: new Date(crawl.createdAt).toISOString(),
    finishedAt: crawl.finishedAt === null ? null : new Date(crawl.finishedAt).toISOString(),
    error: crawl.error,
    deadLetters: (await listDeadLetters(kv, id)).length,
    splits: await listSplits(kv, id),
    drift: d ? { seq: d.seq, inserted: d.inserted, updated: d.updated, deleted: d.deleted } : null,
    driftError: crawl.driftError ?? null,
    shards: shards.map((s) => ({
      id: s.id,
      start: s.start,
      end: s.end,
      items: s.items,
      expected: s.expected,
      done: s.done,
      pages: s.pages,
      rate: s.items / Math.max(0.001, ((s.done ? s.updatedAt : now) - s.startedAt) / 1000),
      parent: s.parent,
    })),
  };
}

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
}

function shownSource(crawl: CrawlRecord): string {
  return crawl.source.startsWith("demo:") ? crawl.source : redactUrl(crawl.source);
}

/** Every crawl in the store, oldest first. */
export async function listCrawlSummaries(kv: Deno.Kv): Promise<CrawlSummary[]> {
  return (await listCrawls(kv)).sort((a, b) => a.createdAt - b.createdAt).map((r) => ({
    id: r.id,
    status: r.status,
    source: shownSource(r),
    total: r.total,
    createdAt: new Date(r.createdAt).toISOString(),
  }));
}

async function requireCrawl(kv: Deno.Kv, id: string): Promise<CrawlRecord> {
  const crawl = (await getCrawl(kv, id)).value;
  if (!crawl) throw new NotFoundError(`no crawl with id ${id}`);
  return crawl;
}

/**
 * One page of a crawl's items after `cursor` (opaque, from the previous page); the next cursor is
 * null at the end. @throws NotFoundError for an unknown crawl.
 */
export async function crawlItemsPage(
  kv: Deno.Kv,
  id: string,
  options: { limit: number; cursor?: string },
): Promise<{ items: ExportedItem[]; cursor: string | null }> {
  await requireCrawl(kv, id);
  return await pageItems(kv, id, options);
}

/** Every item of a crawl in key order, streamed. @throws NotFoundError for an unknown crawl. */
export async function* crawlItems(kv: Deno.Kv, id: string): AsyncGenerator<ExportedItem> {
  await requireCrawl(kv, id);
  yield* iterateItems(kv, id);
}
