/**
 * The deployable entry point: the HTTP API and status page, the Deno.cron jobs, and the queue
 * listener or lease workers. `deno task serve` runs it locally; Deno Deploy runs it as the app's
 * entrypoint. Configuration comes from the environment (see README): PORT, KV_PATH, CRAWL_TOKEN,
 * METRICS_TOKEN, ALLOWED_SOURCES, DISPATCH, WORKERS, CRAWL_SCHEDULE + CRAWL_SOURCE (+ CRAWL_SHARDS,
 * CRAWL_DOCS, CRAWL_KEEP).
 *
 * Locally, a configuration or start-up problem is one `error:` line and exit 1. On Deploy the
 * process is kept: the crons are registered all the same and log the problem every minute, and
 * every route answers 503 with it, so a misconfigured app is visible in its logs and cron list.
 */
import { errorLine } from "./lib/base/errors.ts";
import {
  configFromEnv,
  SERVE_HELP,
  type ServerConfig,
  type ServerRuntime,
  startServer,
} from "./lib/http/server.ts";

const onDeploy = Deno.env.get("DENO_DEPLOYMENT_ID") !== undefined;

if (Deno.args.includes("--help") || Deno.args.includes("-h")) {
  console.log(SERVE_HELP);
  Deno.exit(0);
}

const line = errorLine;

let config: ServerConfig | null = null;
let problem: string | null = null;
try {
  config = configFromEnv((k) => Deno.env.get(k), Deno.args, { onDeploy });
} catch (err) {
  problem = line(err);
}

if (problem !== null && !onDeploy) {
  console.error(`error: ${problem}`);
  Deno.exit(1);
}

/** On Deploy a broken configuration is kept visible: every request answers 503 with it. */
function serveProblem() {
  Deno.serve(() => Response.json({ error: `misconfigured: ${problem}` }, { status: 503 }));
}

// Started (not awaited) first, so that the crons below are still registered synchronously.
const runtime: Promise<ServerRuntime | null> = config
  ? startServer(config).catch((err) => {
    problem = line(err);
    if (!onDeploy) {
      console.error(`error: ${problem}`);
      Deno.exit(1);
    }
    serveProblem();
    return null;
  })
  : Promise.resolve(null);

if (onDeploy && problem !== null) serveProblem();

/** Runs a cron's work, or logs why it cannot (the configuration is wrong). */
async function tick(name: string, work: (rt: ServerRuntime) => Promise<unknown>) {
  const rt = await runtime;
  if (!rt) {
    console.error(`error: cron "${name}" cannot run: ${problem}`);
    return;
  }
  await work(rt);
}

// Deno.cron must be registered at module top level, before anything is awaited.
Deno.cron("watchdog", "* * * * *", () => tick("watchdog", (rt) => rt.watchdogTick()));
// On Deploy no process lives between requests: each tick drives a lease worker for up to ~50 s
// (it returns at once when no crawl is planning or running).
Deno.cron("lease tick", "* * * * *", () => tick("lease tick", (rt) => rt.leaseTick(50_000)));
if (config?.schedule) {
  Deno.cron(
    "scheduled recrawl",
    config.schedule.cron,
    () => tick("scheduled recrawl", (rt) => rt.recrawl()),
  );
}

// Ctrl-C or SIGTERM locally: workers let their shards go at once (other processes take them over
// without waiting for leases to expire), then the process ends.
if (!onDeploy) {
  const stop = async () => {
    await (await runtime)?.close().catch(() => {});
    Deno.exit(0);
  };
  for (const s of ["SIGINT", "SIGTERM"] as const) {
    if (Deno.build.os !== "windows" || s === "SIGINT") Deno.addSignalListener(s, () => void stop());
  }
}

await runtime;
