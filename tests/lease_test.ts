import assert from "node:assert/strict";
import { checkCompletion, startCrawl } from "../lib/engine/coordinator.ts";
import { claimShard, LeaseDispatcher, runLeaseWorker } from "../lib/engine/lease_dispatch.ts";
import { MemorySource } from "../lib/sources/memory_source.ts";
import { getShard, listCrawls, listShards } from "../lib/engine/store.ts";
import { countItems, iterateItems } from "../lib/engine/item_store.ts";
import { processPage } from "../lib/engine/page.ts";
import { spec } from "./engine_helpers.ts";
import { dataOf, randomKeys, spawnRegistry, waitForItems } from "./helpers.ts";
import { bundledNames, syntheticNames } from "../lib/sim/names.ts";

const ASCII = "abcdefghijklmnop-".split("");

Deno.test("lease: a live lease excludes others; an expired one is taken over; the old holder cannot commit", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(500, ASCII, 61, 6));
  const source = new MemorySource(data, { maxPage: 50 });
  const { crawl } = await startCrawl(
    { kv, source, dispatcher: new LeaseDispatcher() },
    spec({ shards: 2 }),
    {
      id: "l",
    },
  );
  let clock = 1_000_000;
  const e = (await getShard(kv, crawl.id, 0)) as Deno.KvEntry<never>;
  const a = await claimShard(kv, crawl.id, e, { owner: "A", leaseMs: 5000, nowMs: clock });
  assert.ok(a, "A claims the free shard");
  const e2 = await getShard(kv, crawl.id, 0);
  assert.equal(
    await claimShard(kv, crawl.id, e2 as never, {
      owner: "B",
      leaseMs: 5000,
      nowMs: clock + 4999,
    }),
    null,
  );
  // A works a page: the commit renews its lease.
  const deps = { kv, openSource: () => source, now: () => clock };
  const p1 = await processPage(deps, { crawlId: crawl.id, shardId: 0 }, undefined, {
    owner: "A",
    leaseMs: 5000,
  });
  assert.equal(p1.kind, "committed");
  assert.equal((await getShard(kv, crawl.id, 0)).value!.lease!.untilMs, clock + 5000);
  // A stalls; its lease expires and B takes over.
  clock += 5001;
  const e3 = await getShard(kv, crawl.id, 0);
  assert.ok(
    await claimShard(kv, crawl.id, e3 as never, { owner: "B", leaseMs: 5000, nowMs: clock }),
  );
  const late = await processPage(deps, { crawlId: crawl.id, shardId: 0 }, undefined, {
    owner: "A",
    leaseMs: 5000,
  });
  assert.deepEqual(late, { kind: "skipped", reason: "lease lost" });
  const b = await processPage(deps, { crawlId: crawl.id, shardId: 0 }, undefined, {
    owner: "B",
    leaseMs: 5000,
  });
  assert.equal(b.kind, "committed");
});

Deno.test("lease: three in-process lease workers crawl exactly once, rebalancing on", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(4000, ASCII, 62, 7));
  const source = new MemorySource(data, { maxPage: 60 });
  await startCrawl(
    { kv, source, dispatcher: new LeaseDispatcher() },
    spec({ shards: 5, rebalance: true }),
    {
      id: "three",
    },
  );
  const { splitStraggler } = await import("../lib/engine/rebalance.ts");
  const workers = ["w1", "w2", "w3"].map((owner) =>
    runLeaseWorker({ kv, openSource: () => source }, {
      owner,
      exitWhenIdle: true,
      idleMs: 10,
      onShardDone: async (id) => {
        await splitStraggler({ kv, source, dispatcher: new LeaseDispatcher() }, id, {
          minPages: 1,
        });
      },
    })
  );
  const stats = await Promise.all(workers);
  assert.ok(stats.filter((s) => s.pages > 0).length >= 2, "the work was shared");
  assert.equal(stats.reduce((n, s) => n + s.errors, 0), 0);
  assert.equal(await checkCompletion(kv, "three"), true);
  assert.equal(await countItems(kv, "three"), data.size);
  const items = (await listShards(kv, "three")).reduce((n, e) => n + e.value.items, 0);
  assert.equal(items, data.size, "counters exact");
});

Deno.test("lease: three `deno task worker` processes on one KV file, one killed mid-crawl", async () => {
  const reg = await spawnRegistry([
    "--synthetic",
    "20000",
    "--latency-ms",
    "5",
    "--max-limit",
    "1000",
  ]);
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/w.kv`;
  const worker = (name: string) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "tasks/worker.ts",
        "--kv",
        kvPath,
        "--source",
        reg.url,
        "--shards",
        "6",
        "--max-page",
        "50",
        "--lease-ms",
        "1500",
        "--exit-when-idle",
        "--name",
        name,
      ],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
  try {
    const ws = ["w1", "w2", "w3"].map(worker);
    const logs = ws.map((w) => new Response(w.stderr).text());
    await waitForItems(kvPath, 4000); // a fifth of the registry: well before the end
    ws[1].kill("SIGKILL");
    const codes = await Promise.all(ws.map(async (w) => (await w.status).code));
    const text = await Promise.all(logs);
    assert.notEqual(codes[1], 0, "w2 was killed mid-crawl");
    assert.equal(codes[0], 0, text[0]);
    assert.equal(codes[2], 0, text[2]);
    using kv = await Deno.openKv(kvPath);
    const [crawl] = await listCrawls(kv);
    assert.equal(crawl.status, "done");
    const ids: string[] = [];
    for await (const it of iterateItems(kv, crawl.id)) ids.push(it.id);
    assert.equal(ids.length, 20000);
    const truth = syntheticNames(await bundledNames(), 20000, { seed: 42 });
    assert.deepEqual(new Set(ids), new Set(truth));
    const counted = (await listShards(kv, crawl.id)).reduce((n, e) => n + e.value.items, 0);
    assert.equal(counted, 20000, "no page counted twice across workers");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
