/**
 * `deno task bench`: performance figures against what users would pick instead and against KV's
 * own ceilings, as ratios side by side in one run. Never run by the tests (these machines are
 * shared and noisy). `--help` lists the parts.
 */
import { helpText, intFlag, parseFlags, runMain } from "../lib/cli/flags.ts";
import { choiceFlag } from "../lib/cli/flags.ts";
import { benchDocs } from "../lib/bench/docs_bench.ts";
import { benchKeys, benchKeysLarge } from "../lib/bench/keys_bench.ts";
import { benchPlan } from "../lib/bench/plan_bench.ts";
import { benchRebalance } from "../lib/bench/rebalance_bench.ts";
import { benchHeavyDocs } from "../lib/bench/heavy_docs_bench.ts";
import { benchReplica } from "../lib/bench/replica_bench.ts";
import { benchFollow } from "../lib/bench/follow_bench.ts";
import { benchWorkers } from "../lib/bench/workers_bench.ts";
import { benchSinks } from "../lib/bench/sinks_bench.ts";
import { benchMirror } from "../lib/bench/mirror_bench.ts";
import { benchNoRank } from "../lib/bench/no_rank_bench.ts";

const PARTS = [
  "plan",
  "keys",
  "replica",
  "no-rank",
  "docs",
  "heavy",
  "rebalance",
  "workers",
  "follow",
  "sinks",
  "mirror",
  "all",
] as const;

const FLAGS = {
  part: { type: "string", value: "PART", help: PARTS.join(", "), default: "all" },
  quick: { type: "boolean", help: "smaller registries and one run each, for a first look" },
  runs: {
    type: "string",
    value: "R",
    help: "runs of each timing (the median is shown)",
    default: "3",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task bench",
  summary:
    "Prints README's performance tables, measured in this run, as markdown. Takes minutes;\n" +
    "couchbackup is fetched from the npm registry the first time.",
  examples: ["deno task bench --part keys", "deno task bench --quick"],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  const part = choiceFlag("part", f.part, PARTS, "all");
  const quick = f.quick ?? false;
  const runs = intFlag("runs", f.runs, { fallback: quick ? 1 : 3, min: 1, max: 20 });
  const log = console.log;
  const all = part === "all";
  if (all || part === "plan") {
    // Planning over HTTP moves by a few tenths a boundary from run to run: at least 5 runs.
    await benchPlan({
      synthetic: quick ? 1_000_000 : 4_500_000,
      runs: quick ? 1 : Math.max(5, runs),
      log,
    });
  }
  if (all || part === "keys") {
    // A small registry, where planning's fixed cost weighs most, and a large one.
    for (const size of quick ? [200_000] : [300_000, 1_000_000]) {
      await benchKeys({ size, runs, log });
    }
    // npm's size: one run each (the pager alone takes about 40 s).
    if (!quick) await benchKeysLarge({ size: 4_500_000, runs: 1, log });
  }
  if (all || part === "replica") {
    await benchReplica({ size: quick ? 100_000 : 300_000, runs, log });
  }
  if (all || part === "no-rank") {
    await benchNoRank({ size: quick ? 200_000 : 1_000_000, runs, log });
  }
  if (all || part === "docs") {
    // A small registry, where fixed costs weigh most, then a larger one and the by-GET table.
    if (!quick) await benchDocs({ size: 30_000, runs, log, byGet: false });
    await benchDocs({ size: quick ? 20_000 : 100_000, runs, log });
  }
  if (all || part === "heavy") await benchHeavyDocs({ size: quick ? 3_000 : 10_000, log });
  if (all || part === "rebalance") {
    await benchRebalance({ size: quick ? 10_000 : 20_000, runs, log });
  }
  if (all || part === "workers") await benchWorkers({ size: quick ? 5_000 : 20_000, runs, log });
  if (all || part === "sinks") {
    await benchSinks({ size: quick ? 100_000 : 1_000_000, runs: quick ? 1 : runs, log });
  }
  if (all || part === "mirror") {
    await benchMirror({
      size: quick ? 5_000 : 20_000,
      runs,
      readers: 100,
      holdS: quick ? 10 : 60,
      log,
    });
  }
  if (all || part === "follow") {
    // Ten minutes of following in all: 5 at 20 changes/s, a minute's burst at 200/s, 4 at 20/s.
    await benchFollow({
      size: quick ? 5_000 : 20_000,
      steadyS: quick ? 20 : 300,
      burstS: quick ? 10 : 60,
      afterS: quick ? 20 : 240,
      log,
    });
  }
});
