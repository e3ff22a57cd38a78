/**
 * Crawl benchmark: crawl items/s against the project's registry (a separate process, no added
 * latency) next to the registry's own serving rate from plain paging loops in the same run, keys
 * only and with documents, and the effect of KV batch size on item writes.
 *
 * @module
 */
import { runLocalCrawl } from "../cli/local_crawl.ts";
import { mapPool } from "../base/pool.ts";
import { CouchSource } from "../sources/couch_source.ts";
import { writeItems } from "../engine/item_store.ts";
import { spawnTask } from "../sim/spawn_task.ts";
import { pageThrough } from "./page_through.ts";

const fmt = (x: number) => Math.round(x).toLocaleString("en-US");

/** Prints the crawl table. */
export async function benchCrawl(o: { quick: boolean; log: (s: string) => void }): Promise<void> {
  const docsCount = o.quick ? 10_000 : 30_000;
  const reg = await spawnTask("tasks/registry.ts", ["--db", "npm"]);
  const docReg = await spawnTask("tasks/registry.ts", ["--synthetic", String(docsCount)]);
  const dir = await Deno.makeTempDir();
  try {
    o.log("\n## Crawl throughput (registry in its own process, no added latency)\n");
    const src = new CouchSource(reg.url);
    const first = await src.list({ limit: 1 });
    const total = first.total;
    let t = performance.now();
    await pageThrough(src, { start: null, end: null });
    const serial = total / ((performance.now() - t) / 1000);
    // The same registry read by 16 parallel loops over the planner's shards: the serving limit.
    const { planShards } = await import("../plan/planner.ts");
    const plan = await planShards(src, 16);
    t = performance.now();
    await Promise.all(plan.shards.map((s) => pageThrough(src, s)));
    const parallel = total / ((performance.now() - t) / 1000);
    const keysRun = await runLocalCrawl({
      kvPath: `${dir}/keys.kv`,
      spec: {
        source: reg.url,
        docsUrl: null,
        shards: 16,
        docs: false,
        concurrency: 8,
        maxPage: 1000,
        rebalance: true,
      },
      sourceUrl: reg.url,
    });
    const keysRate = total / (keysRun.elapsedMs / 1000);
    const dsrc = new CouchSource(docReg.url);
    const ids: string[] = [];
    await pageThrough(
      dsrc,
      { start: null, end: null },
      (rows) => ids.push(...rows.map((r) => r.id)),
    );
    t = performance.now();
    await mapPool(ids, (id) => dsrc.doc(id), { concurrency: 32 });
    const docLimit = ids.length / ((performance.now() - t) / 1000);
    const docsRun = await runLocalCrawl({
      kvPath: `${dir}/docs.kv`,
      spec: {
        source: docReg.url,
        docsUrl: null,
        shards: 8,
        docs: true,
        concurrency: 4,
        maxPage: 1000,
        rebalance: true,
      },
      sourceUrl: docReg.url,
    });
    const docsRate = docsCount / (docsRun.elapsedMs / 1000);
    o.log("| what | items/s | share of the limit |");
    o.log("|---|---|---|");
    o.log(`| registry limit: 1 paging loop (limit 1,000) | ${fmt(serial)} | |`);
    o.log(`| registry limit: 16 parallel paging loops | ${fmt(parallel)} | 100% |`);
    o.log(
      `| crawl, keys only, 16 shards, into KV (incl. planning) | ${fmt(keysRate)} | ${
        (100 * keysRate / parallel).toFixed(0)
      }% |`,
    );
    o.log(`| registry limit: documents, 32 in flight | ${fmt(docLimit)} | 100% |`);
    o.log(
      `| crawl with documents, 8 shards x 4 in flight, into KV | ${fmt(docsRate)} | ${
        (100 * docsRate / docLimit).toFixed(0)
      }% |`,
    );
    o.log("\n## KV item writes by atomic batch size (temp-file KV, 50,000 items)\n");
    o.log("| mutations per atomic op | items/s |");
    o.log("|---|---|");
    const items = Array.from({ length: 50_000 }, (_, i) => ({
      id: `pkg-${i.toString(36).padStart(6, "0")}`,
      rev: "1-0123456789abcdef0123456789abcdef",
    }));
    for (const batch of [1, 10, 100, 500, 1000]) {
      const kv = await Deno.openKv(`${dir}/batch${batch}.kv`);
      const slice = batch === 1 ? items.slice(0, 5000) : items;
      t = performance.now();
      await writeItems(kv, "b", slice, { batchMutations: batch });
      o.log(`| ${batch} | ${fmt(slice.length / ((performance.now() - t) / 1000))} |`);
      kv.close();
    }
  } finally {
    await reg.close();
    await docReg.close();
    await Deno.remove(dir, { recursive: true });
  }
}
