/**
 * The HTTP API, built by a factory and tested with `app.request()`:
 *
 *     GET    /healthz                     200, no token
 *     GET    /                            the status page (HTML), no token; it asks for one
 *     POST   /crawls                      {source, shards, ...} -> 202 {id, status}; 429 with
 *                                         too many active, 409 with too many stored
 *     GET    /crawls, /crawls/:id         list; status with per-shard progress, errors, splits
 *     POST   /crawls/:id/pause|resume|cancel
 *     DELETE /crawls/:id                  the crawl and everything it stored
 *     GET    /crawls/:id/items            items page by page (?limit=&cursor=)
 *     GET    /crawls/:id/plan.svg         the plan picture
 *     GET    /events                      server-sent events: crawls as they change (503
 *                                         beyond the open-stream bound)
 *     GET    /locate?source=&percentile=  the key at a rank or percentile, or a key's rank
 *     GET    /metrics                     Prometheus text (token, or METRICS_TOKEN)
 *     *      /mirror/...                  the served mirror (`lib/mirror/`), when given: its own
 *                                         read token, never the API token
 *
 * Every route but `/healthz` and `/` needs `Authorization: Bearer <token>` (compared in constant
 * time). Sources must sit under an allowed prefix. Bodies are size-limited and validated strictly
 * (zod stands in for a hand-written validator). One `onError` maps errors to statuses; answers never
 * echo the token or a source's credentials.
 *
 * The HTTP layer (`lib/http/`): this app, its routes, the server runtime behind `main.ts`, auth,
 * metrics and the status page.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { type Context, Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import {
  BusyError,
  ConflictError,
  errorLine,
  FatalError,
  InputError,
  NotFoundError,
  PermanentError,
  TransientError,
} from "../base/errors.ts";
import type { Source } from "../plan/source.ts";
import { CouchSource } from "../sources/couch/mod.ts";
import type { Dispatcher } from "../engine/mod.ts";
import { safeEqual } from "./auth.ts";
import { addCrawlRoutes } from "./crawl_routes.ts";
import { addEventRoutes, StatusFeed } from "./events.ts";
import { addLocateRoute } from "./locate_route.ts";
import { Metrics, renderMetrics } from "./metrics.ts";
import type { PaceState } from "../sources/http/mod.ts";
import { FAVICON, statusPage } from "./status_page.ts";

/** What the app needs (all injected). */
export interface AppDeps {
  /** The store. */
  kv: Deno.Kv;
  /** The API token; null disables auth (only for `--insecure-local` on 127.0.0.1). */
  token: string | null;
  /** A token that may read `/metrics` only (a scraper's). @default none: the API token */
  metricsToken?: string | null;
  /** URL prefixes a crawl may target. */
  allowedSources: readonly string[];
  /** Where work goes: planning new crawls, resumed shards. */
  dispatcher: Dispatcher;
  /** Opens a source for `/locate` (an allowed, normalized URL). @default a CouchSource */
  openSource?: (url: string) => Source;
  /** What this process saw of registries (for `/metrics`). @default an empty one */
  metrics?: Metrics;
  /**
   * The pace of this process's requests (`Pacer.state`), shown with each crawl's status for the
   * hosts it asks (`only`). @default none shown
   */
  pace?: (only: readonly string[]) => PaceState;
  /** What records' times and the event feed's ticks are read from. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** Largest request body, in bytes. @default 16384 */
  maxBodyBytes?: number;
  /** How often `/events` looks for changes, in milliseconds. @default 1000 */
  eventsEveryMs?: number;
  /** Event streams open at once (503 beyond). @default MAX_EVENT_STREAMS (200) */
  maxEventStreams?: number;
  /**
   * The feed behind `/events`, when the caller must close it (a stopping server ends the streams).
   * @default one made here from `eventsEveryMs` and `maxEventStreams`
   */
  statusFeed?: StatusFeed;
  /**
   * The audit log: one line per request that changes state (method, path, status) and per request
   * refused for its token; never a token, a body or a query. @default no log
   */
  audit?: (line: string) => void;
  /** Crawls planning, running or paused at once; a new one beyond is a 429. @default Infinity */
  maxActiveCrawls?: number;
  /** Crawls stored; a new one beyond is a 409 (delete finished ones). @default Infinity */
  maxStoredCrawls?: number;
  /** The sinks a crawl may name in `sinks` (`SINKS`' names). @default none */
  sinkNames?: readonly string[];
  /**
   * The served mirror's app (`createMirrorApp`), answered under `/mirror/` with the prefix taken
   * off; it checks its own read token. @default none: `/mirror/` is a 404
   */
  mirror?: { fetch(req: Request): Response | Promise<Response> };
}

function errorStatus(err: Error): 400 | 404 | 409 | 429 | 502 | 503 | 500 {
  if (err instanceof InputError) return 400;
  if (err instanceof BusyError) return 429;
  if (err instanceof NotFoundError) return 404;
  if (err instanceof ConflictError) return 409;
  // The registry behind a request failed: a bad gateway, or (for now) an unavailable one.
  if (err instanceof FatalError || err instanceof PermanentError) return 502;
  if (err instanceof TransientError) return 503;
  return 500;
}

/**
 * Builds the API app.
 *
 * @example
 * ```ts
 * const app = createApp({ kv, token: "secret", allowedSources: [url], dispatcher });
 * const res = await app.request("/crawls", { headers: { authorization: "Bearer secret" } });
 * ```
 */
export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  const clock = deps.clock ?? SYSTEM_CLOCK;
  const metrics = deps.metrics ?? new Metrics();

  app.onError((err, c) => {
    if (err instanceof HTTPException) return c.json({ error: err.message }, err.status);
    const code = errorStatus(err);
    if (code === 500) {
      console.error(
        `internal error on ${c.req.method} ${c.req.path}: ${errorLine(err)}`,
      );
      return c.json({ error: "internal error" }, 500);
    }
    return c.json({ error: errorLine(err) }, code);
  });
  app.notFound((c) => c.json({ error: "no such route" }, 404));
  if (deps.audit) app.use("*", auditRequests(deps.audit));

  app.get("/healthz", (c) => c.json({ ok: true }));
  const page = statusPage({ tokenRequired: deps.token !== null });
  app.get("/", (c) => c.html(page));
  // The page's icon: a small mark, so browsers stop asking (and logs stop showing a 404).
  app.get("/favicon.ico", (c) =>
    c.body(FAVICON, 200, {
      "content-type": "image/svg+xml",
      "cache-control": "public, max-age=86400",
    }));
  app.get(
    "/metrics",
    authenticate([deps.token, deps.metricsToken ?? null]),
    async (c) =>
      c.text(await renderMetrics(deps.kv, metrics, { clock }), 200, {
        "content-type": "text/plain; version=0.0.4",
      }),
  );
  for (const path of ["/crawls", "/crawls/*", "/events", "/locate"]) {
    app.use(path, authenticate([deps.token]));
  }
  addCrawlRoutes(app, {
    kv: deps.kv,
    allowedSources: deps.allowedSources,
    dispatcher: deps.dispatcher,
    clock,
    pace: deps.pace,
    maxBodyBytes: deps.maxBodyBytes ?? 16_384,
    limits: { maxActiveCrawls: deps.maxActiveCrawls, maxStoredCrawls: deps.maxStoredCrawls },
    sinkNames: deps.sinkNames ?? [],
  });
  addEventRoutes(
    app,
    deps.statusFeed ?? new StatusFeed(deps.kv, {
      clock,
      everyMs: deps.eventsEveryMs,
      maxListeners: deps.maxEventStreams,
    }),
  );
  addLocateRoute(app, {
    allowedSources: deps.allowedSources,
    openSource: deps.openSource ?? ((url) => new CouchSource(url)),
  });
  const mirror = deps.mirror;
  if (mirror) {
    const answer = (c: Context) => {
      const url = new URL(c.req.url);
      url.pathname = url.pathname.slice("/mirror".length) || "/";
      const raw = c.req.raw;
      // Not `new Request(url, raw)`: that would carry the request's signal along.
      const body = raw.method === "GET" || raw.method === "HEAD" ? null : raw.body;
      return mirror.fetch(
        new Request(
          url,
          { method: raw.method, headers: raw.headers, body, duplex: "half" } as RequestInit,
        ),
      );
    };
    app.all("/mirror", answer);
    app.all("/mirror/*", answer);
  }
  return app;
}

/** Bearer auth against any of `tokens` (null entries ignored; none at all: open). */
function authenticate(tokens: (string | null)[]) {
  const accepted = tokens.filter((t): t is string => t !== null);
  return async (c: Context, next: () => Promise<void>) => {
    if (accepted.length === 0 && tokens[0] === null) return await next();
    const m = /^Bearer (.+)$/.exec(c.req.header("authorization") ?? "");
    let ok = false;
    for (const t of accepted) ok = (m !== null && await safeEqual(m[1], t)) || ok;
    if (!ok) {
      return c.json({ error: "missing or wrong bearer token" }, 401, {
        "www-authenticate": 'Bearer realm="rankcrawl"',
      });
    }
    await next();
  };
}

/** The audit middleware: a line per state-changing request and per refused token (see AppDeps). */
function auditRequests(
  audit: (line: string) => void,
): (c: Context, next: () => Promise<void>) => Promise<void> {
  return async (c, next) => {
    await next();
    const { method, path } = c.req;
    const status = c.res.status;
    // The mirror's POSTs (_all_docs, _changes, _bulk_get) are reads; its PUTs (_local) are not.
    const reads = method === "GET" || method === "HEAD" ||
      (method === "POST" && path.startsWith("/mirror/"));
    if (status === 401) audit(`audit: ${method} ${path} refused: missing or wrong token`);
    else if (!reads) audit(`audit: ${method} ${path} ${status}`);
  };
}
