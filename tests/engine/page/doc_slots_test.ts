/**
 * Idle slots lent to slow documents (`doc_slots.ts`): a crawl's shards share its slots (shards x
 * concurrency) in a process; beyond its own concurrency a shard borrows the idle ones, so the slow
 * documents of one shard are fetched by more than its own few once the others are done. Counted
 * in requests in flight, never in time.
 */
import assert from "node:assert/strict";
import { DocSlots } from "../../../lib/engine/page/doc_slots.ts";
import { buildSpec } from "../../../lib/base/spec.ts";
import { runLocalCrawl } from "../../../lib/cli/local_crawl.ts";
import { RegistryData } from "../../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../../lib/sim/registry/registry_server.ts";

Deno.test("doc slots: own requests always go; borrowed ones only into idle slots", () => {
  const s = new DocSlots(4);
  s.own(), s.own(), s.own();
  assert.equal(s.borrow(), true);
  assert.equal(s.borrow(), false, "all 4 in use");
  s.own(); // a shard's own concurrency is never refused
  assert.equal(s.inUse, 5);
  s.done(), s.done();
  assert.equal(s.borrow(), true);
  assert.equal(s.inUse, 4);
});

/** Hot documents (100 ms each) all in the last of 4 shards, 2 in flight a shard. */
async function hotInFlight(rebalance: boolean): Promise<{ most: number; items: number }> {
  const names = Array.from({ length: 400 }, (_, i) => `p${String(i).padStart(3, "0")}`);
  const reg = await startRegistry(new RegistryData(names), {
    includeDocs: false,
    bulkGet: false,
    hotPrefix: "p3",
    hotMs: 100,
  });
  const dir = await Deno.makeTempDir();
  let now = 0;
  let most = 0;
  const counting: typeof fetch = async (input, init) => {
    const hot = /\/p3\d\d$/.test(String(input));
    if (hot) most = Math.max(most, ++now);
    try {
      return await fetch(input, init);
    } finally {
      if (hot) now--;
    }
  };
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: buildSpec({ source: reg.url, shards: 4, docs: true, concurrency: 2, rebalance }),
      sourceUrl: reg.url,
      sourceOptions: { fetch: counting },
    });
    return { most, items: res.report.itemsStored };
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("doc slots: one shard's slow documents go out through its crawl's idle slots", async () => {
  const off = await hotInFlight(false);
  assert.equal(off.items, 400);
  assert.equal(off.most, 2, "--no-rebalance: the shard's own 2");
  const on = await hotInFlight(true);
  assert.equal(on.items, 400);
  assert.ok(on.most > 2, `${on.most} slow documents in flight`);
});
