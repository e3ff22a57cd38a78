/**
 * The server runtime behind `main.ts`: configuration from the environment, KV, the app, the
 * dispatch mode (queue where KV queues exist, lease workers elsewhere), and the work the cron jobs
 * do. `main.ts` only registers the crons and calls {@linkcode startServer}.
 *
 * @module
 */
import { createApp } from "./app.ts";
import { isAllowedSource, parseAllowedSources } from "./auth.ts";
import { UsageError } from "../base/errors.ts";
import { buildSpec, SPEC_DEFAULTS, SPEC_LIMITS } from "../base/spec.ts";
import { createCrawl } from "../engine/coordinator.ts";
import { sourceOpener } from "../engine/open_source.ts";
import { createRuntime } from "../engine/runtime.ts";

/** Server configuration. */
export interface ServerConfig {
  /** Port to listen on (0 = any free one). */
  port: number;
  /** Address to bind. */
  hostname: string;
  /** KV path or KV Connect URL; undefined = the platform default. */
  kvPath?: string;
  /** API token; null only with `--insecure-local`. */
  token: string | null;
  /** URL prefixes crawls may target. */
  allowedSources: string[];
  /** How shard work reaches workers. */
  dispatch: "queue" | "lease";
  /** Background lease workers in this process (lease mode, not on Deploy). */
  workers: number;
  /** A scheduled recrawl (`CRAWL_SCHEDULE` and friends), if configured. */
  schedule?: { cron: string; source: string; shards: number; docs: boolean };
}

/**
 * Reads the configuration. Without `CRAWL_TOKEN` the server refuses to start unless
 * `--insecure-local` is given, which also binds it to 127.0.0.1 only.
 * @throws UsageError with a one-line reason for anything malformed or unsafe.
 */
export function configFromEnv(
  env: (name: string) => string | undefined,
  args: readonly string[],
  options: { onDeploy: boolean },
): ServerConfig {
  const insecure = args.includes("--insecure-local");
  const unknown = args.filter((a) => a !== "--insecure-local");
  if (unknown.length) throw new UsageError(`unknown argument ${unknown[0]}`);
  const token = env("CRAWL_TOKEN") || null;
  if (token === null && !insecure) {
    throw new UsageError(
      "CRAWL_TOKEN is not set; refusing to start (use --insecure-local to serve on 127.0.0.1 without a token)",
    );
  }
  const portRaw = env("PORT") ?? "8000";
  if (!/^\d+$/.test(portRaw) || Number(portRaw) > 65535) {
    throw new UsageError(`PORT is not a port: ${portRaw}`);
  }
  let allowedSources: string[];
  try {
    allowedSources = parseAllowedSources(env("ALLOWED_SOURCES"));
  } catch (err) {
    throw new UsageError(`ALLOWED_SOURCES: ${(err as Error).message}`);
  }
  const kvPath = env("KV_PATH") || undefined;
  const remoteKv = kvPath !== undefined && /^https?:\/\//.test(kvPath);
  const dispatchRaw = env("DISPATCH") ?? "auto";
  if (!["auto", "queue", "lease"].includes(dispatchRaw)) {
    throw new UsageError(`DISPATCH must be auto, queue or lease, got ${dispatchRaw}`);
  }
  const dispatch = dispatchRaw === "auto"
    ? (options.onDeploy || remoteKv ? "lease" : "queue")
    : dispatchRaw as "queue" | "lease";
  const workersRaw = env("WORKERS") ?? (options.onDeploy ? "0" : "4");
  if (!/^\d+$/.test(workersRaw)) throw new UsageError(`WORKERS is not a count: ${workersRaw}`);
  let schedule: ServerConfig["schedule"];
  const cron = env("CRAWL_SCHEDULE");
  if (cron) {
    const source = env("CRAWL_SOURCE");
    if (!source) throw new UsageError("CRAWL_SCHEDULE needs CRAWL_SOURCE");
    const shards = Number(env("CRAWL_SHARDS") ?? String(SPEC_DEFAULTS.shards));
    const { min, max } = SPEC_LIMITS.shards;
    if (!Number.isInteger(shards) || shards < min || shards > max) {
      throw new UsageError(`CRAWL_SHARDS must be a whole number from ${min} to ${max}`);
    }
    schedule = { cron, source, shards, docs: env("CRAWL_DOCS") === "true" };
  }
  return {
    port: Number(portRaw),
    hostname: insecure ? "127.0.0.1" : "0.0.0.0",
    kvPath,
    token,
    allowedSources,
    dispatch,
    workers: Number(workersRaw),
    schedule,
  };
}

/** A running server and the hooks its cron jobs call. */
export interface ServerRuntime {
  /** Where the server listens. */
  url: string;
  /** The watchdog: re-dispatch stalled shards, finish completed crawls. */
  watchdogTick(): Promise<void>;
  /** Lease mode: run a lease worker for about `ms` (a Deploy cron tick). */
  leaseTick(ms: number): Promise<void>;
  /** Scheduled recrawl: create today's crawl of the configured source. */
  recrawl(): Promise<void>;
  /** Stops serving, stops workers and closes KV. */
  close(): Promise<void>;
}

/** Opens KV, builds the app and the engine (`createRuntime`), and serves. */
export async function startServer(
  config: ServerConfig,
  options: { log?: (line: string) => void; now?: () => number } = {},
): Promise<ServerRuntime> {
  const now = options.now ?? Date.now;
  const log = options.log ?? ((l: string) => console.error(l));
  const kv = await Deno.openKv(config.kvPath);
  const runtime = createRuntime({
    kv,
    // A registry may redirect only inside ALLOWED_SOURCES: no hop can leave the allowlist.
    openSource: sourceOpener({
      allowRedirect: (target) => isAllowedSource(target.href, config.allowedSources),
    }),
    dispatch: config.dispatch,
    workers: config.workers,
    log,
    now: options.now,
    label: "server",
    onEvent: (e) => {
      if (e.kind === "crawl-failed") log(`crawl ${e.crawlId} failed: ${e.error}`);
    },
  });
  const app = createApp({
    kv,
    token: config.token,
    allowedSources: config.allowedSources,
    dispatcher: runtime.dispatcher,
    startPlanning: (id) => runtime.dispatcher.plan(id),
  });
  const server = Deno.serve({
    port: config.port,
    hostname: config.hostname,
    onListen: () => {},
  }, app.fetch);
  const addr = server.addr as Deno.NetAddr;
  const url = `http://${addr.hostname}:${addr.port}`;
  log(`listening on ${url} (dispatch ${config.dispatch}${config.token ? "" : ", no token"})`);
  return {
    url,
    watchdogTick: async () => {
      const n = await runtime.watchdogTick({ stallMs: 60_000 });
      if (n) log(`watchdog: re-dispatched ${n} stalled shards`);
    },
    leaseTick: (ms) => runtime.leaseTick(ms),
    recrawl: async () => {
      const s = config.schedule;
      if (!s) return;
      const day = new Date(now()).toISOString().slice(0, 16).replace(/[-:T]/g, "");
      const spec = buildSpec({ source: s.source, shards: s.shards, docs: s.docs });
      const { crawl, created } = await createCrawl(kv, spec, { id: `scheduled-${day}` });
      if (created) await runtime.dispatcher.plan(crawl.id);
      log(`scheduled crawl ${crawl.id} (${crawl.status})`);
    },
    close: async () => {
      await runtime.close();
      await server.shutdown();
      kv.close();
      await runtime.finished;
    },
  };
}
