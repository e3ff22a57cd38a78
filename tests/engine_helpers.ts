/** Drives the worker without a queue: a deterministic in-test message loop. */
import { startCrawl } from "../lib/engine/coordinator.ts";
import type { Dispatcher } from "../lib/engine/coordinator.ts";
import type { PageMessage } from "../lib/engine/messages.ts";
import type { Source } from "../lib/plan/source.ts";
import type { CrawlSpec } from "../lib/base/spec.ts";
import { listShards, type ShardRecord } from "../lib/engine/store.ts";
import { type PageOutcome, processPage } from "../lib/engine/page.ts";

/** A dispatcher that only records messages, for tests that deliver them by hand. */
export class RecordingDispatcher implements Dispatcher {
  messages: PageMessage[] = [];
  dispatch(crawlId: string, shard: ShardRecord): Promise<void> {
    this.messages.push({ kind: "page", crawlId, shardId: shard.id, token: shard.token });
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

/** Starts a crawl over `source` and returns its id and the recording dispatcher. */
export async function begin(kv: Deno.Kv, source: Source, s: CrawlSpec) {
  const dispatcher = new RecordingDispatcher();
  const { crawl } = await startCrawl({ kv, source, dispatcher }, s, { id: "t" });
  return { id: crawl.id, dispatcher };
}

/**
 * Delivers messages until none are left, chaining each commit's next page like the queue does.
 * `deliver` may reorder, duplicate or drop; returns every outcome.
 */
export async function drain(
  kv: Deno.Kv,
  source: Source,
  queue: PageMessage[],
  options: { duplicate?: boolean; shuffle?: () => number } = {},
): Promise<PageOutcome[]> {
  const outcomes: PageOutcome[] = [];
  while (queue.length) {
    const i = options.shuffle ? Math.floor(options.shuffle() * queue.length) : 0;
    const [msg] = queue.splice(i, 1);
    const runs = options.duplicate ? [msg, msg] : [msg];
    for (const m of runs) {
      const out = await processPage({ kv, openSource: () => source }, m, (_op, next) => {
        if (!next.done) {
          queue.push({ kind: "page", crawlId: m.crawlId, shardId: next.id, token: next.token });
        }
      });
      outcomes.push(out);
    }
  }
  return outcomes;
}

/** Delivers one message per unfinished shard (its current token) until every shard is done. */
export async function finishAll(kv: Deno.Kv, source: Source, crawlId: string): Promise<void> {
  for (let round = 0; round < 1000; round++) {
    const open = (await listShards(kv, crawlId)).filter((e) => !e.value.done);
    if (open.length === 0) return;
    await drain(
      kv,
      source,
      open.map((e) => ({ kind: "page", crawlId, shardId: e.value.id, token: e.value.token })),
    );
  }
  throw new Error("shards never finished");
}
