/**
 * What a worker does with a piece of work, whichever way it arrived (a queue message, a claim
 * found by polling): plan a crawl, or run a shard and then do what follows it — split a straggler
 * when the shard finished (if the crawl rebalances), finish the crawl when it was the last, or ask
 * for the shard again after its backoff when it failed.
 *
 * @module
 */
import { errorLine, StorageError } from "../../base/errors.ts";
import { checkCompletion, type VerifyContext } from "../verify/mod.ts";
import { planCrawl, splitStraggler } from "../crawl/mod.ts";
import { type RunResult, runShard } from "./_shard_runner.ts";
import { getCrawl } from "../store/mod.ts";
import { crawlContext, type Env, type SplitLooks } from "./env.ts";

/**
 * Shards a process runs at once unless told otherwise (lease workers, or queue messages handled at
 * once): each runs one shard at a time with its document fetches, so this bounds a process's
 * shards in flight whatever the shard count.
 */
export const DEFAULT_WORKERS = 16;

/** Most shards one process may run at once (each holds a page of rows in memory). */
export const MAX_WORKERS = 256;

/** Plans a crawl in `planning` if nobody else is planning it. */
export async function workPlan(deps: Env, crawlId: string, owner: string): Promise<void> {
  const crawl = (await getCrawl(deps.kv, crawlId)).value;
  if (!crawl || crawl.status !== "planning") return;
  const after = await planCrawl(crawlContext(deps, deps.openSource(crawl), owner), crawlId);
  if (after?.status === "failed") {
    deps.onEvent?.({ kind: "crawl-failed", crawlId, error: after.error ?? "failed" });
  } else if (after?.status === "running") {
    deps.onEvent?.({ kind: "planned", crawlId, total: after.total, shards: after.shards });
  }
}

/**
 * Runs one shard (see `_shard_runner.ts`) and what follows it. Returns how the run ended.
 */
export async function workShard(
  deps: Env,
  crawlId: string,
  shardId: number,
  o: { owner: string; stop?: () => boolean },
): Promise<RunResult> {
  const res = await runShard(deps, crawlId, shardId, o);
  if (res.kind === "retry") {
    const delayMs = Math.max(0, res.atMs - deps.clock.now());
    deps.onEvent?.({ kind: "retry", crawlId, shardId, error: res.error, delayMs });
    await deps.dispatcher.dispatch(crawlId, shardId, { delayMs });
  } else if (res.kind === "failed") {
    deps.onEvent?.({ kind: "crawl-failed", crawlId, error: res.error });
  } else if (res.kind === "done") {
    // A split or the crawl's completion that fails now (a registry hiccup) is not the shard's
    // failure: the shard is done, and the watchdog finishes the crawl later.
    await afterShardDone(deps, crawlId).catch((err) => {
      if (err instanceof StorageError) throw err;
      deps.onEvent?.({ kind: "completion-deferred", crawlId, error: errorLine(err) });
    });
  }
  return res;
}

/**
 * The verify room's context of a final check made by this process: a new owner each call, in this
 * process's name (its leases end with the process).
 */
export function finisherContext(
  deps: Pick<Env, "kv" | "clock" | "leaseMs" | "dispatcher" | "openSource" | "ownerName">,
): VerifyContext {
  const { kv, clock, leaseMs, dispatcher, openSource } = deps;
  return { kv, clock, leaseMs, dispatcher, openSource, owner: deps.ownerName("finish") };
}

/**
 * How a worker of `deps` finishes crawl `crawlId`: the finishing lease (and the feed it holds
 * while finishing) in this process's name, so that a process killed mid-check frees them within
 * the heartbeat bound, not after the lease; `crawl-done` told when this call is the one that did.
 */
export function finishCrawl(deps: Env, crawlId: string): Promise<boolean> {
  return checkCompletion(finisherContext(deps), crawlId, {
    onFinished: () => deps.onEvent?.({ kind: "crawl-done", crawlId }),
  });
}

/**
 * Runs `look` after the crawl's looks under way in `looks`, or shares the one queued that has not
 * begun (it sees this shard's end too). Resolves or rejects as the look run for the caller does;
 * the crawl's entry is removed when its last look settles.
 */
export function queueLook(
  looks: Map<string, SplitLooks>,
  crawlId: string,
  look: () => Promise<void>,
): Promise<void> {
  const cur = looks.get(crawlId);
  if (cur?.waiting) return cur.waiting;
  const entry: SplitLooks = cur ?? { tail: Promise.resolve(), waiting: null };
  const mine = cur
    ? entry.tail.then(() => {
      entry.waiting = null;
      return look();
    })
    : look();
  if (cur) entry.waiting = mine;
  const tail = mine.catch(() => {});
  entry.tail = tail;
  looks.set(crawlId, entry);
  tail.then(() => {
    if (entry.tail === tail) looks.delete(crawlId);
  });
  return mine;
}

/** Splits a straggler (when the crawl rebalances), then finishes the crawl if it was the last. */
async function afterShardDone(deps: Env, crawlId: string): Promise<void> {
  const crawl = (await getCrawl(deps.kv, crawlId)).value;
  if (!crawl) return;
  const source = deps.openSource(crawl);
  if (crawl.rebalance && crawl.status === "running") {
    const look = async () => {
      const split = await splitStraggler({ ...deps, source }, crawlId, deps.rebalance);
      if (split) deps.onEvent?.({ kind: "split", crawlId, ...split });
    };
    await (deps.splitting ? queueLook(deps.splitting, crawlId, look) : look());
  }
  await finishCrawl(deps, crawlId);
}
