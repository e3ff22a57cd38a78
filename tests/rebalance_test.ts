import assert from "node:assert/strict";
import { checkCompletion, watchdog } from "../lib/engine/coordinator.ts";
import { crawlStatus } from "../lib/engine/status.ts";
import { MemorySource } from "../lib/sources/memory_source.ts";
import { splitStraggler } from "../lib/engine/rebalance.ts";
import { listShards } from "../lib/engine/store.ts";
import { processPage } from "../lib/engine/page.ts";
import { begin, drain, finishAll, RecordingDispatcher, spec } from "./engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "./helpers.ts";

const ASCII = "abcdefghijklmnopqrstuvwxyz0123456789-".split("");

Deno.test("rebalance: exact under repeated splits while pages are processed", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(6000, ASCII, 31, 7));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 3, rebalance: true }));
  const deps = { kv, source, dispatcher };
  let splits = 0;
  for (let round = 0; round < 40 && dispatcher.messages.length; round++) {
    const batch = dispatcher.messages.splice(0, dispatcher.messages.length);
    await drain(kv, source, batch.slice(0, 2).concat([]));
    dispatcher.messages.push(...batch.slice(2));
    // drain() above processed whole chains; re-seed every unfinished shard and split once.
    if (await splitStraggler(deps, id, { minPages: 1 })) splits++;
    for (const e of await listShards(kv, id)) {
      if (!e.value.done) await dispatcher.dispatch(id, e.value);
    }
    await drain(kv, source, dispatcher.messages.splice(0, 1));
  }
  await drain(kv, source, dispatcher.messages);
  await finishAll(kv, source, id);
  assert.ok(splits >= 1, `${splits} splits happened`);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
  const r = await crawlStatus(kv, id);
  assert.equal(r.splits.length, splits);
  assert.equal(r.shardCount, 3 + splits);
});

Deno.test("rebalance: a split racing the victim's in-flight page trims that page", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(400, ASCII, 32, 6));
  const source = new MemorySource(data, { maxPage: 150 });
  const { id, dispatcher } = await begin(
    kv,
    source,
    spec({ shards: 2, maxPage: 150, rebalance: true }),
  );
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  let listed!: () => void;
  const wasListed = new Promise<void>((r) => listed = r);
  const gated = wrapSource(source, {
    list: async (o) => {
      const page = await source.list(o);
      listed();
      await gate;
      return page;
    },
  });
  const victimMsg = dispatcher.messages.find((m) => m.shardId === 0)!;
  const inflight = processPage({ kv, openSource: () => gated }, victimMsg);
  await wasListed;
  const split = await splitStraggler({ kv, source, dispatcher: new RecordingDispatcher() }, id, {
    minPages: 0.05,
  });
  assert.ok(split && split.parent === 0, "shard 0 was split while its page was in flight");
  release();
  const out = await inflight;
  assert.equal(out.kind, "committed");
  if (out.kind === "committed") {
    assert.equal(out.shard.end, split!.key);
    assert.ok(out.rows < 149, `page trimmed to ${out.rows} rows below the split key`);
    assert.equal(
      out.shard.items,
      data.rank(split!.key),
      "counted exactly the rows below the split",
    );
  }
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
});

Deno.test("rebalance: a shard whose worker died is split, and the watchdog revives the rest", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, ASCII, 33, 7));
  const source = new MemorySource(data, { maxPage: 30 });
  const { id, dispatcher } = await begin(
    kv,
    source,
    spec({ shards: 4, maxPage: 30, rebalance: true }),
  );
  // Shard 2's message is lost: its worker died holding it.
  const queue = dispatcher.messages.splice(0).filter((m) => m.shardId !== 2);
  await drain(kv, source, queue);
  const split = await splitStraggler({ kv, source, dispatcher }, id, { minPages: 1 });
  assert.equal(split?.parent, 2, "the dead shard is the straggler");
  await drain(kv, source, dispatcher.messages.splice(0)); // the child
  assert.equal((await listShards(kv, id)).find((e) => e.value.id === 2)!.value.done, false);
  const revived = await watchdog({ kv, dispatcher }, { stallMs: 0 });
  assert.equal(revived, 1);
  await drain(kv, source, dispatcher.messages.splice(0));
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
  assert.equal(await checkCompletion(kv, id), true);
  assert.equal((await crawlStatus(kv, id)).status, "done");
});
