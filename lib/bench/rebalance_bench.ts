/**
 * Rebalancing: (a) a straggler whose slow documents sit in one page — 2,000 items in 8 shards, a
 * hundred-odd documents costing 400 ms in one of them — with and without rebalancing; (b) a hot
 * prefix whose documents cost 20x, over the naive even split, the static balanced plan, and
 * balanced + rebalancing, each against the ideal (total work / workers). One GET per document
 * (the registry refuses bulk reads), so per-document cost is what it is.
 *
 * @module
 */
import { mapPool } from "../base/pool.ts";
import { buildSpec } from "../base/spec.ts";
import { runLocalCrawl } from "../cli/local_crawl.ts";
import { evenSplitKeys, shardsAt } from "../plan/baselines.ts";
import { type Plan, planShards } from "../plan/planner.ts";
import { bundledNames, prefixNear, syntheticNames } from "../sim/names.ts";
import { CouchSource } from "../sources/couch_source.ts";
import { median, n, registry, s, table, x } from "./harness.ts";
import { pageThrough } from "./peers.ts";

const NO_BULK = ["--no-include-docs", "--no-bulk-get"];

async function crawl(
  url: string,
  dir: string,
  o: { name: string; shards: number; concurrency: number; rebalance: boolean; plan?: Plan },
) {
  const res = await runLocalCrawl({
    kvPath: `${dir}/${o.name}.kv`,
    spec: buildSpec({
      source: url,
      shards: o.shards,
      docs: true,
      concurrency: o.concurrency,
      rebalance: o.rebalance,
    }),
    sourceUrl: url,
    id: o.name,
    plan: o.plan,
  });
  return { ms: res.elapsedMs, splits: res.report.splits.length };
}

/** (a): the slow documents of one shard, in its in-flight page. */
async function straggler(o: { runs: number; log: (s: string) => void }) {
  const keys = syntheticNames(await bundledNames(), 2000, { seed: 42 });
  const hot = prefixNear(keys, 116);
  const reg = await registry([
    "--synthetic",
    "2000",
    "--doc-latency-ms",
    "2",
    "--hot-prefix",
    hot.prefix,
    "--hot-ms",
    "400",
    ...NO_BULK,
  ]);
  const dir = await Deno.makeTempDir();
  try {
    const runs = { off: [] as number[], on: [] as number[], splits: [] as number[] };
    for (let r = 0; r < o.runs; r++) {
      const base = { shards: 8, concurrency: 4 };
      runs.off.push((await crawl(reg.url, dir, { ...base, name: `off${r}`, rebalance: false })).ms);
      const on = await crawl(reg.url, dir, { ...base, name: `on${r}`, rebalance: true });
      runs.on.push(on.ms);
      runs.splits.push(on.splits);
    }
    const off = median(runs.off);
    const on = median(runs.on);
    o.log(
      `\n## Rebalancing a straggler: 2,000 items, 8 shards x 4 in flight, ${hot.count} "${hot.prefix}" ` +
        `documents costing 400 ms (median of ${o.runs})\n`,
    );
    o.log(table(["crawl", "seconds", "splits", "ratio to --no-rebalance"], [
      ["--no-rebalance", s(off), 0, "1.00"],
      [
        "rebalancing (splits inside pages, down to a few documents)",
        s(on),
        median(runs.splits),
        x(on / off),
      ],
    ]));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** (b): a hot prefix costing 20x, three plans against the ideal. */
async function hotPrefix(o: { size: number; log: (s: string) => void }) {
  const shards = 8;
  const concurrency = 4;
  const hot = "@ty";
  const reg = await registry([
    "--synthetic",
    String(o.size),
    "--doc-latency-ms",
    "5",
    "--hot-prefix",
    hot,
    "--hot-ms",
    "95",
    ...NO_BULK,
  ]);
  const dir = await Deno.makeTempDir();
  try {
    const src = new CouchSource(reg.url);
    const ids: string[] = [];
    await pageThrough(
      src,
      { start: null, end: null },
      (rows) => void ids.push(...rows.map((r) => r.id)),
    );
    const hotIds = ids.filter((id) => id.startsWith(hot));
    // The per-document cost of each kind at the crawl's own concurrency.
    const cost = async (sample: string[]) => {
      const t = performance.now();
      await mapPool(sample, (id) => src.doc(id), { concurrency });
      return (performance.now() - t) / sample.length;
    };
    const normal = await cost(ids.filter((id) => !id.startsWith(hot)).slice(0, 800));
    const slow = await cost(hotIds.slice(0, 80));
    const idealMs = ((ids.length - hotIds.length) * normal + hotIds.length * slow) / shards;
    const balanced = await planShards(src, shards);
    const even: Plan = {
      ...balanced,
      shards: await shardsAt(src, evenSplitKeys(shards), balanced.total),
    };
    const a = await crawl(reg.url, dir, {
      name: "even",
      shards,
      concurrency,
      rebalance: false,
      plan: even,
    });
    const b = await crawl(reg.url, dir, {
      name: "balanced",
      shards,
      concurrency,
      rebalance: false,
      plan: balanced,
    });
    const c = await crawl(reg.url, dir, {
      name: "rebalanced",
      shards,
      concurrency,
      rebalance: true,
      plan: balanced,
    });
    o.log(
      `\n## Rebalancing a hot prefix: ${n(o.size)} items, ${shards} shards x ${concurrency} in ` +
        `flight, ${hotIds.length} "${hot}" documents costing ${(slow / normal).toFixed(1)}x\n`,
    );
    o.log(`ideal makespan (total work / workers): ${s(idealMs)} s\n`);
    o.log(table(["plan", "seconds", "ratio to ideal", "splits"], [
      ["naive even split", s(a.ms), x(a.ms / idealMs), a.splits],
      ["balanced (static)", s(b.ms), x(b.ms / idealMs), b.splits],
      ["balanced + rebalancing", s(c.ms), x(c.ms / idealMs), c.splits],
    ]));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Prints both rebalancing tables. */
export async function benchRebalance(o: { size: number; runs: number; log: (s: string) => void }) {
  await straggler(o);
  await hotPrefix(o);
}
