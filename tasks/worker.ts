/**
 * `deno task worker --kv PATH [--source URL --shards N [--docs] ...] [--exit-when-idle]`
 *
 * A lease worker process: claims shards of the crawls in the KV file (or KV Connect URL) and crawls
 * them. Run several against one KV file; a killed worker's leases expire and others take over. With
 * `--source`, it first creates that crawl if missing (same id as `deno task crawl` would use), so
 * that identical workers started together share one crawl.
 */
import { intFlag, parseFlags, runMain, urlFlag } from "../lib/cli/flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import { createCrawl } from "../lib/engine/coordinator.ts";
import { runLeaseWorker } from "../lib/engine/lease_dispatch.ts";
import { splitStraggler } from "../lib/engine/rebalance.ts";
import { sourceOpener } from "../lib/engine/open_source.ts";
import { LeaseDispatcher } from "../lib/engine/lease_dispatch.ts";
import { type CrawlSpec, getCrawl } from "../lib/engine/store.ts";

runMain(async () => {
  const f = parseFlags(Deno.args, {
    kv: { type: "string" },
    source: { type: "string" },
    shards: { type: "string" },
    docs: { type: "boolean" },
    concurrency: { type: "string" },
    "docs-url": { type: "string" },
    "max-page": { type: "string" },
    "no-rebalance": { type: "boolean" },
    "lease-ms": { type: "string" },
    "exit-when-idle": { type: "boolean" },
    name: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (f.help) {
    console.log(
      "usage: deno task worker --kv PATH [--source URL --shards N [--docs] [--concurrency C]] " +
        "[--lease-ms MS] [--exit-when-idle] [--name NAME]",
    );
    return 0;
  }
  if (!f.kv) throw new UsageError("--kv PATH (or a KV Connect URL) is required");
  let kv: Deno.Kv;
  try {
    kv = await Deno.openKv(f.kv);
  } catch (err) {
    throw new UsageError(`cannot open KV at ${f.kv}: ${(err as Error).message}`);
  }
  const owner = f.name ?? `worker-${Deno.pid}`;
  const log = (line: string) => console.error(`[${owner}] ${line}`);
  try {
    if (f.source !== undefined) {
      const spec: CrawlSpec = {
        source: urlFlag("source", f.source),
        docsUrl: f["docs-url"] === undefined ? null : urlFlag("docs-url", f["docs-url"]),
        shards: intFlag("shards", f.shards, { fallback: 16, min: 1, max: 100_000 }),
        docs: f.docs ?? false,
        concurrency: intFlag("concurrency", f.concurrency, { fallback: 8, min: 1, max: 1000 }),
        maxPage: intFlag("max-page", f["max-page"], { fallback: 1000, min: 2, max: 10_000 }),
        rebalance: !f["no-rebalance"],
      };
      const { crawl } = await createCrawl(kv, spec);
      log(`crawl ${crawl.id} (${crawl.status})`);
    }
    const openSource = sourceOpener();
    const dispatcher = new LeaseDispatcher();
    const stats = await runLeaseWorker({ kv, openSource }, {
      owner,
      leaseMs: intFlag("lease-ms", f["lease-ms"], { fallback: 30_000, min: 100 }),
      exitWhenIdle: f["exit-when-idle"] ?? false,
      log,
      onShardDone: async (crawlId) => {
        const crawl = (await getCrawl(kv, crawlId)).value;
        if (crawl) await splitStraggler({ kv, source: openSource(crawl), dispatcher }, crawlId);
      },
    });
    log(`stopping: ${stats.pages} pages, ${stats.claims} claims, ${stats.errors} errors`);
  } finally {
    kv.close();
  }
});
