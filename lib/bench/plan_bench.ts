/**
 * Planning benchmark: our planner vs the seed's 40-step bisection vs the naive even split, on the
 * bundled npm names and a synthetic registry, for N = 16, 56, 256 (limit 1,000, no skip).
 *
 * @module
 */
import { evenSplitKeys, seedBisection } from "../plan/baselines.ts";
import { MemorySource } from "../sources/memory_source.ts";
import { bundledNames, syntheticNames } from "../sim/names.ts";
import { planShards } from "../plan/planner.ts";
import { RegistryData } from "../sim/registry_data.ts";

/** Largest and smallest shard as a multiple of total/N, from boundary ranks. */
function spread(ranks: number[], total: number, n: number): { max: number; min: number } {
  const rs = [0, ...ranks, total];
  const sizes = rs.slice(1).map((r, i) => r - rs[i]);
  return { max: Math.max(...sizes) / (total / n), min: Math.min(...sizes) / (total / n) };
}

/** Prints the planning table. */
export async function benchPlan(o: { synthetic: number; log: (s: string) => void }): Promise<void> {
  const base = await bundledNames();
  const sets: [string, string[]][] = [
    ["npm names (226,995)", base],
    [`synthetic ${o.synthetic.toLocaleString("en-US")}`, syntheticNames(base, o.synthetic)],
  ];
  o.log("\n## Planning (listing requests; limit 1,000; no skip)\n");
  o.log(
    "| registry | N | ours: req/boundary | ours: exact | seed: req/boundary | seed: max err (items) " +
      "| seed: largest/ideal | even split: largest shard share | even split: speedup ceiling |",
  );
  o.log("|---|---|---|---|---|---|---|---|---|");
  for (const [name, keys] of sets) {
    const data = new RegistryData(keys);
    const total = data.size;
    for (const n of [16, 56, 256]) {
      const plan = await planShards(new MemorySource(data, { maxPage: 1000 }), n);
      const exact = plan.shards.every((s, i) => {
        const a = s.start === null ? 0 : data.rank(s.start);
        const b = s.end === null ? total : data.rank(s.end);
        return b - a === s.items && (s.items === Math.floor(total / n) ||
          s.items === Math.ceil(total / n)) &&
          (i === 0 || s.start === plan.shards[i - 1].end);
      });
      const seedSrc = new MemorySource(data);
      const seed = await seedBisection(seedSrc, total, n);
      const seedSpread = spread(seed.ranks, total, n);
      const even = [0, ...evenSplitKeys(n).map((k) => data.rank(k)), total];
      const evenMax = Math.max(...even.slice(1).map((r, i) => r - even[i])) / total;
      o.log(
        `| ${name} | ${n} | ${(plan.requests / (n - 1)).toFixed(2)} | ${exact ? "yes" : "NO"} | ` +
          `${(seedSrc.requests / (n - 1)).toFixed(1)} | ${seed.maxError} | ${
            seedSpread.max.toFixed(3)
          } | ` +
          `${(evenMax * 100).toFixed(1)}% | ${(1 / evenMax).toFixed(1)}x of ${n} |`,
      );
    }
  }
}
