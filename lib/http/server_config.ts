/**
 * The server's configuration, read from the environment (`deno task serve --help` lists it): the
 * token and the allowlist, the port and KV, the dispatch mode and workers, the bounds the API
 * keeps, a scheduled recrawl and the sinks crawls may name. Every problem is one line naming the variable.
 *
 * @module
 */
import { isAllowedSource, parseAllowedSources } from "./auth.ts";
import { UsageError } from "../base/errors.ts";
import { SINK_NAME_PATTERN, SPEC_DEFAULTS, SPEC_LIMITS } from "../base/spec.ts";
import { parseSinkRef, SINK_FORMS } from "../sinks/mod.ts";
import { redactUrl } from "../base/redact.ts";
import {
  DEFAULT_WORKERS,
  MAX_WORKERS,
  VERIFY_EVERY_MS,
  VERIFY_ROWS_EVERY_MS,
} from "../engine/mod.ts";
import { FOLLOW_POLL } from "../base/retry_policy.ts";
import { normalizeSource } from "./crawl_routes.ts";
import { MAX_EVENT_STREAMS } from "./events.ts";

/** Shortest API or metrics token accepted when serving beyond 127.0.0.1. */
export const MIN_TOKEN_CHARS = 16;

/** Crawls planning, running or paused at once that the API accepts, by default. */
export const DEFAULT_MAX_ACTIVE = 16;
/** Crawls the API keeps in KV, by default. */
export const DEFAULT_MAX_STORED = 1000;

/** `deno task serve --help`: the server is configured by its environment. */
export const SERVE_HELP = `usage: deno task serve [--insecure-local]

Serves the HTTP API and status page, runs crawls (KV queue locally, lease workers on Deno Deploy)
and the cron jobs (watchdog, lease tick, scheduled recrawl).

environment:
  CRAWL_TOKEN        API bearer token, at least ${MIN_TOKEN_CHARS} characters (required unless
                     --insecure-local)
  METRICS_TOKEN      a token that may only read /metrics (default: none, the API token only)
  ALLOWED_SOURCES    comma-separated URL prefixes crawls may target (default: none)
  PORT               port to listen on (default: 8000)
  KV_PATH            KV file or KV Connect URL (default: the platform's KV)
  DISPATCH           auto, queue or lease (default: auto: lease on Deploy and KV Connect)
  WORKERS            shards this process runs at once, up to ${MAX_WORKERS}: lease workers, or queue
                     messages handled at once (at least 1) (default: ${DEFAULT_WORKERS}; 0 on Deploy)
  CRAWL_SCHEDULE     cron expression of a scheduled recrawl (default: none)
  CRAWL_SOURCE       the scheduled crawl's database URL (needed with CRAWL_SCHEDULE)
  CRAWL_SHARDS       its shards (default: ${SPEC_DEFAULTS.shards})
  CRAWL_DOCS         true to fetch documents too (default: false)
  CRAWL_KEEP         finished scheduled crawls kept; older ones are deleted (default: 7)
  MAX_ACTIVE_CRAWLS  crawls planning, running or paused at once; POST /crawls beyond is a 429
                     (default: ${DEFAULT_MAX_ACTIVE})
  MAX_STORED_CRAWLS  crawls kept in KV; POST /crawls beyond is a 409 (default: ${DEFAULT_MAX_STORED})
  MAX_EVENT_STREAMS  /events streams open at once; beyond is a 503 (default: ${MAX_EVENT_STREAMS})
  FOLLOW_POLL_MS     followed crawls look at their registry this often while it changes; 0: only
                     the watchdog's cron tick follows them (default: ${FOLLOW_POLL.pollMs}; 0 on Deploy)
  FOLLOW_IDLE_MS     the longest pause between looks at an idle registry (default: ${FOLLOW_POLL.idleMs})
  VERIFY_EVERY_MS    every range's count of a followed crawl re-proven at least this often;
                     0: never (default: ${VERIFY_EVERY_MS})
  VERIFY_ROWS_EVERY_MS  every row of a followed crawl compared with the registry's at least
                     this often; 0: only after its feed forgot where the crawl stood
                     (default: ${VERIFY_ROWS_EVERY_MS})
  RATE               requests a second this process sends at most, every crawl and host together;
                     hosts that push back are slowed further on their own (default: no cap)
  SINKS              sinks crawls may name in "sinks", as NAME=REF separated by spaces, REF
                     sqlite:PATH or postgres://USER:PASSWORD@HOST/DB (no #table: each crawl gets
                     a table named after it); a sink that refuses at start stops the server
                     (default: none)
  SINK_DELETIONS     delete (rows a crawl no longer holds leave its sinks' tables) or tombstone
                     (kept, marked with deleted_at) (default: delete)
  MIRROR_TOKEN       serves every documents crawl read-only under /mirror/ (a CouchDB database
                     per crawl, /mirror/npm/ an npm registry); readers send this token, which
                     must differ from CRAWL_TOKEN (default: no mirror)
  MIRROR_PUBLIC      1: serves the mirror with reads open to anyone (default: no mirror)
  MIRROR_NPM         the crawl /mirror/npm/ answers from (default: the newest done documents
                     crawl)

flags:
  --insecure-local   no token, bound to 127.0.0.1 only
  --help, -h         show this help

example:
  CRAWL_TOKEN=$(openssl rand -hex 16) ALLOWED_SOURCES=http://127.0.0.1:5984/ deno task serve`;

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
  /** Shards this process runs at once: lease workers, or queue messages handled at once. */
  workers: number;
  /** A scheduled recrawl (`CRAWL_SCHEDULE` and friends), if configured. */
  schedule?: { cron: string; source: string; shards: number; docs: boolean; keep: number };
  /** A token that may only read `/metrics`. */
  metricsToken?: string | null;
  /** Bounds the API keeps (`MAX_*`); each has the default named in `SERVE_HELP`. */
  bounds?: { maxActiveCrawls: number; maxStoredCrawls: number; maxEventStreams: number };
  /**
   * How followed crawls are followed (`FOLLOW_*`, `VERIFY_EVERY_MS`); `pollMs` 0: only by the
   * watchdog's cron tick (Deploy). @default the watchdog only, every range re-proven in 10 min
   */
  follow?: { pollMs: number; idleMs: number; verifyEveryMs: number; verifyRowsEveryMs: number };
  /** `RATE`: requests a second this process sends at most, or null. @default null */
  ratePerSecond?: number | null;
  /**
   * `SINKS`: the sinks crawls may name, each a name and its reference (which may hold a password:
   * never shown). @default none
   */
  sinks?: { name: string; ref: string }[];
  /** `SINK_DELETIONS=tombstone`: the sinks keep deleted rows, marked. @default false */
  sinkTombstones?: boolean;
  /**
   * The served mirror (`MIRROR_*`): its read token (null: reads open) and the crawl `/mirror/npm/`
   * answers from (null: the newest done documents crawl). @default none: `/mirror/` is not served
   */
  mirror?: { readToken: string | null; npmCrawl: string | null } | null;
}

/**
 * The sinks `SINKS` names: `NAME=REF` entries separated by white space, each name once, each
 * reference an SQLite file or a PostgreSQL database without `#table`.
 * @throws UsageError naming the entry, never showing a password.
 */
export function parseSinks(raw: string | undefined): { name: string; ref: string }[] {
  const out: { name: string; ref: string }[] = [];
  for (const entry of (raw ?? "").split(/\s+/).filter(Boolean)) {
    const eq = entry.indexOf("=");
    const name = eq < 0 ? "" : entry.slice(0, eq);
    const ref = entry.slice(eq + 1);
    if (!SINK_NAME_PATTERN.test(name)) {
      throw new UsageError(
        "SINKS: each entry is NAME=REF, NAME 1-32 letters, digits, _ or - " +
          `(entry ${out.length + 1} is not)`,
      );
    }
    if (out.some((s) => s.name === name)) throw new UsageError(`SINKS: ${name} is named twice`);
    try {
      const parsed = parseSinkRef(ref);
      if (parsed === null) {
        throw new UsageError(`a sink is ${SINK_FORMS.replaceAll("#table", "")}`);
      }
      if (parsed.table !== null) {
        throw new UsageError("names no #table: each crawl gets its own, named after it");
      }
    } catch (err) {
      throw new UsageError(
        `SINKS ${name}: ${(err as Error).message.replace(/^--sink \S+: /, "")}`,
        {
          cause: err,
        },
      );
    }
    out.push({ name, ref });
  }
  return out;
}

const CRON_FIELDS: [string, number, number][] = [
  ["minute", 0, 59],
  ["hour", 0, 23],
  ["day of month", 1, 31],
  ["month", 1, 12],
  ["day of week", 0, 7],
];

/**
 * Checks a cron expression the way `Deno.cron` takes it (five fields of `*`, numbers, ranges,
 * lists and steps), so that a typo is one line at start-up rather than an exception later.
 * @throws UsageError naming the field.
 */
export function checkCron(expr: string): string {
  const fields = expr.trim().split(/\s+/);
  if (fields.length !== 5) {
    throw new UsageError(
      `CRAWL_SCHEDULE must have 5 fields (minute hour day month weekday): "${expr}"`,
    );
  }
  fields.forEach((field, i) => {
    const [name, min, max] = CRON_FIELDS[i];
    for (const part of field.split(",")) {
      const m = /^(\*|(\d+)(?:-(\d+))?)(?:\/(\d+))?$/.exec(part);
      const nums = m ? [m[2], m[3]].filter((v) => v !== undefined).map(Number) : [];
      if (!m || nums.some((v) => v < min || v > max) || m[4] === "0") {
        throw new UsageError(`CRAWL_SCHEDULE: bad ${name} field "${field}" (${min}-${max})`);
      }
    }
  });
  return expr.trim();
}

function scheduleFromEnv(env: (name: string) => string | undefined): ServerConfig["schedule"] {
  const cron = env("CRAWL_SCHEDULE");
  if (!cron) return undefined;
  const raw = env("CRAWL_SOURCE");
  if (!raw) throw new UsageError("CRAWL_SCHEDULE needs CRAWL_SOURCE");
  let source: string;
  try {
    source = normalizeSource(raw, "CRAWL_SOURCE");
  } catch (err) {
    throw new UsageError(`${(err as Error).message}: "${raw}"`);
  }
  const count = (name: string, fallback: number, min: number, max: number) => {
    const v = Number(env(name) ?? String(fallback));
    if (!Number.isInteger(v) || v < min || v > max) {
      throw new UsageError(`${name} must be a whole number from ${min} to ${max}`);
    }
    return v;
  };
  const { min, max } = SPEC_LIMITS.shards;
  return {
    cron: checkCron(cron),
    source,
    shards: count("CRAWL_SHARDS", SPEC_DEFAULTS.shards, min, max),
    docs: env("CRAWL_DOCS") === "true",
    keep: count("CRAWL_KEEP", 7, 1, 10_000),
  };
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
  for (const name of ["CRAWL_TOKEN", "METRICS_TOKEN", "MIRROR_TOKEN"]) {
    const value = env(name);
    // Beyond loopback a short token is guessed; length is what can be checked without the token.
    if (value && !insecure && value.length < MIN_TOKEN_CHARS) {
      throw new UsageError(
        `${name} is shorter than ${MIN_TOKEN_CHARS} characters; refusing to serve beyond ` +
          `127.0.0.1 with it (e.g. openssl rand -hex 24)`,
      );
    }
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
  const { dispatch, workers } = dispatchFromEnv(env, { onDeploy: options.onDeploy, remoteKv });
  const schedule = scheduleFromEnv(env);
  const bounds = boundsFromEnv(env);
  const sinks = parseSinks(env("SINKS"));
  if (schedule && !isAllowedSource(schedule.source, allowedSources)) {
    throw new UsageError(`CRAWL_SOURCE ${redactUrl(schedule.source)} is outside ALLOWED_SOURCES`);
  }
  return {
    port: Number(portRaw),
    hostname: insecure ? "127.0.0.1" : "0.0.0.0",
    kvPath,
    token,
    allowedSources,
    dispatch,
    workers,
    schedule,
    metricsToken: env("METRICS_TOKEN") || null,
    bounds,
    follow: followFromEnv(env, options.onDeploy),
    ratePerSecond: rateFromEnv(env("RATE")),
    sinks,
    sinkTombstones: sinkDeletions(env("SINK_DELETIONS")) === "tombstone",
    mirror: mirrorFromEnv(env, token),
  };
}

/** `MIRROR_TOKEN`, `MIRROR_PUBLIC`, `MIRROR_NPM`: the served mirror, or null when not asked. */
function mirrorFromEnv(
  env: (name: string) => string | undefined,
  apiToken: string | null,
): ServerConfig["mirror"] {
  const token = env("MIRROR_TOKEN") || null;
  const open = env("MIRROR_PUBLIC");
  if (open !== undefined && open !== "" && open !== "1" && open !== "0") {
    throw new UsageError(`MIRROR_PUBLIC must be 1 or 0, got "${open.slice(0, 20)}"`);
  }
  if (token !== null && open === "1") {
    throw new UsageError("MIRROR_TOKEN and MIRROR_PUBLIC=1 both set: pick one");
  }
  if (token !== null && token === apiToken) {
    throw new UsageError(
      "MIRROR_TOKEN must differ from CRAWL_TOKEN: readers of the mirror would hold the token " +
        "that starts and deletes crawls",
    );
  }
  const npm = env("MIRROR_NPM") || null;
  if (token === null && open !== "1") {
    if (npm !== null) throw new UsageError("MIRROR_NPM needs MIRROR_TOKEN or MIRROR_PUBLIC=1");
    return null;
  }
  return { readToken: token, npmCrawl: npm };
}

/** `SINK_DELETIONS`: how the sinks keep rows a crawl no longer holds. */
function sinkDeletions(raw: string | undefined): "delete" | "tombstone" {
  if (raw === undefined || raw === "" || raw === "delete") return "delete";
  if (raw === "tombstone") return raw;
  throw new UsageError(`SINK_DELETIONS must be delete or tombstone, got "${raw}"`);
}

/** `RATE`: requests a second, or null when unset or empty. */
function rateFromEnv(raw: string | undefined): number | null {
  if (raw === undefined || raw.trim() === "") return null;
  const { min, max } = SPEC_LIMITS.rate;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new UsageError(`RATE must be a number of requests a second from ${min} to ${max}`);
  }
  return n;
}

/** How followed crawls are followed: pollMs 0 when the cron tick alone follows them. */
function followFromEnv(
  env: (name: string) => string | undefined,
  onDeploy: boolean,
): ServerConfig["follow"] {
  const ms = (name: string, fallback: number, max: number) => {
    const raw = env(name) ?? String(fallback);
    if (!/^\d+$/.test(raw) || Number(raw) > max) {
      throw new UsageError(
        `${name} must be a whole number of ms up to ${max}, got ${raw}`,
      );
    }
    return Number(raw);
  };
  const pollMs = ms("FOLLOW_POLL_MS", onDeploy ? 0 : FOLLOW_POLL.pollMs, 3_600_000);
  const idleMs = ms("FOLLOW_IDLE_MS", FOLLOW_POLL.idleMs, 3_600_000);
  const verifyEveryMs = ms("VERIFY_EVERY_MS", VERIFY_EVERY_MS, 30 * 86_400_000);
  const verifyRowsEveryMs = ms("VERIFY_ROWS_EVERY_MS", VERIFY_ROWS_EVERY_MS, 365 * 86_400_000);
  return { pollMs, idleMs: Math.max(pollMs, idleMs), verifyEveryMs, verifyRowsEveryMs };
}

function dispatchFromEnv(
  env: (name: string) => string | undefined,
  o: { onDeploy: boolean; remoteKv: boolean },
): Pick<ServerConfig, "dispatch" | "workers"> {
  const dispatchRaw = env("DISPATCH") ?? "auto";
  if (!["auto", "queue", "lease"].includes(dispatchRaw)) {
    throw new UsageError(`DISPATCH must be auto, queue or lease, got ${dispatchRaw}`);
  }
  const dispatch = dispatchRaw === "auto"
    ? (o.onDeploy || o.remoteKv ? "lease" : "queue")
    : dispatchRaw as "queue" | "lease";
  const workersRaw = env("WORKERS") ?? (o.onDeploy ? "0" : String(DEFAULT_WORKERS));
  const least = dispatch === "queue" ? 1 : 0;
  if (!/^\d+$/.test(workersRaw) || Number(workersRaw) < least || Number(workersRaw) > MAX_WORKERS) {
    throw new UsageError(
      `WORKERS must be a whole number from ${least} to ${MAX_WORKERS}` +
        `${least ? " with queue dispatch" : ""}, got ${workersRaw}`,
    );
  }
  return { dispatch, workers: Number(workersRaw) };
}

function boundsFromEnv(env: (name: string) => string | undefined): ServerConfig["bounds"] {
  const bound = (name: string, fallback: number) => {
    const raw = env(name) ?? String(fallback);
    if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 1_000_000) {
      throw new UsageError(`${name} must be a whole number from 1 to 1000000, got ${raw}`);
    }
    return Number(raw);
  };
  return {
    maxActiveCrawls: bound("MAX_ACTIVE_CRAWLS", DEFAULT_MAX_ACTIVE),
    maxStoredCrawls: bound("MAX_STORED_CRAWLS", DEFAULT_MAX_STORED),
    maxEventStreams: bound("MAX_EVENT_STREAMS", MAX_EVENT_STREAMS),
  };
}
