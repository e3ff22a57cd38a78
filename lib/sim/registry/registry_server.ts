/**
 * A CouchDB-compatible registry served over HTTP (Hono): `GET /<db>`, `GET /<db>/_all_docs`,
 * `GET /<db>/_changes`, `GET|PUT|DELETE /<db>/<id>`, with injectable latency and faults. It is the
 * demo's registry and the tests' registry, so it follows CouchDB wherever the crawler relies on it:
 * `offset` is the rank of the first returned row, keys collate by code point, errors are JSON.
 *
 * The simulator layer (`lib/sim/`): the project's own CouchDB-like registry (its data, key sets,
 * listing, injected faults), served for the demo, the tests and the benches.
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { type Change, hash32, type RegistryData } from "./registry_data.ts";
import { faultMiddleware, type FaultOptions } from "./registry_faults.ts";
import {
  couchError,
  intParam,
  listIds,
  parseListingQuery,
  rowsForKeys,
  rowsJson,
} from "./registry_listing.ts";
import {
  addDocumentRoutes,
  docHandler,
  type DocServeOptions,
  isOversize,
  jsonBody,
  oversizeAnswer,
} from "./registry_docs.ts";
import { type ProfileOptions, refusedParam, SeqCodec } from "./registry_profile.ts";
import { paddingStream } from "./registry_hostile.ts";
import { addViewRoute } from "./registry_view.ts";
import { DbInfoSeq, type FeedControls } from "./registry_feed.ts";
import type { Collation } from "../../plan/view/mod.ts";

/** How the registry behaves. */
export interface RegistryOptions extends FaultOptions, DocServeOptions, ProfileOptions {
  /** Database name in the URL path. @default "registry" */
  db?: string;
  /** Whether `skip` is honoured (the npm replica rejects it). @default true */
  skip?: boolean;
  /** Whether `include_docs` is honoured (the npm replica rejects it). @default true */
  includeDocs?: boolean;
  /** Largest `limit` accepted; above it the answer is 400. @default 10000 */
  maxLimit?: number;
  /**
   * Share of rows (by a hash of their id) that listings leave out while `offset` and `total_rows`
   * still count them: a listing that loses rows its ranks see. @default 0
   */
  hideRate?: number;
  /** `_changes` answers at most this many rows, whatever `limit` asks. @default no cap */
  changesCap?: number;
  /**
   * What `_all_docs` says as `offset`: `rank` (the first row's rank, as CouchDB), `zero` (always
   * 0, as pouchdb-server and some proxies), or `absent` (no `offset` at all: a replica that stopped
   * serving it; npm's last capture with one is from 2025-09). @default "rank"
   */
  offsetMode?: "rank" | "zero" | "absent";
  /**
   * Each `_changes` row carries this many bytes more (a `doc` of padding, as a feed asked with
   * `include_docs` would): an answer of many rows goes over a reader's cap. @default 0
   */
  changesRowPadBytes?: number;
  /**
   * Every answer is gzipped, whatever the request accepts (a server that ignores `identity`).
   * @default false
   */
  gzipAll?: boolean;
  /**
   * The view behaves like pouchdb-server's: `startkey_docid`/`endkey_docid` are ignored (a listing
   * starts at a key's first row) and `offset` is `skip`. @default false
   */
  viewIgnoresDocid?: boolean;
  /**
   * The view's order: `typed` (CouchDB's documented type order, strings by code point) or `raw`
   * (Erlang term order; its design document then declares `"collation": "raw"`). @default "typed"
   */
  viewCollation?: Collation;
  /**
   * Answer as Apache CouchDB 3 does (its database info gives `cluster`, its welcome its vendor):
   * a server whose views default to ICU collation. @default false
   */
  asCouchdb?: boolean;
  /**
   * How the database info and the feed misbehave now; the object is read at every request, so
   * changing it changes the running registry (`registry_feed.ts`). @default none
   */
  feed?: FeedControls;
}

/** True when `id` is one of the rows a registry with `hideRate` leaves out of its listings. */
export function isHidden(id: string, hideRate: number | undefined): boolean {
  return (hideRate ?? 0) > 0 && hash32(`hide:${id}`) / 4294967296 < hideRate!;
}

/** Counters of what the registry served, for benchmarks and tests. */
export interface RegistryStats {
  /** Requests to database routes. */
  requests: number;
  /** `_all_docs` requests. */
  allDocs: number;
  /** Document GETs. */
  docs: number;
  /** `_bulk_get` requests. */
  bulkGets: number;
  /** `_changes` requests. */
  changes: number;
  /** Faults injected. */
  faults: number;
  /** Requests answered 429 by `rateLimit`. */
  limited?: number;
  /** Document GETs answered 304 (`If-None-Match` named the ETag served). */
  notModified?: number;
}

/**
 * Builds the registry's Hono app over `data`. `stats` (optional) is updated as requests arrive.
 * The app never throws for client input: malformed parameters answer 400 with CouchDB's JSON shape.
 */
export function createRegistryApp(
  data: RegistryData,
  options: RegistryOptions & { stats?: RegistryStats } = {},
): Hono {
  const db = options.db ?? "registry";
  const stats = options.stats ??
    { requests: 0, allDocs: 0, docs: 0, bulkGets: 0, changes: 0, faults: 0 };
  const seq = new SeqCodec({ ...options, shift: () => data.seqShift });
  const info = new DbInfoSeq(data, options.feed);
  const infoSeq = () => seq.show(info.state(), { other: options.feed?.infoOtherSpelling });
  const ctx: RouteContext = {
    db,
    data,
    options,
    stats,
    seq,
    maxLimit: options.maxLimit ?? 10_000,
  };
  const app = new Hono();

  if (options.getOnly) {
    app.use("*", async (c, next) => {
      if (c.req.method !== "POST") return await next();
      return c.json({ error: "method_not_allowed", reason: "Only GET, HEAD allowed" }, 405);
    });
  }
  app.use(`/${db}/*`, faultMiddleware(options, stats));
  if (options.gzipAll) app.use("*", gzipEverything);

  // npm's replica answers its database info at its root too.
  const npmInfo = () => ({
    db_name: db,
    engine: "npm-replicate",
    doc_count: data.size,
    update_seq: infoSeq(),
  });
  app.get(
    "/",
    (c) =>
      c.json(
        options.npmInfo ? npmInfo() : {
          couchdb: "Welcome",
          version: "3.3.3-sim",
          vendor: {
            name: options.asCouchdb
              ? "The Apache Software Foundation"
              : "rankcrawl registry simulator",
          },
        },
      ),
  );

  app.get(`/${db}`, (c) =>
    c.json(
      options.npmInfo ? npmInfo() : {
        db_name: db,
        doc_count: data.size,
        doc_del_count: 0,
        update_seq: infoSeq(),
        instance_start_time: "0",
        ...(options.asCouchdb ? { cluster: { q: 2, n: 1, w: 1, r: 1 } } : {}),
      },
    ));

  addListingRoutes(app, ctx);
  addDocumentRoutes(app, db, data, options, stats);
  app.notFound((c) => couchError(c, 404, "not_found", "Database does not exist."));
  return app;
}

/** What the route builders share. */
interface RouteContext {
  db: string;
  data: RegistryData;
  options: RegistryOptions;
  stats: RegistryStats;
  seq: SeqCodec;
  maxLimit: number;
}

/** `_all_docs` and `_changes`. */
function addListingRoutes(app: Hono, ctx: RouteContext): void {
  const { db, data, stats, seq: codec } = ctx;
  const changeJson = (r: { seq: number; id: string; rev: string; deleted: boolean }) => ({
    seq: codec.show(r.seq),
    id: r.id,
    changes: [{ rev: r.rev }],
    ...(r.deleted ? { deleted: true } : {}),
  });
  // A registry that refuses what it does not serve names the parameter, with a 400.
  const refusal = (c: Context, route: "listing" | "changes", q: Record<string, string>) => {
    const name = refusedParam(route, q, ctx.options);
    if (name === null) return null;
    return couchError(c, 400, "bad_request", `unknown or unsupported parameter: ${name}`);
  };
  // Counted by the routes, refusals too.
  const allDocs = (c: Context, params: Record<string, string>, keys?: unknown) => {
    const refused = refusal(c, "listing", params);
    if (refused) return refused;
    const q = parseListingQuery(params);
    if (q instanceof Error) return couchError(c, 400, "query_parse_error", q.message);
    if (q.skipGiven && ctx.options.skip === false) {
      return couchError(c, 400, "query_parse_error", "skip is not supported by this database");
    }
    if (q.includeDocs && ctx.options.includeDocs === false) {
      return couchError(c, 400, "query_parse_error", "include_docs is not supported");
    }
    if (q.limitGiven && q.limit > ctx.maxLimit) {
      return couchError(c, 400, "query_parse_error", `limit must be at most ${ctx.maxLimit}`);
    }
    if (ctx.options.hugeListing) {
      return new Response(paddingStream(2 ** 31), {
        headers: { "content-type": "application/json", "content-length": String(2 ** 31) },
      });
    }
    if (keys !== undefined) return c.json(rowsForKeys(data, keys, q.includeDocs));
    const hideRate = ctx.options.hideRate;
    const { ids, offset } = listIds(data, {
      ...q,
      limit: Math.min(q.limit, ctx.options.silentCap ?? Infinity),
    }, hideRate ? (id) => isHidden(id, hideRate) : undefined);
    if (q.includeDocs && ids.some((id) => isOversize(id, ctx.options))) {
      return oversizeAnswer(2 ** 31);
    }
    const served = q.updateSeq && (ctx.options.listingSeq ?? "serve") === "serve";
    const seq = served ? `,"update_seq":${codec.json(data.updateSeq)}` : "";
    const rows = hideRate
      ? ids.map((id) => rowsJson(data, q, data.rank(id), [id], true)).join(",")
      : rowsJson(data, q, offset, ids);
    const mode = ctx.options.offsetMode ?? "rank";
    const said = mode === "absent" ? "" : `,"offset":${mode === "zero" ? 0 : offset}`;
    return c.body(
      `{"total_rows":${data.size}${said},"rows":[${rows}]${seq}}`,
      200,
      { "content-type": "application/json" },
    );
  };
  // GET takes `keys` (a JSON array) and `key` too, as CouchDB 2+ and npm's replica do.
  app.get(`/${db}/_all_docs`, (c) => {
    stats.allDocs++;
    const query = c.req.query();
    const refused = refusal(c, "listing", query);
    if (refused) return refused;
    const { keys, key, ...params } = query;
    if (key !== undefined) {
      return allDocs(c, { ...params, startkey: key, endkey: key, inclusive_end: "true" });
    }
    if (keys === undefined) return allDocs(c, params);
    let asked: unknown;
    try {
      asked = JSON.parse(keys);
    } catch {
      asked = null;
    }
    if (!Array.isArray(asked)) {
      return couchError(c, 400, "bad_request", "`keys` must be a JSON array");
    }
    return allDocs(c, params, asked);
  });
  // POST takes the parameters as a JSON body (and `keys`), as CouchDB and its SDKs send them.
  app.post(`/${db}/_all_docs`, async (c) => {
    stats.allDocs++;
    const body = await jsonBody(c);
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      return couchError(c, 400, "bad_request", "Request body must be a JSON object");
    }
    const { keys, ...rest } = body as Record<string, unknown>;
    const params = Object.fromEntries(
      Object.entries(rest).map((
        [k, v],
      ) => [k, typeof v === "string" && /key$/.test(k) ? JSON.stringify(v) : String(v)]),
    );
    return allDocs(c, params, keys);
  });

  addViewRoute(app, { db, data, stats, maxLimit: ctx.maxLimit, options: ctx.options });

  app.get(`/${db}/_changes`, (c) => {
    stats.changes++;
    const q = c.req.query();
    const refused = refusal(c, "changes", q);
    if (refused) return refused;
    const failing = ctx.options.feed?.feedStatus;
    if (failing) {
      const error = failing < 500 ? "bad_request" : "internal_server_error";
      return c.json({ error, reason: "injected: the feed is unavailable" }, failing as 400);
    }
    if (q.descending === "true") {
      const limit = intParam(q.limit, 1000);
      if (limit instanceof Error) return couchError(c, 400, "bad_request", limit.message);
      const { results, lastSeq } = data.changesDescending(Math.min(limit, ctx.maxLimit));
      return c.json({ results: results.map(changeJson), last_seq: codec.show(lastSeq) });
    }
    const since = codec.parse(q.since, data.updateSeq);
    const limit = intParam(q.limit, 1000);
    if (since instanceof Error) return couchError(c, 400, "bad_request", since.message);
    if (limit instanceof Error) return couchError(c, 400, "bad_request", limit.message);
    if (ctx.options.strictParams && limit > ctx.maxLimit) {
      return couchError(c, 400, "bad_request", `limit must be at most ${ctx.maxLimit}`);
    }
    const cap = Math.min(limit, ctx.maxLimit, ctx.options.changesCap ?? Infinity);
    const { results, lastSeq } = data.changes(since, cap);
    const pad = ctx.options.changesRowPadBytes ?? 0;
    const rowOf = (r: Change) =>
      pad > 0 ? { ...changeJson(r), doc: { _id: r.id, pad: " ".repeat(pad) } } : changeJson(r);
    return c.json({
      results: results.map(rowOf),
      last_seq: codec.show(lastSeq),
      ...(ctx.options.pending === false ? {} : { pending: Math.max(0, data.updateSeq - lastSeq) }),
    });
  });
}

/**
 * A document host as npm's (`<host>/<name>`, scoped names as `@scope%2fname`): the documents of
 * `data` with the latency and misbehaviour of `options`, for a registry that serves none itself.
 */
export function createDocHostApp(
  data: RegistryData,
  options: RegistryOptions & { stats?: RegistryStats } = {},
): Hono {
  const stats = options.stats ??
    { requests: 0, allDocs: 0, docs: 0, bulkGets: 0, changes: 0, faults: 0 };
  const app = new Hono();
  app.use("*", faultMiddleware(options, stats));
  if (options.gzipAll) app.use("*", gzipEverything);
  app.get("/", (c) => c.json({}));
  app.get("/:id", docHandler(data, options, stats));
  app.notFound((c) => couchError(c, 404, "not_found", "missing"));
  return app;
}

/** A middleware that gzips every answer whatever was asked (see `gzipAll`). */
async function gzipEverything(c: Context, next: () => Promise<void>): Promise<void> {
  await next();
  const res = c.res;
  if (!res.body || res.headers.has("content-encoding")) return;
  const headers = new Headers(res.headers);
  headers.set("content-encoding", "gzip");
  headers.delete("content-length");
  const gzip = new CompressionStream("gzip") as unknown as ReadableWritablePair<
    Uint8Array,
    Uint8Array
  >;
  c.res = new Response(res.body.pipeThrough(gzip), { status: res.status, headers });
}

/** A running registry server. */
export interface RunningRegistry {
  /** The database URL to pass as `--source`. */
  url: string;
  /** The document host's URL (`--docs-url`), where the registry serves documents elsewhere. */
  docsUrl?: string;
  /** What was served so far. */
  stats: RegistryStats;
  /** The database (mutable: tests move it under a crawl). */
  data: RegistryData;
  /**
   * Takes the registry off the network (its ports refuse connections, as a registry that is down)
   * until {@linkcode up}; nothing it holds changes.
   */
  down(): Promise<void>;
  /** Serves again on the same ports after {@linkcode down}. */
  up(): void;
  /** Stops the server and waits for it. */
  close(): Promise<void>;
}

/**
 * Serves `data` on 127.0.0.1 (`port` 0 picks a free one) and resolves once it is listening; with
 * `docsElsewhere`, its documents on a document host of their own too (`docsPort`, `docsUrl`).
 */
export function startRegistry(
  data: RegistryData,
  options: RegistryOptions & { port?: number; docsPort?: number } = {},
): Promise<RunningRegistry> {
  const stats: RegistryStats = {
    requests: 0,
    allDocs: 0,
    docs: 0,
    bulkGets: 0,
    changes: 0,
    faults: 0,
  };
  const app = createRegistryApp(data, { ...options, stats });
  const docApp = options.docsElsewhere ? createDocHostApp(data, { ...options, stats }) : null;
  const db = options.db ?? "registry";
  let server: Deno.HttpServer<Deno.NetAddr> | null = serve(app, options.port ?? 0);
  let docHost = docApp ? serve(docApp, options.docsPort ?? 0) : null;
  const port = server.addr.port;
  const docsPort = docHost?.addr.port;
  // Off the network at once: `up` may listen again while the old server still drains (Deno 2.5
  // waits in `shutdown()` for requests in flight, which held the registry down for minutes).
  const down = async () => {
    const closing = [server?.shutdown(), docHost?.shutdown()];
    server = docHost = null;
    await Promise.all(closing);
  };
  return Promise.resolve({
    url: `http://127.0.0.1:${port}/${db}`,
    ...(docsPort ? { docsUrl: `http://127.0.0.1:${docsPort}` } : {}),
    stats,
    data,
    down,
    up: () => {
      server ??= serve(app, port);
      if (docApp) docHost ??= serve(docApp, docsPort!);
    },
    close: down,
  });
}

/** Serves `app` on 127.0.0.1 at `port` (0: a free one). */
function serve(app: Hono, port: number): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve({
    hostname: "127.0.0.1",
    port,
    onListen: () => {},
    // A handler failure (or an injected drop) must not print a stack per request.
    onError: () => new Response("internal error", { status: 500 }),
  }, CLOSE_EACH_CONNECTION ? closingEach(app.fetch) : app.fetch);
}

/**
 * Deno 2.5 (the Deploy runtime's) waits in `shutdown()` for idle keep-alive connections until their
 * client lets go, which a crawler's connection pool does only when its process ends: there the
 * simulator closes each connection after its answer, so that closing it takes no minutes.
 */
const CLOSE_EACH_CONNECTION = /^2\.[0-5]\./.test(Deno.version.deno);

function closingEach(
  handler: (req: Request) => Response | Promise<Response>,
): (req: Request) => Promise<Response> {
  return async (req) => {
    const res = await handler(req);
    const headers = new Headers(res.headers);
    headers.set("connection", "close");
    return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
  };
}
