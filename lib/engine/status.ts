/**
 * Status reports: what `GET /crawls/:id`, the progress bars and the summary show about a crawl.
 *
 * @module
 */
import { redactUrl } from "../base/redact.ts";
import { NotFoundError } from "../base/errors.ts";
import {
  type CrawlStatus,
  getCrawl,
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
    source: crawl.source.startsWith("demo:") ? crawl.source : redactUrl(crawl.source),
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
