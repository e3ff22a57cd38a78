/**
 * What readers see of crawls: the status report behind `GET /crawls/:id`, the progress bars and
 * the summary; the list of crawls; items page by page and as a stream. Readers (the HTTP app, the
 * CLI, export) go through here, never to the store directly.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { capabilityLine } from "../../sources/couch/mod.ts";
import { idOfKey } from "../../plan/id_order.ts";
import type { LearnedCaps } from "../../plan/source.ts";
import { redactUrl } from "../../base/redact.ts";
import { ConflictError, NotFoundError } from "../../base/errors.ts";
import { remainingSeconds } from "./rebalance.ts";
import { compareKeys } from "../../plan/keys.ts";
import type { PlanPicture } from "../../plan/plan_svg.ts";
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
} from "../items/mod.ts";
import {
  type CrawlRecord,
  type CrawlStatus,
  getCrawl,
  getFeed,
  getFollow,
  type InFlight,
  lagSeconds,
  leaseHeld,
  listCrawlEntries,
  listCrawls,
  listDeadLetters,
  listShards,
  listSplits,
  type Liveness,
  readLiveness,
  type ShardRecord,
  type SplitRecord,
  storedCount,
  type Verification,
} from "../store/mod.ts";

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
  /** Items per second since the shard started (until it finished). */
  rate: number;
  /** A worker holds it now. */
  leased: boolean;
  /** The page in flight, when a worker published one. */
  inflight: InFlight | null;
  /** Document errors recorded on its items. */
  docErrors: number;
  /** Failed attempts over its life. */
  retries: number;
  /** The latest failure, if any. */
  lastError: string | null;
  /** When it is tried again after a failure (ISO 8601), if it waits. */
  retryAt: string | null;
  /** Proven to hold what the registry lists in its range (`exact`), or not yet. */
  verified: "exact" | null;
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
  /** Whether documents are fetched, and how (`include_docs`, `bulk_get`, `get`). */
  docs: boolean;
  /** How documents are fetched, once known. */
  docMode: string | null;
  /** Items in the registry when planned. */
  total: number;
  /** Items stored (shard counters plus drift inserts minus deletions). */
  itemsStored: number;
  /** Pages committed. */
  pages: number;
  /** Documents fetched. */
  documents: number;
  /** Documents that could not be had (recorded on their items). */
  docErrors: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Shards, including split-off ones. */
  shardCount: number;
  /** Shards finished. */
  shardsDone: number;
  /** Failed attempts of shards, over the crawl (each was retried). */
  retries: number;
  /** The latest failures still on record, newest first (shard and one line each). */
  recentErrors: { shard: number; error: string }[];
  /** Items per second between start and finish (or now). */
  rate: number;
  /** Seconds to completion at the current rate; null unless running with a rate. */
  etaSeconds: number | null;
  /** How ranks were found (`rank`, `skip`, `listing`). */
  planMethod: string;
  /** The registry's page cap, once learned. */
  pageCap: number | null;
  /**
   * What the registry was seen to serve of what is optional and what the crawl did instead, in
   * one line (`registry: …`), once its final check ran; null before.
   */
  registry: string | null;
  /** The same, field by field (`LearnedCaps`). */
  learned: LearnedCaps | null;
  /**
   * How far behind the registry a followed crawl is, as its last follow tick saw it: seconds
   * (behind for, or the last catch-up's lag), changes (null: unknown), changes applied by
   * following, and when it last looked. Null until the first tick.
   */
  follow: {
    lagSeconds: number;
    changesBehind: number | null;
    applied: number;
    head: string | null;
    checkedAt: string;
    /** When every range was last proven (the final check, or a whole re-proof round). */
    verifiedAt: string | null;
    /** Ranges of the re-proof round under way checked so far, of `shardCount`. */
    roundChecked: number;
    /** Ranges found wrong while following and listed again, and the last such finding. */
    repaired: number;
    lastRepair: string | null;
  } | null;
  /** When the crawl was created (ISO 8601). */
  createdAt: string;
  /** When its shards started (ISO 8601), once planned. */
  startedAt: string | null;
  /** When it finished, failed or was cancelled. */
  finishedAt: string | null;
  /** Why it failed, if it did (or, while planning, the last planning error). */
  error: string | null;
  /** Wake-up messages the KV queue gave up on, not yet revived. */
  deadLetters: number;
  /** Dynamic splits so far. */
  splits: SplitRecord[];
  /** Registry drift applied from `_changes` after the shards finished. */
  drift: { seq: string; inserted: number; updated: number; deleted: number } | null;
  /** Why drift catch-up could not run, if it could not. */
  driftError: string | null;
  /** How the end was checked against the registry, once done. */
  verification: Verification | null;
  /** Per-shard progress. */
  shards: ShardStatus[];
}

const iso = (ms: number | null | undefined) => ms ? new Date(ms).toISOString() : null;

/**
 * Seconds to completion: the items left at the crawl's rate, but never less than the slowest
 * unfinished shard's own remaining time (near the end the crawl waits for its stragglers, which
 * the crawl-wide rate would call "0 s").
 */
function eta(left: number, rate: number, shards: ShardRecord[], nowMs: number): number {
  const open = shards.filter((s) => !s.done);
  const share = rate / Math.max(1, open.length);
  const slowest = open.reduce((m, s) => Math.max(m, remainingSeconds(s, share, nowMs)), 0);
  return Math.max(Math.max(0, left) / rate, slowest);
}

/** Builds the status report of a crawl. @throws NotFoundError for an unknown id. */
export async function crawlStatus(
  kv: Deno.Kv,
  id: string,
  options: { clock?: Clock } = {},
): Promise<CrawlStatusReport> {
  const now = (options.clock ?? SYSTEM_CLOCK).now();
  const liveness = await readLiveness(kv, now);
  const crawl = await requireCrawl(kv, id);
  // Splits before shards: a split commits with its child shard, so every split read here has its
  // child in the shards read after it (the other order could show a split without its shard).
  const splits = await listSplits(kv, id);
  const shards = (await listShards(kv, id)).map((e) => e.value);
  const sum = (f: (s: (typeof shards)[number]) => number) => shards.reduce((n, s) => n + f(s), 0);
  const [d, f] = await Promise.all([
    getFeed(kv, id).then((e) => e.value),
    getFollow(kv, id).then((e) => e.value),
  ]);
  const itemsStored = await storedCount(kv, id, shards);
  const from = crawl.startedAt ?? crawl.createdAt;
  const elapsedS = Math.max(0.001, ((crawl.finishedAt ?? now) - from) / 1000);
  const rate = itemsStored / elapsedS;
  const running = crawl.status === "running";
  return {
    id,
    status: crawl.status,
    source: shownSource(crawl),
    docs: crawl.docs,
    docMode: crawl.docMode ?? null,
    total: crawl.total,
    itemsStored,
    pages: sum((s) => s.pages),
    documents: sum((s) => s.docs),
    docErrors: sum((s) => s.docErrors),
    tooLarge: sum((s) => s.tooLarge),
    shardCount: shards.length,
    shardsDone: shards.filter((s) => s.done).length,
    retries: sum((s) => s.retries ?? 0),
    recentErrors: shards.filter((s) => s.lastError).sort((a, b) => b.updatedAt - a.updatedAt)
      .slice(0, 5).map((s) => ({ shard: s.id, error: s.lastError! })),
    rate,
    etaSeconds: running && rate > 0 ? eta(crawl.total - itemsStored, rate, shards, now) : null,
    planMethod: crawl.planMethod,
    pageCap: crawl.pageCap ?? null,
    registry: crawl.learned
      ? capabilityLine(crawl.learned, {
        maxPage: crawl.pageCap ?? crawl.maxPage,
        docsUrl: crawl.docs && crawl.docsUrl ? redactUrl(crawl.docsUrl) : null,
        view: Boolean(crawl.view),
      })
      : null,
    learned: crawl.learned ?? null,
    follow: f
      ? {
        lagSeconds: lagSeconds(f, now),
        changesBehind: f.behind,
        applied: f.applied,
        head: f.head,
        checkedAt: iso(f.checkedAt)!,
        verifiedAt: iso(f.verify?.verifiedAt ?? crawl.finishedAt),
        roundChecked: f.verify?.next ?? 0,
        repaired: f.verify?.repaired ?? 0,
        lastRepair: f.verify?.lastRepair ?? null,
      }
      : null,
    createdAt: iso(crawl.createdAt)!,
    startedAt: iso(crawl.startedAt),
    finishedAt: iso(crawl.finishedAt),
    error: crawl.error,
    deadLetters: (await listDeadLetters(kv, id)).length,
    splits,
    drift: d ? { seq: d.seq, inserted: d.inserted, updated: d.updated, deleted: d.deleted } : null,
    driftError: crawl.driftError ?? null,
    verification: crawl.verification ?? null,
    shards: shards.map((s) => shardStatus(s, now, { liveness, show: shownBound(crawl) })),
  };
}

/**
 * How a crawl's shard bounds are shown: as the registry's own ids, mapped back from the keys a
 * registry ordering ids by UTF-16 unit carries them as (`id_order.ts`); a view's encoded rows as
 * they are (their decoding is the page's).
 */
function shownBound(crawl: CrawlRecord): (key: string | null) => string | null {
  if (crawl.view || (crawl.idOrder ?? "codepoint") === "codepoint") return (k) => k;
  return (k) => k === null ? null : idOfKey(k, crawl.idOrder);
}

/** What status shows of one shard at `nowMs`. */
function shardStatus(
  s: ShardRecord,
  nowMs: number,
  o: { liveness: Liveness; show: (key: string | null) => string | null },
): ShardStatus {
  const liveness = o.liveness;
  return {
    id: s.id,
    start: o.show(s.start),
    end: o.show(s.end),
    items: s.items,
    expected: s.expected,
    done: s.done,
    pages: s.pages,
    rate: s.items / Math.max(0.001, ((s.done ? s.updatedAt : nowMs) - s.startedAt) / 1000),
    leased: leaseHeld(s.lease, nowMs, { liveness }),
    inflight: s.inflight ?? null,
    docErrors: s.docErrors,
    retries: s.retries ?? 0,
    lastError: s.lastError ?? null,
    retryAt: (s.retryAt ?? 0) > nowMs ? iso(s.retryAt) : null,
    verified: s.verified ?? null,
    parent: s.parent,
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
  /** Why it failed, if it did. */
  error: string | null;
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
    error: r.error,
  }));
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

async function requireCrawl(kv: Deno.Kv, id: string): Promise<CrawlRecord> {
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
async function requireItems(kv: Deno.Kv, id: string): Promise<CrawlRecord> {
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
 * fastest way out). @throws NotFoundError for an unknown crawl.
 */
export async function* crawlItemBatches(
  kv: Deno.Kv,
  id: string,
): AsyncGenerator<ExportedItem[]> {
  await requireItems(kv, id);
  const starts = await shardStarts(kv, id);
  yield* itemBatches(kv, id, { bounds: starts });
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
