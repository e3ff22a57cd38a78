/**
 * Rebalancing: (a) a straggler whose slow documents sit in one page — 2,000 items in 8 shards, a
 * hundred-odd documents costing 400 ms in one of them — with and without rebalancing; (b) a hot
 * prefix whose documents cost ~14x, over the naive even split, the static balanced plan, and
 * balanced + rebalancing, each against two ideals (total work / workers from one worker's rates;
 * a perfect pool, every document through one pool of the crawl's total concurrency, measured),
 * with a uniform-cost control showing the floor this machine puts under any such ratio. One GET
 * per document (the registry refuses bulk reads), so per-document cost is what it is.
 *
 * @module
 */
import { mapPool } from "../base/pool.ts";
import { buildSpec } from "../base/spec.ts";
import { runLocalCrawl } from "../cli/local_crawl.ts";
import { evenSplitKeys, shardsAt } from "../plan/baselines.ts";
import { type Plan, planShards } from "../plan/planner.ts";
import { bundledNames, prefixNear, syntheticNames } from "../sim/names.ts";
import { CouchSource } from "../sources/couch/mod.ts";
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
    // Every document's cost spread over the crawl's 32 slots: no crawl of it can beat this.
    const workMs = (hot.count * 400 + (2000 - hot.count) * 2) / 32;
    o.log(table(["crawl", "seconds", "splits", "ratio to --no-rebalance"], [
      ["--no-rebalance", s(off), 0, "1.00"],
      [
        "rebalancing (splits inside pages, idle slots lent to slow documents)",
        s(on),
        median(runs.splits),
        x(on / off),
      ],
      ["total work over the 32 slots (ideal)", s(workMs), "", x(workMs / off)],
    ]));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * A registry of `size` names whose `hot` documents cost `hotMs` more, with two ideal makespans:
 * one worker's rates times the number of shards, and one perfectly balanced pool measured.
 */
async function hotRegistry(
  o: {
    size: number;
    hot: string;
    hotMs: number;
    shards: number;
    concurrency: number;
    runs: number;
  },
) {
  const reg = await registry([
    "--synthetic",
    String(o.size),
    "--doc-latency-ms",
    "5",
    "--hot-prefix",
    o.hot,
    "--hot-ms",
    String(o.hotMs),
    ...NO_BULK,
  ]);
  try {
    const src = new CouchSource(reg.url);
    const ids: string[] = [];
    await pageThrough(
      src,
      { start: null, end: null },
      (rows) => void ids.push(...rows.map((r) => r.id)),
    );
    const hotIds = ids.filter((id) => id.startsWith(o.hot));
    // The per-document cost of each kind at the crawl's own concurrency (4), one worker alone.
    const cost = async (sample: string[]) => {
      const t = performance.now();
      await mapPool(sample, (id) => src.doc(id), { concurrency: 4 });
      return (performance.now() - t) / sample.length;
    };
    const normal = await cost(ids.filter((id) => !id.startsWith(o.hot)).slice(0, 800));
    const slow = await cost(hotIds.slice(0, 80));
    const idealMs = ((ids.length - hotIds.length) * normal + hotIds.length * slow) / o.shards;
    // The makespan of perfect balance on this machine: every document fetched by one pool with
    // the crawl's total concurrency, nothing listed or stored. Shards can only come close to it.
    const pools: number[] = [];
    for (let r = 0; r < o.runs; r++) {
      const t = performance.now();
      await mapPool(ids, (id) => src.doc(id), { concurrency: o.shards * o.concurrency });
      pools.push(performance.now() - t);
    }
    const poolMs = median(pools);
    return { reg, src, idealMs, poolMs, hotCount: hotIds.length, costRatio: slow / normal };
  } catch (err) {
    await reg.close();
    throw err;
  }
}

/**
 * (b): a hot prefix costing ~14x, three plans against the ideal; and the same crawl where every
 * document costs the same, which shows how close to its ideal this machine lets any crawl come
 * (8 workers on 2 shared cores contend for CPU that a single measuring worker has alone).
 */
async function hotPrefix(o: { size: number; runs: number; log: (s: string) => void }) {
  const shards = 8;
  const concurrency = 4;
  const hot = "@ty";
  const dir = await Deno.makeTempDir();
  const run = (url: string, name: string, rebalance: boolean, plan: Plan) =>
    crawl(url, dir, { name, shards, concurrency, rebalance, plan });
  // A table row: a crawl's time against both ideals of its registry.
  const row = (
    name: string,
    r: { ms: number; splits: number },
    ideal: { idealMs: number; poolMs: number },
  ) => [name, s(r.ms), x(r.ms / ideal.idealMs), x(r.ms / ideal.poolMs), r.splits];
  // The rebalanced crawls are short and noisy: the median of `runs`, by time.
  const runMedian = async (url: string, name: string, plan: Plan) => {
    const all = [];
    for (let r = 0; r < o.runs; r++) all.push(await run(url, `${name}${r}`, true, plan));
    return all.sort((p, q) => p.ms - q.ms)[all.length >> 1];
  };
  try {
    const h = await hotRegistry({
      size: o.size,
      hot,
      hotMs: 95,
      shards,
      concurrency,
      runs: o.runs,
    });
    let rows: (string | number)[][];
    try {
      const balanced = await planShards(h.src, shards);
      const even: Plan = {
        ...balanced,
        shards: await shardsAt(h.src, evenSplitKeys(shards), balanced.total),
      };
      const a = await run(h.reg.url, "even", false, even);
      const b = await run(h.reg.url, "balanced", false, balanced);
      const c = await runMedian(h.reg.url, "rebalanced", balanced);
      rows = [
        row("naive even split", a, h),
        row("balanced (static)", b, h),
        row("balanced + rebalancing", c, h),
      ];
      o.log(
        `\n## Rebalancing a hot prefix: ${n(o.size)} items, ${shards} shards x ${concurrency} in ` +
          `flight, ${h.hotCount} "${hot}" documents costing ${h.costRatio.toFixed(1)}x ` +
          `(rebalanced crawls and perfect pools: median of ${o.runs})\n`,
      );
      o.log(
        `ideal makespan: total work / workers, from one worker's rates: ${s(h.idealMs)} s; ` +
          `perfect pool (every document through one pool of ${shards * concurrency}, ` +
          `nothing stored): ${s(h.poolMs)} s\n`,
      );
    } finally {
      await h.reg.close();
    }
    const u = await hotRegistry({ size: o.size, hot, hotMs: 0, shards, concurrency, runs: o.runs });
    try {
      const plan = await planShards(u.src, shards);
      const c = await runMedian(u.reg.url, "uniform", plan);
      const ideals = `${s(u.idealMs)} s, ${s(u.poolMs)} s`;
      rows.push(
        row(`control: every document costs the same (ideals ${ideals}), rebalancing`, c, u),
      );
    } finally {
      await u.reg.close();
    }
    o.log(table(["plan", "seconds", "ratio to ideal", "ratio to perfect pool", "splits"], rows));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Prints both rebalancing tables. */
export async function benchRebalance(o: { size: number; runs: number; log: (s: string) => void }) {
  await straggler(o);
  await hotPrefix(o);
}
