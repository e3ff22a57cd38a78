/**
 * The server runtime behind `main.ts`: KV, the app, the
 * dispatch mode (queue where KV queues exist, lease workers elsewhere), and the work the cron jobs
 * do, scheduled recrawls and their retention included. `main.ts` only registers the crons and calls
 * {@linkcode startServer}. Every configuration or start-up problem is one line naming its cause.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { createApp } from "./app.ts";
import { type ServerConfig } from "./server_config.ts";

export {
  checkCron,
  configFromEnv,
  DEFAULT_MAX_ACTIVE,
  DEFAULT_MAX_STORED,
  parseSinks,
  SERVE_HELP,
  type ServerConfig,
} from "./server_config.ts";
import { isAllowedSource } from "./auth.ts";
import { errorLine, PermanentError, UsageError } from "../base/errors.ts";
import { type OpenedSink, openSink } from "../sinks/mod.ts";
import { buildSpec } from "../base/spec.ts";
import {
  type CrawlRecord,
  crawlsOldestFirst,
  createCrawl,
  createRuntime,
  deleteCrawl,
  type Dispatcher,
  findCrawl,
  kvOp,
  listCrawlSummaries,
  pendingPassLine,
} from "../engine/mod.ts";
import { createMirrorApp, keepMirrorsLevel, mirrorUuid, notServable } from "../mirror/mod.ts";
import { Metrics } from "./metrics.ts";
import { outageLine, Pacer, pauseLine } from "../sources/http/mod.ts";
import { StatusFeed } from "./events.ts";
import { sourceOpener } from "../sources/open_source.ts";

/** A running server and the hooks its cron jobs call. */
export interface ServerRuntime {
  /** Where the server listens. */
  url: string;
  /** The watchdog: re-dispatch stalled shards, finish completed crawls. */
  watchdogTick(): Promise<void>;
  /** Lease mode: run a lease worker for about `ms` (a Deploy cron tick). */
  leaseTick(ms: number): Promise<unknown>;
  /** Scheduled recrawl: create this run's crawl, and delete finished ones beyond the last K. */
  recrawl(): Promise<void>;
  /** Stops serving, stops workers and closes KV. */
  close(): Promise<void>;
}

/** Opens KV, or says in one line why it cannot (a directory, not a database, no permission). */
async function openStore(path: string | undefined): Promise<Deno.Kv> {
  try {
    // Another process on the same file may hold its lock for a moment: waited out, bounded.
    return await kvOp(() => Deno.openKv(path));
  } catch (err) {
    throw new UsageError(
      `cannot open KV at ${path ?? "the default location"}: ${errorLine(err)}`,
    );
  }
}

/** Serves `app`, or says in one line why the port cannot be had. */
function serve(config: ServerConfig, fetch: (req: Request) => Response | Promise<Response>) {
  try {
    return Deno.serve({ port: config.port, hostname: config.hostname, onListen: () => {} }, fetch);
  } catch (err) {
    const why = err instanceof Deno.errors.AddrInUse
      ? "is in use by another process"
      : `cannot be opened: ${errorLine(err)}`;
    throw new UsageError(`port ${config.port} on ${config.hostname} ${why}`);
  }
}

/** Opens KV, builds the app and the engine (`createRuntime`), and serves. */
export async function startServer(
  config: ServerConfig,
  options: { log?: (line: string) => void; clock?: Clock } = {},
): Promise<ServerRuntime> {
  const clock = options.clock ?? SYSTEM_CLOCK;
  const log = options.log ?? ((l: string) => console.error(l));
  const sinks = await openNamedSinks(config.sinks ?? [], {
    log,
    tombstones: config.sinkTombstones ?? false,
  });
  let kv: Deno.Kv;
  try {
    kv = await openStore(config.kvPath);
  } catch (err) {
    for (const s of sinks.values()) await s.close().catch(() => {});
    throw err;
  }
  const { runtime, openSource, metrics } = startEngine(kv, config, { log, clock, sinks });
  const statusFeed = new StatusFeed(kv, { clock, maxListeners: config.bounds?.maxEventStreams });
  const mirror = config.mirror
    ? await servedMirror(kv, config.mirror, { clock, log, kvLabel: config.kvPath ?? "" })
    : null;
  let server: Deno.HttpServer;
  try {
    server = serve(
      config,
      createApp({
        kv,
        token: config.token,
        metricsToken: config.metricsToken,
        allowedSources: config.allowedSources,
        dispatcher: runtime.dispatcher,
        openSource: (url) => openSource.url(url),
        metrics,
        pace: (only) => openSource.pacer.state(only),
        clock,
        ...config.bounds,
        statusFeed,
        audit: log,
        sinkNames: [...sinks.keys()],
        mirror: mirror?.app,
      }).fetch,
    );
  } catch (err) {
    await mirror?.close();
    await runtime.close();
    kv.close();
    for (const s of sinks.values()) await s.close().catch(() => {});
    throw err;
  }
  const addr = server.addr as Deno.NetAddr;
  const url = `http://${addr.hostname}:${addr.port}`;
  log(`listening on ${url} (dispatch ${config.dispatch}${config.token ? "" : ", no token"})`);
  if (mirror) {
    log(`mirror on ${url}/mirror/ (a database per documents crawl, named by its id)`);
    log(`npm registry on ${url}/mirror/npm/`);
  }
  return {
    url,
    watchdogTick: async () => {
      const n = await runtime.watchdogTick({ stallMs: 60_000 });
      if (n) log(`watchdog: re-dispatched ${n} stalled shards`);
    },
    leaseTick: (ms) => runtime.leaseTick(ms),
    recrawl: () => recrawl(kv, runtime.dispatcher, config, { clock, log }),
    close: async () => {
      await mirror?.close();
      await runtime.close();
      statusFeed.close();
      await shutdownWithin(server, SHUTDOWN_GRACE_MS);
      kv.close();
      await runtime.finished;
      for (const s of sinks.values()) await s.close().catch(() => {});
    },
  };
}

/**
 * `SINKS`' sinks by name, each probed once: one that refuses for good stops the start (one line,
 * no password); one that does not answer now is kept, and fed when it answers.
 * @throws UsageError naming the sink
 */
async function openNamedSinks(
  named: readonly { name: string; ref: string }[],
  o: { log: (line: string) => void; tombstones: boolean },
): Promise<Map<string, OpenedSink>> {
  const { log } = o;
  const sinks = new Map<string, OpenedSink>();
  let which = "";
  try {
    for (const { name, ref } of named) {
      which = name;
      const sink = openSink(ref, { tombstones: o.tombstones });
      sinks.set(name, sink);
      try {
        await sink.probe();
      } catch (err) {
        if (err instanceof PermanentError) throw err;
        log(`SINKS ${name}: ${errorLine(err)}; its crawls' tables are filled when it answers`);
      }
    }
    return sinks;
  } catch (err) {
    for (const s of sinks.values()) await s.close().catch(() => {});
    const line = errorLine(err).replace(/^--sink \S+: /, "");
    throw new UsageError(`SINKS ${which}: ${line}`, { cause: err });
  }
}

/** How long a stopping server waits for requests in flight, in milliseconds. */
const SHUTDOWN_GRACE_MS = 3000;

/**
 * Stops serving: requests in flight get `graceMs` to end (event streams are ended before; on Deno
 * 2.5 `shutdown()` also waits for idle keep-alive connections, which a browser keeps for minutes).
 */
async function shutdownWithin(server: Deno.HttpServer, graceMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    server.shutdown(),
    new Promise<void>((r) => timer = setTimeout(r, graceMs)),
  ]);
  clearTimeout(timer);
}

/** The engine behind the server: its sources (redirects kept inside the allowlist) and runtime. */
function startEngine(
  kv: Deno.Kv,
  config: ServerConfig,
  o: { log: (line: string) => void; clock: Clock; sinks: ReadonlyMap<string, OpenedSink> },
) {
  const pacer = new Pacer({
    ratePerSecond: config.ratePerSecond ?? null,
    breaker: { onPause: (p) => o.log(pauseLine(p)), onOutage: (e) => o.log(outageLine(e)) },
  });
  const metrics = new Metrics({ pace: () => pacer.state() });
  // A registry may redirect only inside ALLOWED_SOURCES: no hop can leave the allowlist.
  const openSource = sourceOpener({
    allowRedirect: (target) => isAllowedSource(target.href, config.allowedSources),
    onExchange: (info) => metrics.observe(info),
    pacer,
  });
  const runtime = createRuntime({
    kv,
    openSource,
    dispatch: config.dispatch,
    workers: config.workers,
    log: o.log,
    clock: o.clock,
    label: "server",
    follow: config.follow && {
      ...config.follow,
      onTick: (crawlId, _tick, err) => err && o.log(`follow ${crawlId}: ${errorLine(err)}`),
    },
    onEvent: (e) => {
      if (e.kind === "crawl-failed") o.log(`crawl ${e.crawlId} failed: ${e.error}`);
      if (e.kind === "crawl-done") o.log(`crawl ${e.crawlId} done`);
    },
    onProcessError: (err) => o.log(`error: ${errorLine(err)}`),
    // A process that lives (it follows by polling) asks pending documents again every second; on
    // Deploy the watchdog's cron tick does.
    pendingDocs: config.follow?.pollMs === 0
      ? null
      : { onError: (crawlId, err) => o.log(pendingPassLine(crawlId, err)) },
    sinks: o.sinks.size === 0 ? null : {
      sinksFor: (crawl) => (crawl.sinks ?? []).flatMap((n) => o.sinks.get(n) ?? []),
      onError: (crawlId, sink, reason) =>
        o.log(`sink ${sink} of crawl ${crawlId} failed (${reason}); it is given the same again`),
    },
  });
  return { runtime, openSource, metrics };
}

/** Ticks of the mirror's loop between two levelings of every crawl (finished ones included). */
const MIRROR_SWEEP_TICKS = 60;

/**
 * The served mirror of every documents crawl in `kv`: its app (a database per crawl, named by its
 * id; `/npm/` from `o.npmCrawl` or the newest done documents crawl) and the loop that keeps each
 * crawl's change log level with its ledger.
 */
async function servedMirror(
  kv: Deno.Kv,
  o: NonNullable<ServerConfig["mirror"]>,
  ctx: { clock: Clock; log: (line: string) => void; kvLabel: string },
) {
  const servable = (c: CrawlRecord | null) =>
    c && c.status !== "planning" && notServable(c) === null
      ? { crawlId: c.id, docs: c.docs }
      : null;
  const stop = new AbortController();
  // Each second the crawls whose ledger may move (running, followed, finished a moment ago); every
  // crawl each minute (one refreshed by another process, say), so that a store of a thousand
  // finished crawls costs little while idle.
  let tick = 0;
  const loop = keepMirrorsLevel({ kv, clock: ctx.clock, log: ctx.log }, {
    crawls: async () => {
      const all = (await crawlsOldestFirst(kv)).filter((c) => servable(c));
      const sweep = tick++ % MIRROR_SWEEP_TICKS === 0;
      const now = ctx.clock.now();
      return all.filter((c) =>
        sweep || c.follow || c.status !== "done" || now - (c.finishedAt ?? 0) < 120_000
      ).map((c) => c.id);
    },
    signal: stop.signal,
  });
  const app = createMirrorApp({ kv, clock: ctx.clock }, {
    db: async (name) => servable(await findCrawl(kv, name)),
    npmDb: async () => {
      if (o.npmCrawl !== null) return servable(await findCrawl(kv, o.npmCrawl));
      const done = (await crawlsOldestFirst(kv)).filter((c) => c.status === "done" && c.docs);
      return done.map(servable).findLast((d) => d !== null) ?? null;
    },
    readToken: o.readToken,
    uuid: await mirrorUuid(`rankcrawl serve\0${ctx.kvLabel}`),
    signal: stop.signal,
  });
  return {
    app,
    close: async () => {
      stop.abort();
      await loop;
    },
  };
}

/**
 * One scheduled run: creates this minute's crawl of the configured source (once, however often
 * the cron fires), then deletes finished scheduled crawls beyond the newest `keep`, so that a
 * daily schedule does not grow KV without bound. Running crawls are never deleted.
 */
async function recrawl(
  kv: Deno.Kv,
  dispatcher: Dispatcher,
  config: ServerConfig,
  o: { clock: Clock; log: (line: string) => void },
): Promise<void> {
  const s = config.schedule;
  if (!s) return;
  const minute = new Date(o.clock.now()).toISOString().slice(0, 16).replace(/[-:T]/g, "");
  const spec = buildSpec({ source: s.source, shards: s.shards, docs: s.docs });
  const { crawl, created } = await createCrawl(kv, spec, {
    id: `scheduled-${minute}`,
    clock: o.clock,
  });
  if (created) await dispatcher.plan(crawl.id);
  o.log(`scheduled crawl ${crawl.id} (${crawl.status})`);
  const scheduled = (await listCrawlSummaries(kv)).filter((c) => c.id.startsWith("scheduled-"))
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  for (const old of scheduled.slice(s.keep)) {
    if (old.status !== "done" && old.status !== "failed" && old.status !== "cancelled") continue;
    await deleteCrawl(kv, old.id, { clock: o.clock });
    o.log(`scheduled crawl ${old.id} deleted (keeping the last ${s.keep})`);
  }
}
