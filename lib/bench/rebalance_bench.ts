/**
 * Rebalancing benchmark: with documents fetched and one hot prefix whose documents cost 20x, the
 * makespan of (a) the naive even split, (b) the static balanced plan, (c) balanced + dynamic
 * rebalancing, each as a ratio to the ideal (total work / workers), side by side in one run.
 *
 * @module
 */
import { evenSplitKeys, shardsAt } from "../plan/baselines.ts";
import { CouchSource } from "../sources/couch_source.ts";
import { runLocalCrawl } from "../cli/local_crawl.ts";
import { type Plan, planShards } from "../plan/planner.ts";
import { mapPool } from "../base/pool.ts";
import { spawnTask } from "../sim/spawn_task.ts";
import { pageThrough } from "./page_through.ts";

const SHARDS = 8;
const CONCURRENCY = 4;

/** Prints the rebalancing table. */
export async function benchRebalance(o: { quick: boolean; log: (s: string) => void }) {
  const size = o.quick ? 10_000 : 20_000;
  const docMs = 5;
  const hotMs = 95; // 5 + 95 = 100 ms: 20x a normal document
  const hot = "@ty";
  const reg = await spawnTask("tasks/registry.ts", [
    "--synthetic",
    String(size),
    "--doc-latency-ms",
    String(docMs),
    "--hot-prefix",
    hot,
    "--hot-ms",
    String(hotMs),
  ]);
  const dir = await Deno.makeTempDir();
  try {
    const src = new CouchSource(reg.url);
    const ids: string[] = [];
    await pageThrough(
      src,
      { start: null, end: null },
      (rows) => ids.push(...rows.map((r) => r.id)),
    );
    const hotIds = ids.filter((id) => id.startsWith(hot));
    // Calibrate the per-document cost of each kind at the crawl's own concurrency.
    const time = async (sample: string[]) => {
      const t = performance.now();
      await mapPool(sample, (id) => src.doc(id), { concurrency: CONCURRENCY });
      return (performance.now() - t) / sample.length; // ms per document per shard
    };
    const normalCost = await time(ids.filter((id) => !id.startsWith(hot)).slice(0, 800));
    const hotCost = await time(hotIds.slice(0, 80));
    const idealS = ((ids.length - hotIds.length) * normalCost + hotIds.length * hotCost) / SHARDS /
      1000;
    const balanced = await planShards(src, SHARDS);
    const evenKeys = evenSplitKeys(SHARDS);
    const evenPlan: Plan = {
      ...balanced,
      shards: await shardsAt(src, evenKeys, balanced.total),
      method: "rank",
    };
    const run = async (name: string, plan: Plan, rebalance: boolean) => {
      const res = await runLocalCrawl({
        kvPath: `${dir}/${name}.kv`,
        spec: {
          source: reg.url,
          docsUrl: null,
          shards: plan.shards.length,
          docs: true,
          concurrency: CONCURRENCY,
          maxPage: 1000,
          rebalance,
        },
        sourceUrl: reg.url,
        id: name,
        plan,
      });
      return { s: res.elapsedMs / 1000, splits: res.report.splits.length };
    };
    const a = await run("even", evenPlan, false);
    const b = await run("balanced", balanced, false);
    const c = await run("rebalanced", balanced, true);
    o.log(
      `\n## Rebalancing (${
        size.toLocaleString("en-US")
      } items with documents, ${SHARDS} shards x ` +
        `${CONCURRENCY} in flight; ${hotIds.length} "${hot}" documents cost ${
          (hotCost / normalCost).toFixed(1)
        }x)\n`,
    );
    o.log(`ideal makespan (total work / workers): ${idealS.toFixed(1)} s\n`);
    o.log("| plan | makespan (s) | ratio to ideal | splits |");
    o.log("|---|---|---|---|");
    for (
      const [name, r] of [["naive even split", a], ["balanced (static)", b], [
        "balanced + rebalancing",
        c,
      ]] as const
    ) {
      o.log(`| ${name} | ${r.s.toFixed(1)} | ${(r.s / idealS).toFixed(2)} | ${r.splits} |`);
    }
    o.log(`\nrebalanced / static balanced wall time: ${(c.s / b.s).toFixed(2)}`);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}
