/**
 * The fault suite: a crawl with documents against the project's registry injecting 20% faults of
 * every kind (500, 503, 429 + Retry-After, truncated JSON, dropped connections, slow answers) and
 * documents that 404, killed with SIGKILL five times at random points, then finished; and the same
 * registry moving under a crawl (drift). Every run ends with the exact item set and counters.
 */
import { SYSTEM_CLOCK } from "../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { bundledNames, prng, syntheticNames } from "../../lib/sim/names.ts";
import { listCrawls, listShards } from "../../lib/engine/store/mod.ts";
import { iterateItems } from "../../lib/engine/items/item_read.ts";
import { crawlStatus } from "../../lib/engine/crawl/reads/status.ts";
import { runLocalCrawl } from "../../lib/cli/local_crawl.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { spawnRegistry, taskArgs, waitForItems } from "../helpers.ts";

Deno.test("faults: 20% faults, missing documents, 5 SIGKILLs: every item exactly once", async () => {
  const reg = await spawnRegistry([
    "--synthetic",
    "12000",
    "--fault-rate",
    "0.2",
    "--retry-after-s",
    "0",
    "--slow-ms",
    "100",
    "--missing-doc-rate",
    "0.02",
    "--doc-latency-ms",
    "1",
    // One GET per document, as the npm replica makes us do: every document meets the faults.
    "--no-include-docs",
    "--no-bulk-get",
  ]);
  const dir = await Deno.makeTempDir();
  const args = [
    ...taskArgs("crawl"),
    "--source",
    reg.url,
    "--shards",
    "6",
    "--docs",
    "--concurrency",
    "6",
    "--kv",
    `${dir}/f.kv`,
  ];
  const rand = prng(17);
  try {
    // Killed five times, each once the crawl has made some more progress (at random points).
    for (let kill = 0, at = 0; kill < 5; kill++) {
      const child = new Deno.Command(Deno.execPath(), {
        args,
        stdout: "null",
        stderr: "null",
        env: { NO_COLOR: "1" },
      }).spawn();
      at += 800 + Math.floor(rand() * 1200);
      await waitForItems(`${dir}/f.kv`, at);
      child.kill("SIGKILL");
      await child.status;
    }
    const out = await new Deno.Command(Deno.execPath(), {
      args,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const stdout = new TextDecoder().decode(out.stdout);
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    using kv = await Deno.openKv(`${dir}/f.kv`);
    const [crawl] = await listCrawls(kv);
    const ids: string[] = [];
    let errors = 0;
    for await (const it of iterateItems(kv, crawl.id)) {
      ids.push(it.id);
      if (it.error) {
        assert.equal(
          it.error.status,
          404,
          `permanent misses are recorded per item: ${JSON.stringify(it.error)}`,
        );
        errors++;
      } else assert.equal(JSON.parse(it.doc!)._id, it.id);
    }
    const truth = syntheticNames(await bundledNames(), 12000, { seed: 42 });
    assert.equal(ids.length, truth.length);
    assert.deepEqual(new Set(ids), new Set(truth));
    const report = await crawlStatus(kv, crawl.id, { clock: SYSTEM_CLOCK });
    assert.equal(report.itemsStored, truth.length, "counters exact after five kills");
    assert.equal(report.docErrors, errors, "document errors counted exactly");
    assert.ok(errors > 0 && errors < truth.length * 0.05);
    assert.equal(
      report.documents + 0,
      (await listShards(kv, crawl.id)).reduce((n, e) => n + e.value.docs, 0),
    );
    assert.match(stdout, new RegExp(`document errors ${errors.toLocaleString("en-US")}`));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("drift: inserts and deletions under a running crawl are caught up from _changes", async () => {
  const data = new RegistryData(syntheticNames(await bundledNames(), 6000, { seed: 8 }));
  const reg = await startRegistry(data, { latencyMs: 2 });
  const dir = await Deno.makeTempDir();
  const rand = prng(23);
  // The registry moves while shard pages are being read: each of the first 45 page requests is
  // preceded by an insert, an update or a deletion (some in ranges already crawled, some not).
  // Catch-up only starts after the last page, so every change lands before it.
  let mutations = 0;
  const moving: typeof fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.includes("_all_docs") && url.includes("endkey") && mutations < 45) {
      const keys = data.keys;
      const pick = keys[Math.floor(rand() * keys.length)];
      if (mutations % 3 === 0) data.put(`${pick}-drift-${mutations}`);
      else if (mutations % 3 === 1) data.put(pick);
      else data.delete(pick);
      mutations++;
    }
    return fetch(input, init);
  };
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/d.kv`,
      spec: {
        source: reg.url,
        docsUrl: null,
        shards: 4,
        docs: false,
        concurrency: 4,
        maxPage: 50,
        rebalance: true,
      },
      sourceUrl: reg.url,
      sourceOptions: { fetch: moving },
    });
    assert.equal(mutations, 45, "the registry moved during the crawl");
    const drift = res.report.drift!;
    // The feed reports each id once at its latest state, and a deletion of an item not yet stored
    // changes nothing, so the counts are at most the mutations made.
    const applied = drift.inserted + drift.updated + drift.deleted;
    assert.ok(applied > 0 && applied <= 45, `${applied} changes applied`);
    using kv = await Deno.openKv(`${dir}/d.kv`);
    const [crawl] = await listCrawls(kv);
    const got = new Map<string, string>();
    for await (const it of iterateItems(kv, crawl.id)) got.set(it.id, it.rev);
    assert.deepEqual([...got.keys()].sort(), [...data.keys].sort());
    for (const k of data.keys) assert.equal(got.get(k), data.rev(k));
    assert.equal((await crawlStatus(kv, crawl.id, { clock: SYSTEM_CLOCK })).itemsStored, data.size);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
