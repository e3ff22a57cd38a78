/** Status reports: the figures a person watching a crawl reads. */
import { clockWithNow } from "../../../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { crawlStatus } from "../../../../lib/engine/crawl/reads/status.ts";
import { commitShard, listShards } from "../../../../lib/engine/store/mod.ts";
import { MemorySource } from "../../../../lib/sources/memory_source.ts";
import { begin, spec } from "../../../engine_helpers.ts";
import { dataOf, randomKeys } from "../../../helpers.ts";

Deno.test("status: the ETA waits for a slow last shard instead of saying 0 s", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(2000, ["a", "b", "c", "d"], 41, 8));
  const { id } = await begin(kv, new MemorySource(data), spec({ shards: 2 }));
  const [a, b] = (await listShards(kv, id)).sort((x, y) => x.value.id - y.value.id);
  const t0 = a.value.startedAt;
  // Shard 0 is done; shard 1 has 10 items left and has been storing 1 item a second.
  assert.ok(await commitShard(kv, id, a, { ...a.value, done: true, items: a.value.expected }));
  const slow = { ...b.value, items: b.value.expected - 10, recentRate: 1 };
  assert.ok(await commitShard(kv, id, b, slow));
  const report = await crawlStatus(kv, id, { clock: clockWithNow(() => t0 + 10_000) });
  assert.equal(report.status, "running");
  assert.equal(report.itemsStored, data.size - 10);
  // The crawl-wide rate (~199 items/s) would give 0.05 s; the last shard needs 10 s.
  assert.equal(report.etaSeconds, 10);
});
