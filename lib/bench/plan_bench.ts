/**
 * Planning: our planner vs the seed's 40-step bisection vs the naive even split, on the bundled
 * npm names and a synthetic registry of real-length names, for N = 16, 56, 256 (pages of 1,000
 * rows, no skip; ours also where the registry allows 10,000-row reads, as the npm replica does);
 * then the same planner over HTTP with the registry 50 ms away (requests, wall time, and how many
 * requests it kept in flight).
 *
 * @module
 */
import { evenSplitKeys, seedBisection } from "../plan/baselines.ts";
import { type Plan, planShards } from "../plan/planner.ts";
import { bundledNames, syntheticNames } from "../sim/names.ts";
import { RegistryData } from "../sim/registry/mod.ts";
import { MemorySource } from "../sources/memory_source.ts";
import { CouchSource } from "../sources/couch/mod.ts";
import { median, n, registry, s, table, x } from "./harness.ts";

/** Largest shard as a multiple of total/N, from boundary ranks. */
function largest(ranks: number[], total: number, shards: number): number {
  const rs = [0, ...ranks, total];
  return Math.max(...rs.slice(1).map((r, i) => r - rs[i])) / (total / shards);
}

/** Every shard holds floor or ceil of total/N items, and exactly the items between its keys. */
function exactPlan(plan: Plan, data: RegistryData, shards: number): boolean {
  const total = data.size;
  return plan.shards.every((sh) =>
    (sh.items === Math.floor(total / shards) || sh.items === Math.ceil(total / shards)) &&
    (sh.end === null ? total : data.rank(sh.end)) -
          (sh.start === null ? 0 : data.rank(sh.start)) ===
      sh.items
  );
}

async function inMemory(sets: [string, string[]][], log: (s: string) => void) {
  const rows: (string | number)[][] = [];
  for (const [name, keys] of sets) {
    const data = new RegistryData(keys);
    const total = data.size;
    for (const shards of [16, 56, 256]) {
      // Probes of 1,000 rows either way; the second registry also allows reads of 10,000.
      const plan = await planShards(new MemorySource(data, { maxPage: 1000 }), shards);
      const wide = await planShards(new MemorySource(data, { maxPage: 10_000 }), shards);
      const exact = exactPlan(plan, data, shards) && exactPlan(wide, data, shards);
      const seedSrc = new MemorySource(data);
      const seed = await seedBisection(seedSrc, total, shards);
      const even = [0, ...evenSplitKeys(shards).map((k) => data.rank(k)), total];
      const evenMax = Math.max(...even.slice(1).map((r, i) => r - even[i])) / total;
      rows.push([
        name,
        shards,
        x(plan.requests / (shards - 1)),
        x(wide.requests / (shards - 1)),
        exact ? "yes" : "NO",
        (seedSrc.requests / (shards - 1)).toFixed(1),
        n(seed.maxError),
        x(largest(seed.ranks, total, shards)),
        `${(evenMax * 100).toFixed(1)}%`,
        `${(1 / evenMax).toFixed(1)}x of ${shards}`,
      ]);
    }
  }
  log(table([
    "registry",
    "N",
    "ours: req/boundary (cap 1,000)",
    "ours: req/boundary (cap 10,000)",
    "ours: exact",
    "seed: req/boundary",
    "seed: max error (items)",
    "seed: largest/ideal",
    "even split: largest shard",
    "even split: speedup ceiling",
  ], rows));
}

async function overHttp(size: number, runs: number, log: (s: string) => void) {
  const reg = await registry(["--synthetic", String(size), "--latency-ms", "50"]);
  const rows: (string | number)[][] = [];
  try {
    const configs = [
      { label: "1,000 (registry capped at 1,000)", page: 1000, cap: 1000 },
      { label: "1,000, reads up to 10,000 (cap 10,000)", page: 1000, cap: 10_000 },
      { label: "10,000 (cap 10,000)", page: 10_000, cap: 10_000 },
    ];
    for (const { label, page, cap } of configs) {
      // Answers come back in another order each run, and the search's choices follow them:
      // one run's count moves by a few tenths a boundary (6.73-7.38 over 8 runs, capped).
      const requests: number[] = [];
      const times: number[] = [];
      let most = 0;
      for (let r = 0; r < runs; r++) {
        let inFlight = 0;
        const counting: typeof fetch = async (input, init) => {
          most = Math.max(most, ++inFlight);
          try {
            return await fetch(input, init);
          } finally {
            inFlight--;
          }
        };
        const src = new CouchSource(reg.url, { maxPage: cap, fetch: counting });
        const t = performance.now();
        const plan = await planShards(src, 56, { maxPage: page });
        times.push(performance.now() - t);
        requests.push(plan.requests);
      }
      const mean = requests.reduce((a, b) => a + b, 0) / runs;
      rows.push([
        label,
        `${n(mean)} (${Math.min(...requests)}-${Math.max(...requests)})`,
        `${x(mean / 55)} (${x(Math.min(...requests) / 55)}-${x(Math.max(...requests) / 55)})`,
        s(median(times)),
        most,
      ]);
    }
  } finally {
    await reg.close();
  }
  log(
    `\nOver HTTP, ${n(size)} synthetic names 50 ms away, N = 56 (${
      runs === 1 ? "one run" : `mean of ${runs} runs`
    }):\n`,
  );
  log(
    table([
      "probe rows per page",
      "requests (range)",
      "per boundary (range)",
      "seconds (median)",
      "most in flight",
    ], rows),
  );
}

/** Prints the planning tables. */
export async function benchPlan(o: { synthetic: number; runs: number; log: (s: string) => void }) {
  const base = await bundledNames();
  o.log("\n## Planning (listing requests; probes of 1,000 rows; no skip)\n");
  await inMemory([
    [`npm names (${n(base.length)})`, base],
    [`synthetic ${n(o.synthetic)}`, syntheticNames(base, o.synthetic)],
  ], o.log);
  await overHttp(o.synthetic, o.runs, o.log);
}
