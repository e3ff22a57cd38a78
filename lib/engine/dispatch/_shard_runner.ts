/**
 * The shard runner: what every dispatcher does with a shard. It claims the shard's lease (a
 * versionstamp-guarded write; a live lease elsewhere means someone works on it, and a page whose
 * worker is alive is never run twice), processes pages while each commit renews the lease, and
 * lets the lease go when the shard is done, the crawl is paused or cancelled, or it must stop.
 *
 * Failures are sorted once, here: a full disk stops the process; a broken contract (a registry
 * answering garbage, a count that disagrees twice, a KV limit crossed, which would be a bug) fails
 * the crawl at once with one line; anything else is recorded on the shard (`failures`,
 * `lastError`, `retryAt` with backoff) and retried later, and after `maxFailures` attempts in a row
 * the crawl fails with that error's message. Nothing is retried forever.
 *
 * @module
 */
import { backoff, SHARD_RETRY } from "../../base/retry_policy.ts";
import { errorLine, neverRetried, StorageError } from "../../base/errors.ts";
import { failCrawl, rememberPageCap } from "../crawl/mod.ts";
import { checkShardEnd } from "../verify/mod.ts";
import { checkItemLayout } from "../items/mod.ts";
import {
  commitShard,
  EXPIRY_ONLY,
  getCrawl,
  getCrawlAndShard,
  getShard,
  keys,
  kvFailureKind,
  leaseFor,
  leaseHeld,
  type Liveness,
  present,
  readLiveness,
  releaseLease,
  type ShardRecord,
} from "../store/mod.ts";
import { type Held, type ListedPage, type PageContext, processPage } from "../page/mod.ts";
import { AdaptiveLimit } from "../../base/adaptive_limit.ts";
import type { Env } from "./env.ts";

/**
 * Options of {@linkcode runShard} (the lease's length, the failures allowed and how often the
 * crawl's status is read again are the environment's: `leaseMs`, `maxShardFailures`,
 * `statusEveryMs`).
 */
export interface RunOptions {
  /** This worker's name in leases. */
  owner: string;
  /** Asked before every page: true stops the runner (the lease is let go). */
  stop?: () => boolean;
}

/** How a run ended. */
export type RunResult =
  | { kind: "done"; shard: ShardRecord }
  | { kind: "stopped"; reason: string }
  | { kind: "busy" }
  | { kind: "retry"; atMs: number; error: string }
  | { kind: "failed"; error: string };

/** Backoff before a shard is tried again, by failures in a row, in milliseconds. */
export const RETRY_DELAYS_MS: readonly number[] = SHARD_RETRY.delaysMs;

/** True when the shard can be claimed by `owner` now: not done, not waiting, held by nobody else. */
export function claimable(
  s: ShardRecord,
  owner: string,
  nowMs: number,
  liveness: Liveness = EXPIRY_ONLY,
): boolean {
  if (s.done || (s.retryAt ?? 0) > nowMs) return false;
  return !leaseHeld(s.lease, nowMs, { liveness, owner });
}

/**
 * Claims the shard for `owner` until `now + leaseMs`, when the crawl runs and nobody else holds
 * a live lease on it. Returns what the worker holds, or null.
 */
export async function claimShard(
  kv: Deno.Kv,
  crawlId: string,
  shardId: number,
  o: { owner: string; leaseMs: number; nowMs: number; liveness?: Liveness },
): Promise<Held | null> {
  const [c, e] = await getCrawlAndShard(kv, crawlId, shardId);
  if (c.value?.status !== "running" || !e.value) return null;
  const liveness = o.liveness ?? await readLiveness(kv, o.nowMs);
  if (!claimable(e.value, o.owner, o.nowMs, liveness)) return null;
  const lease = leaseFor(o.owner, o.nowMs, o.leaseMs);
  const entry = await commitShard(kv, crawlId, present(e)!, {
    ...e.value,
    lease,
  });
  return entry ? { crawl: c.value, entry } : null;
}

/** Lets a lease go if it is still `owner`'s, so that nobody waits for it to expire. */
export async function releaseShard(
  kv: Deno.Kv,
  crawlId: string,
  shardId: number,
  owner: string,
): Promise<void> {
  await releaseLease<ShardRecord>(kv, keys.shard(crawlId, shardId), owner, {
    also: { inflight: null },
    maxAttempts: 5,
  }).catch(() => {}); // not let go: its owner's process is seen dead soon, or its lease expires
}

/** Runs a shard until it is done, stopped, or has failed (see the module comment). */
export async function runShard(
  deps: Env,
  crawlId: string,
  shardId: number,
  o: RunOptions,
): Promise<RunResult> {
  const { clock, leaseMs } = deps;
  const now = () => clock.now();
  const claimed = await claimShard(deps.kv, crawlId, shardId, {
    owner: o.owner,
    leaseMs,
    nowMs: now(),
  });
  if (!claimed) return { kind: "busy" };
  let held = claimed;
  try {
    checkItemLayout(held.crawl); // an earlier version's crawl fails with one line: run it again
    const source = deps.openSource(held.crawl);
    const ctx: PageContext = {
      kv: deps.kv,
      source,
      owner: o.owner,
      leaseMs,
      clock,
      maxDocBytes: deps.maxDocBytes,
      docMode: held.crawl.docs ? held.crawl.docMode ?? await source.docMode?.() ?? "get" : "get",
      docLimit: new AdaptiveLimit(held.crawl.concurrency),
      docMemory: deps.docMemory,
      // Rebalancing also lends idle slots: slow documents spread whichever shard lists them.
      docSlots: held.crawl.rebalance ? deps.crawlSlots?.for(held.crawl) : undefined,
      listings: deps.listings,
      notices: deps.notices,
      checkEnd: (shard, end) => checkShardEnd(source, shard, { ...end, kv: deps.kv, clock }),
    };
    let checked = now();
    let listing: Promise<ListedPage> | undefined;
    for (;;) {
      if (o.stop?.()) return await stopped(deps, held, o.owner, "stopping");
      if (now() - checked >= deps.statusEveryMs) {
        checked = now();
        const crawl = (await getCrawl(deps.kv, crawlId)).value;
        if (crawl?.status !== "running") {
          return await stopped(deps, held, o.owner, `crawl ${crawl?.status ?? "deleted"}`);
        }
        held = { ...held, crawl };
      }
      const res = await processPage(ctx, held, { listing });
      // Let the lease go (when it is still ours) so that a resume can claim the shard at once.
      if (res.kind === "lost") return await stopped(deps, held, o.owner, res.reason);
      if (res.learnedCap) {
        await rememberPageCap(deps.kv, crawlId, res.learnedCap);
        held.crawl = {
          ...held.crawl,
          pageCap: Math.min(held.crawl.pageCap ?? Infinity, res.learnedCap),
        };
      }
      held = { crawl: held.crawl, entry: res.entry };
      if (res.entry.value.done) return { kind: "done", shard: res.entry.value };
      // The next page is already being listed from where this one ended, unless the commit moved
      // the cursor elsewhere (the shard was reset to be listed again).
      const s = res.entry.value;
      const from = res.next?.from;
      listing = from && s.cursor === from.cursor && s.after === from.after &&
          (s.skip ?? null) === (from.skip ?? null)
        ? res.next!.listing
        : undefined;
    }
  } catch (err) {
    return await recordFailure(deps, held, err, o);
  }
}

async function stopped(deps: Env, held: Held, owner: string, reason: string) {
  await releaseShard(deps.kv, held.crawl.id, held.entry.value.id, owner);
  return { kind: "stopped" as const, reason };
}

/** True for errors that retrying cannot fix. */
function isPermanent(err: unknown): boolean {
  return neverRetried(err) || kvFailureKind(err) === "limit";
}

/**
 * Sorts a failure (module comment): fails the crawl, or records it on the shard with a time to
 * try again. A full disk is rethrown: the process stops, nothing is recorded.
 */
async function recordFailure(
  deps: Env,
  held: Held,
  err: unknown,
  o: RunOptions,
): Promise<RunResult> {
  if (err instanceof StorageError) throw err;
  const now = deps.clock.now();
  const message = errorLine(err);
  const { id: crawlId } = held.crawl;
  const shardId = held.entry.value.id;
  const fresh = await getShard(deps.kv, crawlId, shardId);
  const failures = (fresh.value?.failures ?? 0) + 1;
  if (isPermanent(err) || failures >= deps.maxShardFailures) {
    const why = isPermanent(err) ? message : `${message} (gave up after ${failures} attempts)`;
    await failCrawl(deps.kv, crawlId, { reason: why, clock: deps.clock }).catch(() => {});
    await releaseShard(deps.kv, crawlId, shardId, o.owner);
    return { kind: "failed", error: why };
  }
  const atMs = now +
    backoff({ scheduleMs: RETRY_DELAYS_MS, jitter: "half" }, failures, deps.random);
  if (fresh.value && fresh.value.lease?.owner === o.owner) {
    await commitShard(deps.kv, crawlId, present(fresh)!, {
      ...fresh.value,
      failures,
      retries: (fresh.value.retries ?? 0) + 1,
      lastError: message,
      retryAt: atMs,
      lease: null,
      inflight: null,
    });
  }
  return { kind: "retry", atMs, error: message };
}
