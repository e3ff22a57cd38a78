/** Planning a crawl: its planner's lease, renewed on the planner's clock while the plan is made. */
import assert from "node:assert/strict";
import { createCrawl, planCrawl } from "../../../lib/engine/crawl/planning.ts";
import { getPlanning } from "../../../lib/engine/store/mod.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { ctxOf, RecordingDispatcher, spec } from "../../engine_helpers.ts";
import { FakeClock, nextTurn } from "../../fake_clock.ts";
import { dataOf, randomKeys, wrapSource } from "../../helpers.ts";

Deno.test("planning: the planner's lease is renewed on its clock while it plans; nobody else plans", async () => {
  using kv = await Deno.openKv(":memory:");
  const source = new MemorySource(dataOf(randomKeys(500, ["a", "b", "c"], 1, 6)));
  let release = () => {};
  const held = new Promise<void>((r) => release = r);
  let listed = 0;
  const slow = wrapSource(source, {
    list: async (o) => (listed++ === 0 && await held, await source.list(o)),
  });
  const clock = new FakeClock();
  const { crawl } = await createCrawl(kv, spec({ shards: 4 }), { clock });
  const deps = { dispatcher: new RecordingDispatcher(), clock, planLeaseMs: 1000 };
  const planning = planCrawl(ctxOf(kv, slow, { ...deps, owner: "A" }), crawl.id);
  while (listed === 0) await nextTurn();
  // Ten leases' worth of time while the registry holds the first listing: renewed every 250 ms.
  for (let i = 0; i < 40; i++) await clock.advance(250);
  const lease = (await getPlanning(kv, crawl.id)).value!.lease!;
  assert.equal(lease.owner, "A");
  assert.equal(lease.untilMs, clock.now() + 1000, "renewed at the last quarter");
  const other = await planCrawl(ctxOf(kv, slow, { ...deps, owner: "B" }), crawl.id);
  assert.equal(other, null, "a second planner finds the lease held");
  release();
  const planned = await planning;
  assert.equal(planned?.status, "running");
  assert.equal(planned?.shards, 4);
  assert.equal((await getPlanning(kv, crawl.id)).value, null, "the planning record is gone");
  assert.equal(clock.pending, 0, "the renewal stopped with the plan");
});
