/**
 * `deno task worker`: a process of lease workers (`--workers`, each running one shard at a time).
 * They plan and crawl whatever the crawls in the KV file (or KV Connect URL) need; run several
 * processes against one KV, on any machines: a killed process's shards are taken over within
 * seconds (its heartbeat goes stale), and one stopped with Ctrl-C or SIGTERM lets them go at once.
 * With `--source`, it first creates that crawl if missing (the id `deno task crawl` would use), so
 * that identical processes started together share one crawl.
 */
import { shownText } from "../lib/base/shown_text.ts";
import { UsageError } from "../lib/base/errors.ts";
import { helpText, intFlag, onInterrupt, parseFlags, runMain, urlFlag } from "../lib/cli/flags.ts";
import { openKvFile } from "../lib/cli/kv_file.ts";
import { RATE_FLAG, rateFromFlag, SPEC_FLAGS, specFromFlags } from "../lib/cli/spec_flags.ts";
import { outageLine, Pacer, pauseLine } from "../lib/sources/http/mod.ts";
import { quietWhileFailing } from "../lib/cli/outage_log.ts";
import {
  createCrawl,
  createRuntime,
  DEFAULT_WORKERS,
  MAX_WORKERS,
  pendingPassLine,
} from "../lib/engine/mod.ts";
import { sourceOpener } from "../lib/sources/open_source.ts";

const FLAGS = {
  kv: { type: "string", value: "PATH", help: "KV file or KV Connect URL (required)" },
  source: {
    type: "string",
    value: "URL",
    help: "create this crawl first if it is missing (with the flags below)",
  },
  ...SPEC_FLAGS,
  rate: RATE_FLAG,
  "lease-ms": {
    type: "string",
    value: "MS",
    help: "how long a claimed shard stays ours without a commit",
    default: "30000",
  },
  workers: {
    type: "string",
    value: "N",
    help: "lease workers in this process, one shard each at a time",
    default: String(DEFAULT_WORKERS),
  },
  "exit-when-idle": { type: "boolean", help: "stop once no crawl is planning or running" },
  name: { type: "string", value: "NAME", help: "this worker's name in leases and logs" },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task worker --kv PATH",
  summary: "A lease worker: plans and crawls whatever crawls in the KV need, with other workers.",
  examples: [
    "deno task worker --kv crawl.kv --source http://127.0.0.1:5984/registry --shards 16",
    "deno task worker --kv http://kv-host:4512 --exit-when-idle",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  if (!f.kv) throw new UsageError("--kv PATH (or a KV Connect URL) is required");
  const spec = f.source === undefined ? undefined : specFromFlags(f, urlFlag("source", f.source));
  const leaseMs = intFlag("lease-ms", f["lease-ms"], { fallback: 30_000, min: 100 });
  const workers = intFlag("workers", f.workers, {
    fallback: DEFAULT_WORKERS,
    min: 1,
    max: MAX_WORKERS,
  });
  const kv = await openKvFile(f.kv);
  const owner = f.name ?? `worker-${Deno.pid}`;
  const log = (line: string) => console.error(`[${owner}] ${shownText(line)}`);
  const pacer = new Pacer({
    ratePerSecond: rateFromFlag(f.rate),
    breaker: { onPause: (p) => log(pauseLine(p)), onOutage: (o) => log(outageLine(o)) },
  });
  const openSource = sourceOpener({ pacer });
  const runtime = createRuntime({
    kv,
    openSource,
    dispatch: "lease",
    leaseMs,
    label: owner,
    log: quietWhileFailing(log, pacer.breaker),
    pendingDocs: { onError: (crawlId, err) => log(pendingPassLine(crawlId, err)) },
    onEvent: (e) => {
      if (e.kind === "crawl-failed") log(`crawl ${e.crawlId} failed: ${e.error}`);
      if (e.kind === "crawl-done") log(`crawl ${e.crawlId} done`);
    },
  });
  const stop = new AbortController();
  const unlisten = onInterrupt(() => {
    log("stopping: letting the shards go");
    stop.abort();
  });
  try {
    if (spec) {
      const { crawl } = await createCrawl(kv, spec, { clock: runtime.deps.clock });
      log(`crawl ${crawl.id} (${crawl.status})`);
    }
    const all = await Promise.all(
      Array.from(
        { length: workers },
        () =>
          runtime.runWorker({ exitWhenIdle: f["exit-when-idle"] ?? false, signal: stop.signal }),
      ),
    );
    const sum = (k: "claims" | "shardsDone" | "errors") => all.reduce((n, s) => n + s[k], 0);
    log(
      `stopped: ${workers} workers, ${sum("claims")} claims, ${sum("shardsDone")} shards done, ` +
        `${sum("errors")} errors`,
    );
  } finally {
    unlisten();
    await runtime.close();
    kv.close();
  }
});
