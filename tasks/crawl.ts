/**
 * `deno task crawl`: runs a crawl to completion and exits 0. Without `--source` it serves the
 * bundled demo registry (226,995 real npm names) in-process and crawls that. The identical command
 * after a kill resumes. `--help` lists every flag.
 */
import { SYSTEM_CLOCK } from "../lib/base/clock.ts";
import { shownText } from "../lib/base/shown_text.ts";
import { UsageError } from "../lib/base/errors.ts";
import { redactUrl } from "../lib/base/redact.ts";
import { CRAWL_ID_RULE, isCrawlId } from "../lib/base/spec.ts";
import {
  choiceFlag,
  durationFlag,
  helpText,
  intFlag,
  onInterrupt,
  parseFlags,
  runMain,
  urlFlag,
} from "../lib/cli/flags.ts";
import {
  crawlStatus,
  DEFAULT_WORKERS,
  MAX_WORKERS,
  rowsPerPage,
  VERIFY_EVERY_MS,
  VERIFY_ROWS_EVERY_MS,
} from "../lib/engine/mod.ts";
import { FOLLOW_POLL } from "../lib/base/retry_policy.ts";
import { runLocalCrawl } from "../lib/cli/local_crawl.ts";
import {
  outageLine,
  Pacer,
  type PaceState,
  parseHeader,
  pauseLine,
} from "../lib/sources/http/mod.ts";
import { quietWhileFailing } from "../lib/cli/outage_log.ts";
import { checkSinkRef, SINK_FORMS } from "../lib/sinks/mod.ts";
import { openSinks } from "../lib/cli/run_sinks.ts";
import {
  ESTIMATE_SAMPLE,
  estimateCrawl,
  estimateLine,
  fieldsNoneHas,
  sampleDocs,
} from "../lib/cli/estimate.ts";
import { Progress, summary, writeAll } from "../lib/cli/progress.ts";
import {
  HEADER_FLAG,
  RATE_FLAG,
  rateFromFlag,
  SPEC_FLAGS,
  specFromFlags,
} from "../lib/cli/spec_flags.ts";
import { checkPlanOrigin, readPlanFile } from "../lib/plan/plan_file.ts";

/** What `--npm` fills in: npm's replica, where it serves documents, and a plan's shard count. */
const NPM = {
  source: "https://replicate.npmjs.com/registry",
  docsUrl: "https://registry.npmjs.org",
  shards: 56,
} as const;

/** Crawls at least this large say what they will cost without being asked. */
const ESTIMATE_OVER_ITEMS = 1_000_000;

const FLAGS = {
  source: {
    type: "string",
    value: "URL",
    help: "database URL of the registry (its _all_docs is listed), or sqlite:FILE#table (a " +
      "table with an id column, and rev and doc if it has them)",
    default: "the bundled demo registry, served in-process",
  },
  npm: {
    type: "boolean",
    help: `npm's replica: --source ${NPM.source}, --shards ${NPM.shards}, with --docs its ` +
      `--docs-url ${NPM.docsUrl}; says what the crawl will cost before it starts`,
  },
  estimate: {
    type: "boolean",
    help: "say what the crawl will cost (requests, time at the pace, bytes) before it starts " +
      "(always with --npm, or past a million items)",
  },
  ...SPEC_FLAGS,
  kv: { type: "string", value: "PATH", help: "KV file holding the crawl", default: "crawl.kv" },
  plan: { type: "string", value: "FILE", help: "a plan from `deno task plan --out FILE`" },
  "crawl-id": {
    type: "string",
    value: "ID",
    help: "name of the crawl in the KV file",
    default: "derived from source and options",
  },
  dispatch: {
    type: "string",
    value: "MODE",
    help: "auto, queue (KV queue) or lease (in-process lease workers)",
    default: "auto: lease",
  },
  workers: {
    type: "string",
    value: "W",
    help: `shards this process runs at once (1-${MAX_WORKERS}): lease workers, or queue messages`,
    default: `the shard count, at most ${DEFAULT_WORKERS}`,
  },
  follow: {
    type: "boolean",
    help: "when done, keep following the registry's _changes, re-proving the copy (Ctrl-C)",
  },
  "follow-poll": {
    type: "string",
    value: "DURATION",
    help: "while following, look this often while the registry changes",
    default: "500ms",
  },
  "follow-idle": {
    type: "string",
    value: "DURATION",
    help: "while following, the longest pause between looks at an idle registry",
    default: "10s",
  },
  "verify-every": {
    type: "string",
    value: "DURATION",
    help: "while following, re-prove every range's count at least this often (0: never)",
    default: "10m",
  },
  "verify-rows-every": {
    type: "string",
    value: "DURATION",
    help: "while following (and when refreshing), compare every row with the registry's at " +
      "least this often (0: only after the registry numbered its changes anew)",
    default: "1d",
  },
  redirects: {
    type: "string",
    value: "POLICY",
    help: "follow redirects to the same origin only, or to any http(s) URL",
    default: "same-origin",
  },
  header: HEADER_FLAG,
  sink: {
    type: "string",
    value: "REF",
    help: `keep a table equal to the crawl as it runs and follows: ${SINK_FORMS} (id, rev, ` +
      "doc, error, too_large, seq, updated_at; no #table: the crawl's id); repeatable",
    multiple: true,
  },
  "sink-deletions": {
    type: "string",
    value: "HOW",
    help: "delete: rows the crawl no longer holds are deleted from a sink's table; tombstone: " +
      "kept, marked with deleted_at",
    default: "delete",
  },
  "sink-required": {
    type: "boolean",
    help: "stop when a sink refuses (a wrong password, no such database) instead of crawling " +
      "on without it, and fail when one cannot be brought level at the end",
  },
  rate: RATE_FLAG,
  "max-attempts": {
    type: "string",
    value: "A",
    help: "attempts per request before a transient failure counts",
    default: "8",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task crawl",
  summary:
    "Crawls every item of a registry into a KV file, in shards of exactly equal item count.\n" +
    "Running the same command again after a kill resumes where it stopped.",
  examples: [
    "deno task crawl                      # the bundled demo registry into ./crawl.kv",
    "deno task crawl --source http://127.0.0.1:5984/registry --shards 56 --kv npm.kv",
    "deno task crawl --source https://replicate.npmjs.com/registry --docs \\\n" +
    "    --docs-url https://registry.npmjs.org --kv npm.kv",
    "deno task crawl --npm --docs --kv npm.kv      # the same, with an estimate first",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  // Progress is drawn in place on a terminal; log lines then go above the drawing (through it)
  // when they would reach the same terminal, so that neither draws over the other.
  const tty = Deno.stdout.isTerminal();
  const progress: Progress = new Progress({
    tty,
    write: (t) => writeAll(Deno.stdout, new TextEncoder().encode(t)),
    pace: (): PaceState => pacer.state(),
    following: f.follow ?? false,
    size: () => {
      try {
        return Deno.consoleSize();
      } catch {
        return null; // not a terminal after all (a pipe): the default size
      }
    },
  });
  const logOver = tty && Deno.stderr.isTerminal();
  // Every line may hold what a registry said: shown as text, never run by the terminal.
  const log = (line: string) =>
    logOver ? progress.log(shownText(line)) : console.error(shownText(line));
  const plan = f.plan ? await readPlanFile(f.plan) : undefined;
  if (plan && f.shards !== undefined && Number(f.shards) !== plan.shards.length) {
    throw new UsageError(`--shards ${f.shards} disagrees with the plan's ${plan.shards.length}`);
  }
  const crawlId = f["crawl-id"];
  if (crawlId !== undefined && !isCrawlId(crawlId)) {
    throw new UsageError(`--crawl-id must be ${CRAWL_ID_RULE}`);
  }
  const dispatch = choiceFlag("dispatch", f.dispatch, ["auto", "queue", "lease"], "auto");
  const workers = f.workers === undefined
    ? undefined
    : intFlag("workers", f.workers, { fallback: 1, min: 1, max: MAX_WORKERS });
  const maxAttempts = intFlag("max-attempts", f["max-attempts"], { fallback: 8, min: 1, max: 100 });
  const followPollMs = durationFlag("follow-poll", f["follow-poll"], {
    fallbackMs: FOLLOW_POLL.pollMs,
    minMs: 50,
    maxMs: 3_600_000,
  });
  const followIdleMs = durationFlag("follow-idle", f["follow-idle"], {
    fallbackMs: FOLLOW_POLL.idleMs,
    minMs: 50,
    maxMs: 3_600_000,
  });
  const verifyEveryMs = durationFlag("verify-every", f["verify-every"], {
    fallbackMs: VERIFY_EVERY_MS,
    minMs: 1000,
    maxMs: 30 * 86_400_000,
  });
  const verifyRowsEveryMs = durationFlag("verify-rows-every", f["verify-rows-every"], {
    fallbackMs: VERIFY_ROWS_EVERY_MS,
    minMs: 1000,
    maxMs: 365 * 86_400_000,
  });
  // One pacer for the whole process: --rate, and each host's pace learned from its answers.
  const pacer = new Pacer({
    ratePerSecond: rateFromFlag(f.rate),
    breaker: { onPause: (p) => log(pauseLine(p)), onOutage: (o) => log(outageLine(o)) },
  });
  // While a host fails every request, its retry lines give way to the outage's own few lines.
  const quiet = quietWhileFailing(log, pacer.breaker);
  const redirects = choiceFlag("redirects", f.redirects, ["same-origin", "any"], "same-origin");
  if (f.npm && f.source !== undefined) {
    throw new UsageError("--npm is npm's replica: give --npm or --source, not both");
  }
  // --npm fills in what it names where the command line does not say otherwise.
  const asked = f.npm
    ? {
      ...f,
      source: NPM.source,
      shards: f.shards ?? String(NPM.shards),
      "docs-url": f["docs-url"] ?? (f.docs ? NPM.docsUrl : undefined),
    }
    : f;
  const given = asked.source === undefined ? undefined : urlFlag("source", asked.source);
  const spec = specFromFlags(asked, given ?? "demo:npm-names", { shards: plan?.shards.length });
  if (plan) checkPlanOrigin(plan.origin, { sourceUrl: spec.source, view: spec.view }, f.plan);
  const kvPath = f.kv ?? "crawl.kv";
  // What the command line says is read in full before any work starts (the demo registry too).
  const headers = (f.header ?? []).map(parseHeader);
  for (const ref of f.sink ?? []) {
    try {
      checkSinkRef(ref);
    } catch (err) {
      throw new UsageError((err as Error).message, { cause: err });
    }
  }
  const demo = given === undefined ? await startDemo(log) : undefined;
  log(`crawling ${given ? redactUrl(given) : spec.source} into ${kvPath}`);
  // Ctrl-C or SIGTERM: stop following, or stop the crawl letting its shards go at once (the
  // same command resumes it).
  // Sinks are opened before anything is crawled: one that refuses is one line now.
  const deletions = choiceFlag("sink-deletions", f["sink-deletions"], [
    "delete",
    "tombstone",
  ], "delete");
  const sinks = await openSinks(f.sink ?? [], {
    required: f["sink-required"] ?? false,
    log,
    tombstones: deletions === "tombstone",
  })
    .catch((err) => Promise.reject(new UsageError((err as Error).message, { cause: err })));
  const interrupt = new AbortController();
  const unlisten = onInterrupt(() => interrupt.abort());
  try {
    const res = await runLocalCrawl({
      kvPath,
      spec,
      sourceUrl: given ?? demo!.url,
      id: crawlId,
      plan,
      log: quiet,
      progress,
      dispatch: dispatch === "auto" ? undefined : dispatch,
      follow: f.follow ?? false,
      followPollMs,
      followIdleMs: Math.max(followPollMs, followIdleMs),
      verifyEveryMs,
      verifyRowsEveryMs,
      signal: interrupt.signal,
      sourceOptions: {
        maxAttempts,
        headers,
        pacer,
        ...(redirects === "any" ? { allowRedirect: (t: URL) => /^https?:$/.test(t.protocol) } : {}),
      },
      workers,
      sinks,
      sinksRequired: f["sink-required"] ?? false,
      onOpened: async (o) => {
        const estimate = f.npm || f.estimate || o.crawl.total >= ESTIMATE_OVER_ITEMS;
        if (!o.created || !(estimate || spec.docFields)) return;
        // Documents at the plan's cuts, spread over the key space, sampled once for both.
        const starts = (await crawlStatus(o.kv, o.crawl.id, { clock: SYSTEM_CLOCK })).shards
          .flatMap((s) => s.start === null ? [] : [s.start]);
        const every = Math.max(1, Math.ceil(starts.length / ESTIMATE_SAMPLE));
        const samples = spec.docs
          ? await sampleDocs(o.source, starts.filter((_, i) => i % every === 0))
          : [];
        const none = spec.docFields ? fieldsNoneHas(samples, spec.docFields) : [];
        if (none.length > 0) {
          log(
            `--doc-fields: none of the ${samples.length} documents sampled has ` +
              `${none.map((x) => JSON.stringify(x)).join(", ")}; check the names (the crawl ` +
              "keeps only _id and _rev of a document without them)",
          );
        }
        if (!estimate) return;
        const inFlight = o.workers * (spec.docs ? spec.concurrency : 1);
        const e = estimateCrawl({
          spec,
          total: o.crawl.total,
          ratePerSecond: pacer.state().ratePerSecond,
          inFlight,
          rowsPerPage: rowsPerPage(o.crawl, o.source, { docMode: o.crawl.docMode ?? undefined }),
        }, samples);
        log(estimateLine(e, { inFlight }));
      },
    });
    progress.end();
    console.log(shownText(summary(res.report, { ...res, pace: pacer.state() }), { lines: true }));
    return 0;
  } finally {
    // What ends the run (the summary, why it stopped) is printed below the last drawing.
    progress.end();
    unlisten();
    for (const sink of sinks) await sink.close().catch(() => {});
    await demo?.close();
  }
});

/**
 * Serves the bundled names in this process (the demo registry). The simulator (and its HTTP
 * framework) is loaded only here: a crawl of another registry starts without it.
 */
async function startDemo(log: (line: string) => void) {
  const [{ bundledNames }, { RegistryData, startRegistry }] = await Promise.all([
    import("../lib/sim/names.ts"),
    import("../lib/sim/registry/mod.ts"),
  ]);
  const data = new RegistryData(await bundledNames());
  const reg = await startRegistry(data, { db: "npm" });
  log(`demo registry: ${data.size} real npm names served at ${reg.url}`);
  return reg;
}
