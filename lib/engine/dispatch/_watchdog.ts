/**
 * The watchdog keeps work moving when a process died: it re-dispatches shards nobody holds,
 * finishes crawls whose shards are all done (`completion.ts`), gets stuck planning going again,
 * finishes interrupted deletes, follows changes of finished crawls created with `follow`, and, in a
 * process without an asker of its own, asks pending documents again.
 *
 * @module
 */
import type { PendingAsker } from "./_pending_loop.ts";
import { crawlContext, type Env } from "./env.ts";
import { finisherContext } from "./work.ts";
import { checkCompletion, followTick } from "../verify/mod.ts";
import { deleteCrawl } from "../crawl/mod.ts";
import {
  clearDeadLetter,
  followable,
  getPlanning,
  leaseHeld,
  listCrawls,
  listDeadLetters,
  listShards,
  readLiveness,
} from "../store/mod.ts";

/**
 * What the watchdog works with: the store, where revived shards and plans go, the crawls' sources
 * (their final check, a followed crawl's catch-up; without them no crawl is finished or followed,
 * tests only), who is told when the watchdog finishes a crawl, and, in a process without an asker
 * of its own (Deploy's cron), the asker of pending documents.
 */
export type WatchdogContext =
  & Pick<Env, "kv" | "dispatcher" | "clock" | "leaseMs" | "ownerName">
  & Partial<Pick<Env, "openSource">>
  & { onFinished?: (crawlId: string) => void; asker?: PendingAsker };

/**
 * Keeps work moving (see the module comment). Returns how many shards were re-dispatched. A shard
 * held by a live lease, or waiting out its retry backoff, is never re-dispatched.
 */
export async function watchdog(
  deps: WatchdogContext,
  options: {
    /** A shard not moved for this long (and not held) is dispatched again, in ms. @default 60000 */
    stallMs?: number;
    /** A followed crawl's ranges re-proven at least this often, in ms. @default VERIFY_EVERY_MS */
    verifyEveryMs?: number;
    /** A followed crawl's rows compared at least this often, in ms. @default VERIFY_ROWS_EVERY_MS */
    verifyRowsEveryMs?: number;
  } = {},
): Promise<number> {
  const clock = deps.clock;
  const now = clock.now();
  const stallMs = options.stallMs ?? 60_000;
  let n = 0;
  await deps.asker?.tick().catch(() => {}); // tried again on the next tick
  for (const crawl of await listCrawls(deps.kv)) {
    if (crawl.status === "deleting") {
      await deleteCrawl(deps.kv, crawl.id, { clock }).catch(() => {}); // tried again on the next tick
      continue;
    }
    if (crawl.follow && deps.openSource && followable(crawl)) {
      // Followed crawls stay equal to the registry: each tick applies the changes since the last
      // (on Deploy this is the follower; locally `serve` ticks them more often).
      const ctx = crawlContext(deps, deps.openSource(crawl), deps.ownerName("follow"));
      await followTick(ctx, crawl.id, {
        verifyEveryMs: options.verifyEveryMs,
        verifyRowsEveryMs: options.verifyRowsEveryMs,
      }).catch(() => {}); // a failing feed is tried again on the next tick
      continue;
    }
    if (crawl.status === "planning") {
      const liveness = await readLiveness(deps.kv, now);
      const planning = (await getPlanning(deps.kv, crawl.id)).value;
      if (!leaseHeld(planning?.lease, now, { liveness })) await deps.dispatcher.plan(crawl.id);
      continue;
    }
    if (crawl.status !== "running") continue;
    n += await reviveShards(deps, crawl.id, { now, stallMs });
  }
  return n;
}

async function reviveShards(
  deps: WatchdogContext,
  crawlId: string,
  o: { now: number; stallMs: number },
): Promise<number> {
  const shards = await listShards(deps.kv, crawlId);
  const dead = new Set(await listDeadLetters(deps.kv, crawlId));
  const liveness = await readLiveness(deps.kv, o.now);
  let n = 0;
  for (const { value: s } of shards) {
    const held = leaseHeld(s.lease, o.now, { liveness });
    const waiting = (s.retryAt ?? 0) > o.now;
    const stalled = o.now - s.updatedAt >= o.stallMs || dead.has(s.id) || s.lease !== null;
    if (!s.done && !held && !waiting && stalled) {
      await deps.dispatcher.dispatch(crawlId, s.id);
      if (dead.has(s.id)) await clearDeadLetter(deps.kv, crawlId, s.id);
      n++;
    }
  }
  // Without the crawls' sources nothing is proven, so nothing is finished (tests of revival).
  if (deps.openSource && shards.length > 0 && shards.every((s) => s.value.done)) {
    const ctx = finisherContext({ ...deps, openSource: deps.openSource });
    await checkCompletion(ctx, crawlId, { onFinished: () => deps.onFinished?.(crawlId) });
  }
  return n;
}
