/**
 * The deployable entry point: Hono app + Deno.cron jobs + queue listener (or lease workers).
 * `deno task serve` runs it locally; Deno Deploy runs it as the entrypoint. Configuration comes from
 * the environment (see README): PORT, KV_PATH, CRAWL_TOKEN, ALLOWED_SOURCES, DISPATCH, WORKERS,
 * CRAWL_SCHEDULE + CRAWL_SOURCE (+ CRAWL_SHARDS, CRAWL_DOCS).
 */
import { configFromEnv, type ServerRuntime, startServer } from "./lib/http/server.ts";

const onDeploy = Deno.env.get("DENO_DEPLOYMENT_ID") !== undefined;
let config;
try {
  config = configFromEnv((k) => Deno.env.get(k), Deno.args, { onDeploy });
} catch (err) {
  console.error(`error: ${(err as Error).message}`);
  Deno.exit(1);
}

// Started (not awaited) first, so that the crons below are still registered synchronously.
const runtime: Promise<ServerRuntime> = startServer(config);
const ready = () => runtime;

// Deno.cron must be registered at module top level, before anything is awaited.
Deno.cron("watchdog", "* * * * *", async () => {
  await (await ready()).watchdogTick();
});
Deno.cron("lease tick", "* * * * *", async () => {
  // On Deploy no process lives between requests: each tick drives lease workers for ~50 s.
  await (await ready()).leaseTick(50_000);
});
if (config.schedule) {
  Deno.cron("scheduled recrawl", config.schedule.cron, async () => {
    await (await ready()).recrawl();
  });
}

await runtime;
