/**
 * `deno task bench`: performance figures, as ratios side by side in one run. Never run by the
 * tests (these machines are shared and noisy). `--help` lists the parts.
 */
import { UsageError } from "../lib/base/errors.ts";
import { helpText, intFlag, parseFlags, runMain } from "../lib/cli/flags.ts";
import { benchCrawl } from "../lib/bench/crawl_bench.ts";
import { benchPlan } from "../lib/bench/plan_bench.ts";
import { benchRebalance } from "../lib/bench/rebalance_bench.ts";

const FLAGS = {
  part: {
    type: "string",
    value: "PART",
    help: "plan, crawl, rebalance or all",
    default: "all",
  },
  quick: { type: "boolean", help: "smaller registries, for a first look" },
  "synthetic-size": {
    type: "string",
    value: "N",
    help: "keys of the synthetic registry in the planning table",
    default: "4000000 (1000000 with --quick)",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task bench",
  summary: "Prints the performance tables of README, measured in this run, as markdown.",
  examples: ["deno task bench --part plan", "deno task bench --quick"],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  const part = f.part ?? "all";
  if (!["plan", "crawl", "rebalance", "all"].includes(part)) {
    throw new UsageError(`--part must be plan, crawl, rebalance or all, got "${part}"`);
  }
  const quick = f.quick ?? false;
  const synthetic = intFlag("synthetic-size", f["synthetic-size"], {
    fallback: quick ? 1_000_000 : 4_000_000,
    min: 1000,
  });
  if (part === "plan" || part === "all") await benchPlan({ synthetic, log: console.log });
  if (part === "crawl" || part === "all") await benchCrawl({ quick, log: console.log });
  if (part === "rebalance" || part === "all") await benchRebalance({ quick, log: console.log });
});
