import assert from "node:assert/strict";
import { checkCompletion } from "../lib/engine/coordinator.ts";
import { crawlStatus } from "../lib/engine/status.ts";
import { MemorySource } from "../lib/sources/memory_source.ts";
import { prng } from "../lib/sim/names.ts";
import { listShards } from "../lib/engine/store.ts";
import { countItems } from "../lib/engine/item_store.ts";
import { processPage } from "../lib/engine/page.ts";
import { begin, drain, spec } from "./engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "./helpers.ts";

const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "\uffff", "z"];

Deno.test("worker: pages every shard exactly once (unicode keys, docs)", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, UNI, 21, 6));
  const source = new MemorySource(data, { maxPage: 50 });
  const { id, dispatcher } = await begin(kv, source, spec({ docs: true, shards: 7 }));
  await drain(kv, source, dispatcher.messages);
  assert.equal(await checkCompletion(kv, id), true);
  await assertCrawledExactly(kv, id, data.keys);
  const report = await crawlStatus(kv, id);
  assert.equal(report.documents, 3000);
  assert.equal(report.status, "done");
});

Deno.test("worker: duplicate and out-of-order deliveries change nothing", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(2000, UNI, 22, 6));
  const source = new MemorySource(data, { maxPage: 30 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 5 }));
  const stale = [...dispatcher.messages];
  const outcomes = await drain(kv, source, dispatcher.messages, {
    duplicate: true,
    shuffle: prng(5),
  });
  assert.ok(outcomes.some((o) => o.kind === "skipped" && o.reason === "stale token"));
  // Replaying the very first messages after the end: all stale.
  for (const m of stale) {
    const o = await processPage({ kv, openSource: () => source }, m);
    assert.equal(o.kind, "skipped");
  }
  await assertCrawledExactly(kv, id, data.keys);
});

Deno.test("worker: a crash after the item writes, before the commit, redoes the page once", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(1000, UNI, 23, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 3 }));
  const msg = dispatcher.messages[1];
  await assert.rejects(
    () =>
      processPage({ kv, openSource: () => source }, msg, () => {
        throw new Error("crash inside the commit");
      }),
    /crash inside the commit/,
  );
  const shard = (await listShards(kv, id))[1].value;
  assert.equal(shard.items, 0, "nothing counted");
  assert.equal(shard.token, 0, "token not moved");
  assert.ok(await countItems(kv, id) > 0, "the page's items were written");
  await drain(kv, source, dispatcher.messages); // the redelivery includes msg again
  await assertCrawledExactly(kv, id, data.keys);
});

Deno.test("worker: a source error leaves the shard untouched and the page retryable", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(500, UNI, 24, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 2, docs: true }));
  let fail = 3;
  const failing = wrapSource(source, {
    doc: (docId) => fail-- > 0 ? Promise.reject(new Error("503")) : source.doc(docId),
  });
  const [first, ...rest] = dispatcher.messages;
  await assert.rejects(() => processPage({ kv, openSource: () => failing }, first), /503/);
  assert.equal((await listShards(kv, id))[0].value.items, 0);
  assert.equal((await listShards(kv, id))[0].value.token, 0);
  // Redelivery of the same message, with the source healthy again.
  await drain(kv, failing, [first, ...rest]);
  await assertCrawledExactly(kv, id, data.keys);
});
