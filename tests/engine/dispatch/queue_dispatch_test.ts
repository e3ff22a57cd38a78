import assert from "node:assert/strict";
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import { createQueueHandler } from "../../../lib/engine/dispatch/_queue_dispatch.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import type { ListOptions, Page } from "../../../lib/plan/source.ts";
import { listShards } from "../../../lib/engine/store/mod.ts";
import { crawlStatus } from "../../../lib/engine/mod.ts";
import { begin, spec, workDeps } from "../../engine_helpers.ts";
import { dataOf, randomKeys } from "../../helpers.ts";

/**
 * A source whose listings take a few milliseconds and count how many shards list at once (a shard
 * is told by its range's end: one shard may have a page and its read-ahead in flight together).
 */
class CountingSource extends MemorySource {
  #inFlight = new Map<string, number>();
  most = 0;
  override async list(options: ListOptions): Promise<Page> {
    const shard = `${options.descending ? options.start : options.end}`;
    this.#inFlight.set(shard, (this.#inFlight.get(shard) ?? 0) + 1);
    this.most = Math.max(this.most, this.#inFlight.size);
    try {
      await new Promise((r) => setTimeout(r, 3));
      return await super.list(options);
    } finally {
      const left = this.#inFlight.get(shard)! - 1;
      if (left === 0) this.#inFlight.delete(shard);
      else this.#inFlight.set(shard, left);
    }
  }
}

Deno.test("queue handler: at most maxShards shards at once, duplicates of a waiting shard dropped", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const data = dataOf(randomKeys(900, "abcdefgh".split(""), 7, 6));
    const source = new CountingSource(data, { maxPage: 25 });
    const { id } = await begin(kv, source, spec({ shards: 8, maxPage: 25, rebalance: false }));
    source.most = 0;
    const handle = createQueueHandler(workDeps(kv, source), { maxShards: 3 });
    const shardIds = (await listShards(kv, id)).map((e) => e.value.id);
    assert.equal(shardIds.length, 8);
    // Every shard asked for twice at once, as a watchdog's re-send would.
    const messages = [...shardIds, ...shardIds].map((shardId) => ({
      kind: "shard",
      crawlId: id,
      shardId,
    }));
    await Promise.all(messages.map((m) => handle(m)));
    assert.equal(source.most, 3, "three shards listed at once, never more");
    assert.ok((await listShards(kv, id)).every((e) => e.value.done));
    const status = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
    assert.equal(status.itemsStored, data.size);
  } finally {
    kv.close();
  }
});
