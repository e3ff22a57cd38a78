/**
 * What readers see of a crawl's progress: the status report behind `GET /crawls/:id`
 * (`status_report.ts` says its shape), the progress bars and the summary (the rest readers read of crawls is `crawl_reads.ts`'s). Readers (the HTTP
 * app, the CLI, export) go through here, never to the store directly.
 *
 * @module
 */
import type { Clock } from "../../../base/clock.ts";
import { redactUrl } from "../../../base/redact.ts";
import { capabilityLine } from "../../../sources/couch/mod.ts";
import { remainingSeconds } from "../rebalance.ts";
import { sinkLag } from "../../sinks/mod.ts";
import { pendingDocsState } from "../../items/mod.ts";
import { requireCrawl, shownBound, shownSource } from "./crawl_reads.ts";
import type { CrawlStatusReport, FollowReport, ShardStatus } from "./status_report.ts";
import {
  type CrawlRecord,
  followable,
  type FollowState,
  getFeed,
  getFollow,
  lagSeconds,
  leaseHeld,
  listDeadLetters,
  listShards,
  listSplits,
  type Liveness,
  readLiveness,
  type ShardRecord,
  storedCount,
} from "../../store/mod.ts";

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
  options: { clock: Clock },
): Promise<CrawlStatusReport> {
  const now = options.clock.now();
  const liveness = await readLiveness(kv, now);
  const crawl = await requireCrawl(kv, id);
  // Splits before shards: a split commits with its child shard, so every split read here has its
  // child in the shards read after it (the other order could show a split without its shard).
  const splits = await listSplits(kv, id);
  const shards = (await listShards(kv, id)).map((e) => e.value);
  const sum = (f: (s: (typeof shards)[number]) => number) => shards.reduce((n, s) => n + f(s), 0);
  const [d, f, p] = await Promise.all([
    getFeed(kv, id).then((e) => e.value),
    getFollow(kv, id).then((e) => e.value),
    crawl.docs ? pendingDocsState(kv, id).then((e) => e.value) : null,
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
    docErrors: sum((s) => s.docErrors) + (p?.expired ?? 0),
    pendingDocs: crawl.docs
      ? {
        pending: p?.pending ?? 0,
        landed: p?.landed ?? 0,
        expired: p?.expired ?? 0,
        asked: p?.asked ?? 0,
        notModified: p?.notModified ?? 0,
      }
      : null,
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
    follow: followReport(crawl, f, now),
    createdAt: iso(crawl.createdAt)!,
    startedAt: iso(crawl.startedAt),
    finishedAt: iso(crawl.finishedAt),
    error: crawl.error,
    deadLetters: (await listDeadLetters(kv, id)).length,
    splits,
    drift: d ? { seq: d.seq, inserted: d.inserted, updated: d.updated, deleted: d.deleted } : null,
    driftError: crawl.driftError ?? null,
    verification: crawl.verification ?? null,
    docRevisions: !crawl.docs ? null : crawl.abbreviated ? "unverified" : "checked",
    sinks: await sinkLag({ kv }, id, { read: { shards, feed: d, docs: p } }),
    shards: shards.map((s) => shardStatus(s, now, { liveness, show: shownBound(crawl) })),
  };
}

/**
 * What status shows of a crawl's following at `nowMs`: its last tick's record, or, for a crawl
 * created with `follow` that is done and not looked at yet, where the final check left it.
 */
function followReport(
  crawl: CrawlRecord,
  f: FollowState | null,
  now: number,
): FollowReport | null {
  if (!f) {
    if (!crawl.follow || !followable(crawl)) return null;
    const at = iso(crawl.finishedAt ?? now)!;
    return {
      lagSeconds: 0,
      changesBehind: 0,
      applied: 0,
      head: crawl.startSeq,
      checkedAt: at,
      lastGoodAt: at,
      failing: null,
      verifiedAt: iso(crawl.finishedAt),
      roundChecked: 0,
      repaired: 0,
      lastRepair: null,
      lateApplied: 0,
      rows: null,
      resync: null,
    };
  }
  const rows = f.verify?.rows;
  return {
    lagSeconds: lagSeconds(f, now),
    changesBehind: f.behind,
    applied: f.applied,
    head: f.head,
    checkedAt: iso(f.checkedAt)!,
    lastGoodAt: iso(f.lastGoodAt ?? crawl.finishedAt),
    failing: f.failing ? { since: iso(f.failing.since)!, reason: f.failing.reason } : null,
    verifiedAt: iso(f.verify?.verifiedAt ?? crawl.finishedAt),
    roundChecked: f.verify?.next ?? 0,
    repaired: f.verify?.repaired ?? 0,
    lastRepair: f.verify?.lastRepair ?? null,
    lateApplied: f.lateApplied ?? 0,
    rows: rows
      ? {
        comparedAt: iso(rows.lastEndedAt),
        lastRepaired: rows.lastRepaired,
        provenAt: iso(rows.cleanAt),
        compared: rows.compared,
        repaired: rows.repaired,
        forced: rows.forced,
      }
      : null,
    resync: f.resync ? { ...f.resync, at: iso(f.resync.at)! } : null,
  };
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
    unproven: s.unproven ?? null,
    parent: s.parent,
  };
}
