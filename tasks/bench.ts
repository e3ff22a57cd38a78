/**
 * `deno task bench [--part plan|crawl|rebalance|all] [--quick]`: performance figures, as ratios
 * side by side in one run. Never run by the tests (these machines are shared and noisy).
 */
import { intFlag, parseFlags, runMain } from "../lib/cli/flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import { benchCrawl } from "../lib/bench/crawl_bench.ts";
import { benchPlan } from "../lib/bench/plan_bench.ts";
import { benchRebalance } from "../lib/bench/rebalance_bench.ts";

runMain(async () => {
  const f = parseFlags(Deno.args, {
    part: { type: "string" },
    quick: { type: "boolean" },
    "synthetic-size": { type: "string" },
  });
  const part = f.part ?? "all";
  if (!["plan", "crawl", "rebalance", "all"].includes(part)) {
    throw new UsageError(`--part must be plan, crawl, rebalance or all, got "${part}"`);
  }
  const synthetic = intFlag("synthetic-size", f["synthetic-size"], {
    fallback: f.quick ? 1_000_000 : 4_000_000,
    min: 1000,
  });
  if (part === "plan" || part === "all") await benchPlan({ synthetic, log: console.log });
  if (part === "crawl" || part === "all") {
    await benchCrawl({ quick: f.quick ?? false, log: console.log });
  }
  if (part === "rebalance" || part === "all") {
    await benchRebalance({ quick: f.quick ?? false, log: console.log });
  }
});
