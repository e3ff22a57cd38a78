/**
 * Lease-based dispatch, for where KV queues do not exist (Deno Deploy today, self-hosted denokv
 * over KV Connect) and for several worker processes on one KV file (queue messages are not shared
 * between processes). A worker claims a shard with an atomic lease (versionstamp check + expiry from
 * an injected clock), processes pages while each commit renews the lease, and lets it go when the
 * shard is done or fails. An expired lease (a dead worker) is claimed by another worker; the page
 * guard makes a late commit by the old holder impossible.
 *
 * @module
 */
import { checkCompletion, type Dispatcher, failCrawl, planCrawl } from "./coordinator.ts";
import { FatalError } from "../base/errors.ts";
import type { Source } from "../plan/source.ts";
import {
  commitShard,
  type CrawlRecord,
  getShard,
  listCrawls,
  listShards,
  type ShardRecord,
} from "./store.ts";
import { processPage } from "./page.ts";

/** Lease workers need no message: an unleased unfinished shard is work. */
export class LeaseDispatcher implements Dispatcher {
  dispatch(): Promise<void> {
    return Promise.resolve();
  }
}

/** Options of {@linkcode runLeaseWorker}. */
export interface LeaseWorkerOptions {
  /** This worker's name in leases. @default a random UUID */
  owner?: string;
  /** Lease length; each page commit renews it, in milliseconds. @default 60000 */
  leaseMs?: number;
  /** Sleep when there is no work, in milliseconds. @default 500 */
  idleMs?: number;
  /** Stop after this long (a Deploy cron tick), in milliseconds. @default no limit */
  maxRunMs?: number;
  /** Stop once no crawl is planning or running. @default false */
  exitWhenIdle?: boolean;
  /** Stops the worker. */
  signal?: AbortSignal;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Called after a shard finishes (rebalancing). */
  onShardDone?: (crawlId: string, shard: ShardRecord) => Promise<void>;
  /** Log lines. */
  log?: (line: string) => void;
}

/** What a worker did. */
export interface LeaseWorkerStats {
  /** Pages committed. */
  pages: number;
  /** Shards claimed. */
  claims: number;
  /** Failures (retried later or fatal). */
  errors: number;
}

/**
 * Claims `shard` for `owner` until `now + leaseMs` if nobody holds a live lease on it.
 * Returns the claimed entry, or null when it is taken, done or changed meanwhile.
 */
export async function claimShard(
  kv: Deno.Kv,
  crawlId: string,
  entry: Deno.KvEntry<ShardRecord>,
  o: { owner: string; leaseMs: number; nowMs: number },
): Promise<Deno.KvEntry<ShardRecord> | null> {
  const s = entry.value;
  if (s.done || (s.lease && s.lease.owner !== o.owner && s.lease.untilMs > o.nowMs)) return null;
  const next = { ...s, lease: { owner: o.owner, untilMs: o.nowMs + o.leaseMs } };
  if (!await commitShard(kv, crawlId, entry, next)) return null;
  const fresh = await getShard(kv, crawlId, s.id);
  return fresh.value?.lease?.owner === o.owner ? fresh as Deno.KvEntry<ShardRecord> : null;
}

/** Lets a lease go (if still ours), so another worker need not wait for it to expire. */
async function release(kv: Deno.Kv, crawlId: string, shardId: number, owner: string) {
  for (let i = 0; i < 5; i++) {
    const e = await getShard(kv, crawlId, shardId);
    if (!e.value || e.value.lease?.owner !== owner) return;
    if (
      await commitShard(kv, crawlId, e as Deno.KvEntry<ShardRecord>, { ...e.value, lease: null })
    ) {
      return;
    }
  }
}

/**
 * Runs a lease worker until stopped (signal, `maxRunMs`, or idle with `exitWhenIdle`). It plans
 * crawls left in `planning`, claims unleased shards of running crawls (in random order, to spread
 * workers), and processes their pages.
 */
export async function runLeaseWorker(
  deps: { kv: Deno.Kv; openSource: (crawl: CrawlRecord) => Source },
  options: LeaseWorkerOptions = {},
): Promise<LeaseWorkerStats> {
  const { kv } = deps;
  const now = options.now ?? Date.now;
  const owner = options.owner ?? crypto.randomUUID();
  const leaseMs = options.leaseMs ?? 60_000;
  const started = now();
  const stats: LeaseWorkerStats = { pages: 0, claims: 0, errors: 0 };
  const backoff = new Map<string, number>(); // shard -> not before (ms)
  const dispatcher = new LeaseDispatcher();
  const stop = () =>
    options.signal?.aborted ||
    (options.maxRunMs !== undefined && now() - started > options.maxRunMs);
  while (!stop()) {
    const crawls = await listCrawls(kv);
    const active = crawls.filter((c) => c.status === "running" || c.status === "planning");
    if (active.length === 0 && options.exitWhenIdle) break;
    let worked = false;
    for (const crawl of active) {
      if (crawl.status === "planning") {
        try {
          await planCrawl({ kv, source: deps.openSource(crawl), dispatcher }, crawl.id, { owner });
        } catch (err) {
          if (err instanceof FatalError) await failCrawl(kv, crawl.id, err.message).catch(() => {});
          else stats.errors++;
        }
        worked = true;
        continue;
      }
      const shards = (await listShards(kv, crawl.id)).filter((e) => !e.value.done);
      if (shards.length === 0) {
        await checkCompletion(kv, crawl.id, { now, openSource: deps.openSource });
        continue;
      }
      shuffle(shards);
      for (const e of shards) {
        if (stop()) break;
        const key = `${crawl.id}/${e.value.id}`;
        if ((backoff.get(key) ?? 0) > now()) continue;
        const claimed = await claimShard(kv, crawl.id, e, { owner, leaseMs, nowMs: now() });
        if (!claimed) continue;
        stats.claims++;
        worked = true;
        await workShard(deps, crawl, claimed.value, { owner, leaseMs, now, stop, stats, options })
          .catch(async (err) => {
            stats.errors++;
            if (err instanceof FatalError) {
              await failCrawl(kv, crawl.id, err.message).catch(() => {});
            } else {
              options.log?.(`shard ${e.value.id}: ${(err as Error).message}; backing off`);
              backoff.set(key, now() + 2000 + Math.random() * 3000);
            }
            await release(kv, crawl.id, e.value.id, owner);
          });
        break; // re-list: the picture changes as shards finish and split
      }
    }
    if (!worked) await new Promise((r) => setTimeout(r, options.idleMs ?? 500));
  }
  return stats;
}

async function workShard(
  deps: { kv: Deno.Kv; openSource: (crawl: CrawlRecord) => Source },
  crawl: CrawlRecord,
  shard: ShardRecord,
  o: {
    owner: string;
    leaseMs: number;
    now: () => number;
    stop: () => boolean | undefined;
    stats: LeaseWorkerStats;
    options: LeaseWorkerOptions;
  },
): Promise<void> {
  for (;;) {
    const out = await processPage(
      { kv: deps.kv, openSource: deps.openSource, now: o.now },
      {
        crawlId: crawl.id,
        shardId: shard.id,
      },
      undefined,
      { owner: o.owner, leaseMs: o.leaseMs },
    );
    if (out.kind !== "committed") {
      // Paused, cancelled, or taken over: let the lease go so nobody waits for it to expire.
      await release(deps.kv, crawl.id, shard.id, o.owner);
      return;
    }
    o.stats.pages++;
    if (out.shard.done) {
      await o.options.onShardDone?.(crawl.id, out.shard);
      await checkCompletion(deps.kv, crawl.id, { now: o.now, openSource: deps.openSource });
      return;
    }
    if (o.stop()) {
      await release(deps.kv, crawl.id, shard.id, o.owner);
      return;
    }
  }
}

function shuffle<T>(xs: T[]): void {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
}
