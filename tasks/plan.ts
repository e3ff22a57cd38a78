/**
 * `deno task plan --source URL --shards N [--json] [--out FILE] [--max-page L]`: prints a plan of N
 * shards of exactly balanced item counts, as a table with a comparison to the naive even split, or
 * as JSON (`--json`); `--out` also writes the JSON for `deno task crawl --plan FILE`.
 */
import { SPEC_LIMITS } from "../lib/base/spec.ts";
import { helpText, intFlag, parseFlags, runMain, urlFlag, viewFlag } from "../lib/cli/flags.ts";
import { HEADER_FLAG, VIEW_FLAG } from "../lib/cli/spec_flags.ts";
import { parseHeader } from "../lib/sources/http/mod.ts";
import { UsageError } from "../lib/base/errors.ts";
import { openSourceRef } from "../lib/sources/open_source.ts";
import { type Plan, PLAN_PAGE, planShards } from "../lib/plan/planner.ts";
import { idOfKey, type IdOrder } from "../lib/plan/id_order.ts";
import { evenSplitPieces, evenSplitRanks, maxShare } from "../lib/plan/baselines.ts";
import { planSvg } from "../lib/plan/plan_svg.ts";
import { decodeViewRow } from "../lib/plan/view/mod.ts";
import { formatPlanTable } from "../lib/plan/plan_table.ts";

const FLAGS = {
  source: {
    type: "string",
    value: "URL",
    help: "database URL of the registry, or sqlite:FILE#table (required)",
  },
  shards: { type: "string", value: "N", help: "shards to cut the key space into (required)" },
  json: { type: "boolean", help: "print the plan as one JSON object" },
  out: { type: "string", value: "FILE", help: "also write the plan for `crawl --plan FILE`" },
  svg: {
    type: "string",
    value: "FILE",
    help: "draw the plan: items by key range, even cuts beside the balanced ones",
  },
  "max-page": {
    type: "string",
    value: "L",
    help: "rows per listing request",
    default: String(PLAN_PAGE),
  },
  concurrency: { type: "string", value: "C", help: "listing requests in flight", default: "8" },
  "no-compare": { type: "boolean", help: "skip the comparison with the naive even split" },
  "max-attempts": {
    type: "string",
    value: "A",
    help: "attempts per request before giving up",
    default: "5",
  },
  view: VIEW_FLAG,
  header: HEADER_FLAG,
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task plan --source URL --shards N",
  summary: "Finds the keys that cut a registry into N shards of exactly equal item count.",
  examples: [
    "deno task plan --source http://127.0.0.1:5984/registry --shards 56",
    "deno task plan --source https://replicate.npmjs.com/registry --shards 56 --out plan.json",
    "deno task plan --source http://127.0.0.1:5984/registry --shards 56 --svg plan.svg",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  if (f.source === undefined) throw new UsageError("--source URL is required");
  if (f.shards === undefined) throw new UsageError("--shards N is required");
  const url = urlFlag("source", f.source);
  const shards = intFlag("shards", f.shards, { fallback: 0, ...SPEC_LIMITS.shards });
  const maxPage = intFlag("max-page", f["max-page"], {
    fallback: PLAN_PAGE,
    ...SPEC_LIMITS.maxPage,
  });
  const view = viewFlag(f.view);
  const source = openSourceRef(url, {
    view,
    headers: (f.header ?? []).map(parseHeader),
    maxPage,
    maxAttempts: intFlag("max-attempts", f["max-attempts"], { fallback: 5, min: 1, max: 100 }),
  });
  const started = performance.now();
  const plan = await planShards(source, shards, {
    concurrency: intFlag("concurrency", f.concurrency, { fallback: 8, min: 1, max: 256 }),
  });
  const elapsedMs = Math.round(performance.now() - started);
  // A view's shard bounds are encoded rows (what `crawl --plan` needs); `rows` says what they are.
  const row = (k: string | null) => k === null ? null : decodeViewRow(k);
  // Bounds are shown as the registry's own ids (its id order is recorded for `crawl --plan`).
  const order = source.idOrder ?? "codepoint";
  const shown = shownPlan(plan, order);
  const out = {
    ...shown,
    ...(order === "utf16" ? { idOrder: order } : {}),
    source: source.description,
    sourceUrl: url,
    elapsedMs,
    ...(view === undefined
      ? {}
      : { view, rows: plan.shards.map((s) => ({ start: row(s.start), end: row(s.end) })) }),
  };
  if (f.out) await Deno.writeTextFile(f.out, JSON.stringify(out, null, 2) + "\n");
  // A view's keys are JSON values: an even split of the text alphabet means nothing there.
  const compare = !f.json && !f["no-compare"] && shards > 1 && view === undefined;
  // The even split's cuts with their ranks: one request each, for the comparison and the picture.
  const even = compare || (f.svg && view === undefined) ? await evenSplitRanks(source, shards) : [];
  if (f.svg) {
    const cuts = shown.shards.slice(1).map((s) => s.start!);
    const title = `${shards} shards over ${plan.total.toLocaleString("en-US")} items`;
    const cutRanks = plan.shards.slice(1).map((_, i) =>
      plan.shards.slice(0, i + 1).reduce((n, sh) => n + sh.items, 0)
    );
    const picture = planSvg({ total: plan.total, even, cuts, cutRanks, title });
    await Deno.writeTextFile(f.svg, picture + "\n");
    if (!f.json) console.log(`wrote ${f.svg}`);
  }
  if (f.json) {
    console.log(JSON.stringify(out));
    return 0;
  }
  console.log(formatPlanTable(shown, { view: view !== undefined }));
  console.log(
    `planned ${plan.total} items into ${shards} shards with ${plan.requests} listing requests ` +
      `(${
        (plan.requests / Math.max(1, shards - 1)).toFixed(2)
      } per boundary, method ${plan.method}) ` +
      `in ${elapsedMs} ms`,
  );
  if (compare) {
    const evenMax = Math.max(...evenSplitPieces(plan.total, even)) / plan.total;
    const balancedMax = maxShare(plan.shards, plan.total);
    console.log(
      `naive even split of the key space: largest shard ${(evenMax * 100).toFixed(1)}% of items ` +
        `(speedup ceiling ${(1 / evenMax).toFixed(1)}x with ${shards} workers); ` +
        `balanced: ${(balancedMax * 100).toFixed(2)}% (ceiling ${(1 / balancedMax).toFixed(1)}x)`,
    );
  }
  if (f.out) console.log(`wrote ${f.out}`);
});

/** The plan with its bounds as the registry's ids (`id_order.ts`; the same plan by code point). */
function shownPlan(plan: Plan, order: IdOrder): Plan {
  if (order === "codepoint") return plan;
  const id = (k: string | null) => k === null ? null : idOfKey(k, order);
  return {
    ...plan,
    shards: plan.shards.map((s) => ({ ...s, start: id(s.start), end: id(s.end) })),
  };
}
