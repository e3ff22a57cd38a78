/**
 * `deno task crawl [--source URL] [--shards N] [--kv PATH] [--docs] [--concurrency C]
 * [--docs-url URL] [--plan FILE] [--crawl-id ID] [--max-page L] [--no-rebalance]`
 *
 * Runs a crawl to completion and exits 0. Without `--source` it serves the bundled demo registry
 * (226,995 real npm names) in-process and crawls that. The identical command after a kill resumes.
 */
import { intFlag, parseFlags, runMain, urlFlag } from "../lib/cli/flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import { redactUrl } from "../lib/base/redact.ts";
import { runLocalCrawl } from "../lib/cli/local_crawl.ts";
import { readPlanFile } from "../lib/plan/plan_file.ts";
import { Progress, summary } from "../lib/cli/progress.ts";
import { startRegistry } from "../lib/sim/registry_server.ts";
import { RegistryData } from "../lib/sim/registry_data.ts";
import { bundledNames } from "../lib/sim/names.ts";
import type { CrawlSpec } from "../lib/engine/store.ts";
import { createRebalancer } from "../lib/engine/rebalance.ts";

const HELP =
  `usage: deno task crawl [--source URL] [--shards N] [--kv PATH] [--docs] [--concurrency C]
  [--docs-url URL] [--plan FILE] [--crawl-id ID] [--max-page L] [--no-rebalance]
  [--dispatch auto|queue|lease] [--workers W] [--follow] [--max-attempts A]`;

runMain(async () => {
  const f = parseFlags(Deno.args, {
    source: { type: "string" },
    shards: { type: "string" },
    kv: { type: "string" },
    docs: { type: "boolean" },
    concurrency: { type: "string" },
    "docs-url": { type: "string" },
    plan: { type: "string" },
    "crawl-id": { type: "string" },
    "max-page": { type: "string" },
    "no-rebalance": { type: "boolean" },
    dispatch: { type: "string" },
    follow: { type: "boolean" },
    workers: { type: "string" },
    "max-attempts": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (f.help) {
    console.log(HELP);
    return 0;
  }
  const log = (line: string) => console.error(line);
  const plan = f.plan ? await readPlanFile(f.plan) : undefined;
  const shards = plan
    ? plan.shards.length
    : intFlag("shards", f.shards, { fallback: 16, min: 1, max: 100_000 });
  if (plan && f.shards !== undefined && Number(f.shards) !== plan.shards.length) {
    throw new UsageError(`--shards ${f.shards} disagrees with the plan's ${plan.shards.length}`);
  }
  const crawlId = f["crawl-id"];
  if (crawlId !== undefined && !/^[A-Za-z0-9_.-]{1,64}$/.test(crawlId)) {
    throw new UsageError("--crawl-id must be 1-64 letters, digits, '.', '_' or '-'");
  }
  let sourceUrl: string;
  let close = () => Promise.resolve();
  let source: string;
  if (f.source !== undefined) {
    sourceUrl = urlFlag("source", f.source);
    source = sourceUrl;
  } else {
    const data = new RegistryData(await bundledNames());
    const reg = await startRegistry(data, { db: "npm" });
    sourceUrl = reg.url;
    source = "demo:npm-names";
    close = reg.close;
    log(`demo registry: ${data.size} real npm names served at ${reg.url}`);
  }
  const spec: CrawlSpec = {
    source,
    docsUrl: f["docs-url"] === undefined ? null : urlFlag("docs-url", f["docs-url"]),
    shards,
    docs: f.docs ?? false,
    concurrency: intFlag("concurrency", f.concurrency, { fallback: 8, min: 1, max: 1000 }),
    maxPage: intFlag("max-page", f["max-page"], { fallback: 1000, min: 2, max: 10_000 }),
    rebalance: !f["no-rebalance"],
  };
  const kvPath = f.kv ?? "crawl.kv";
  const dispatch = f.dispatch ?? "auto";
  if (!["auto", "queue", "lease"].includes(dispatch)) {
    throw new UsageError(`--dispatch must be auto, queue or lease, got "${dispatch}"`);
  }
  log(`crawling ${source.startsWith("demo:") ? source : redactUrl(source)} into ${kvPath}`);
  const stopFollowing = new AbortController();
  if (f.follow) Deno.addSignalListener("SIGINT", () => stopFollowing.abort());
  try {
    const res = await runLocalCrawl({
      kvPath,
      spec,
      sourceUrl,
      id: crawlId,
      plan,
      log,
      progress: new Progress({
        tty: Deno.stdout.isTerminal(),
        write: (t) => Deno.stdout.writeSync(new TextEncoder().encode(t)),
      }),
      onShardDone: spec.rebalance ? createRebalancer() : undefined,
      dispatch: dispatch === "auto" ? undefined : dispatch as "queue" | "lease",
      follow: f.follow ? stopFollowing.signal : undefined,
      sourceOptions: {
        maxAttempts: intFlag("max-attempts", f["max-attempts"], { fallback: 8, min: 1, max: 100 }),
      },
      workers: f.workers === undefined
        ? undefined
        : intFlag("workers", f.workers, { fallback: 1, min: 1, max: 1000 }),
    });
    console.log(summary(res.report, res));
    return 0;
  } finally {
    await close();
  }
});
