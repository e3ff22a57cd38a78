/** Drives the engine in tests without a queue: shard runners called by hand, in-process. */
import { type Clock, clockWithNow } from "../lib/base/clock.ts";
import type { WatchdogContext } from "../lib/engine/dispatch/_watchdog.ts";
import assert from "node:assert/strict";
import { checkCompletion } from "../lib/engine/verify/completion.ts";
import { getCrawl, listShards } from "../lib/engine/store/mod.ts";
import type { RegistryData } from "../lib/sim/registry/registry_data.ts";
import { MemorySource } from "../lib/sources/memory_source.ts";
import type { CrawlSpec } from "../lib/base/spec.ts";
import type { CrawlContext, Dispatcher } from "../lib/engine/crawl/context.ts";
import { openCrawl } from "../lib/engine/crawl/lifecycle.ts";
import { type RunResult, runShard } from "../lib/engine/dispatch/_shard_runner.ts";
import { workShard } from "../lib/engine/dispatch/work.ts";
import { engineEnv, type Env, type EnvOptions } from "../lib/engine/dispatch/env.ts";
import type { Source } from "../lib/plan/source.ts";

/** A dispatcher that only records what it was asked, for tests that run shards by hand. */
export class RecordingDispatcher implements Dispatcher {
  /** Shard dispatches, in order. */
  shards: { crawlId: string; shardId: number; delayMs: number }[] = [];
  /** Plan requests. */
  plans: string[] = [];
  dispatch(crawlId: string, shardId: number, o: { delayMs?: number } = {}): Promise<void> {
    this.shards.push({ crawlId, shardId, delayMs: o.delayMs ?? 0 });
    return Promise.resolve();
  }
  plan(crawlId: string): Promise<void> {
    this.plans.push(crawlId);
    return Promise.resolve();
  }
}

/** A spec with test defaults. */
export function spec(over: Partial<CrawlSpec> = {}): CrawlSpec {
  return {
    source: "memory",
    docsUrl: null,
    shards: 4,
    docs: false,
    concurrency: 4,
    maxPage: 50,
    rebalance: false,
    ...over,
  };
}

/** Starts (creates and plans) a crawl over `source` with the id "t". */
export async function begin(kv: Deno.Kv, source: Source, s: CrawlSpec, id = "t") {
  const dispatcher = new RecordingDispatcher();
  const { crawl } = await openCrawl(ctxOf(kv, source, { dispatcher, maxPlanAttempts: 1 }), s, {
    id,
  });
  return { id: crawl.id, crawl, dispatcher };
}

/** An engine environment over one source and a recording dispatcher, with what `over` varies. */
export function workDeps(kv: Deno.Kv, source: Source, over: Partial<EnvOptions> = {}): Env {
  return engineEnv({
    kv,
    openSource: () => source,
    dispatcher: new RecordingDispatcher(),
    ...over,
  });
}

/**
 * A worker's context in a test: the environment {@linkcode workDeps} builds over `source`, the
 * source, and a worker's name (a new one each call, as each worker of a process has its own):
 * what the crawl, verify and follow rooms take.
 */
export function ctxOf(
  kv: Deno.Kv,
  source: Source,
  over: Partial<EnvOptions> & { owner?: string } = {},
): Env & CrawlContext {
  const { owner, ...env } = over;
  return {
    ...workDeps(kv, source, env),
    source,
    owner: owner ?? `test-${crypto.randomUUID().slice(0, 8)}`,
  };
}

/**
 * The watchdog's context in a test: the store, the dispatcher, and the crawls' sources when given
 * (without them nothing is finished or followed, as the watchdog says).
 */
export function watchdogCtx(
  kv: Deno.Kv,
  dispatcher: Dispatcher,
  o: { clock?: Clock; openSource?: () => Source; onFinished?: (crawlId: string) => void } = {},
): WatchdogContext {
  const none = () => {
    throw new Error("this test gives the watchdog no source");
  };
  const env = engineEnv({ kv, dispatcher, openSource: o.openSource ?? none, clock: o.clock });
  return { ...env, openSource: o.openSource, onFinished: o.onFinished };
}

/** Runs one shard to its end (or failure) as owner `owner`. */
export function runOne(
  kv: Deno.Kv,
  source: Source,
  crawlId: string,
  shardId: number,
  owner = "test-owner",
): Promise<RunResult> {
  return runShard(workDeps(kv, source), crawlId, shardId, { owner });
}

/**
 * Runs every unfinished shard (splits included, retries after their backoff skipped) until all
 * are done or `rounds` run out, `parallel` shards at a time. Returns every run's result.
 */
export async function finishAll(
  kv: Deno.Kv,
  source: Source,
  crawlId: string,
  options: { deps?: Partial<EnvOptions>; rounds?: number; parallel?: number } = {},
): Promise<RunResult[]> {
  // A clock that jumps ten minutes a round: retry backoffs and dead leases are over by the next.
  let clock = Date.now();
  const deps = workDeps(kv, source, { clock: clockWithNow(() => clock), ...options.deps });
  const results: RunResult[] = [];
  for (let round = 0; round < (options.rounds ?? 50); round++, clock += 600_000) {
    const open = (await listShards(kv, crawlId)).filter((e) => !e.value.done);
    if (open.length === 0) return results;
    const parallel = options.parallel ?? open.length;
    for (let i = 0; i < open.length; i += parallel) {
      results.push(
        ...await Promise.all(
          open.slice(i, i + parallel).map((e) =>
            workShard(deps, crawlId, e.value.id, { owner: `runner-${round}-${e.value.id}` })
          ),
        ),
      );
    }
  }
  throw new Error("shards never finished");
}

/**
 * A crawl of `data` in `shards` shards over a memory registry (pages of 100), run to `done` and
 * proven by the final check: what following and refreshing start from.
 */
export async function doneCrawl(
  kv: Deno.Kv,
  data: RegistryData,
  o: { shards: number; follow?: boolean; id?: string },
) {
  const source = new MemorySource(data, { maxPage: 100 });
  const { id, dispatcher } = await begin(
    kv,
    source,
    spec({ shards: o.shards, ...(o.follow ? { follow: true } : {}) }),
    o.id,
  );
  await finishAll(kv, source, id);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  const crawl = (await getCrawl(kv, id)).value!;
  return { source, id, dispatcher, crawl, finishedAt: crawl.finishedAt! };
}
