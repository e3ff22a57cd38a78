/**
 * A CouchDB-compatible registry served over HTTP (Hono): `GET /<db>`, `GET /<db>/_all_docs`,
 * `GET /<db>/_changes`, `GET|PUT|DELETE /<db>/<id>`, with injectable latency and faults. It is the
 * demo's registry and the tests' registry, so it follows CouchDB wherever the crawler relies on it:
 * `offset` is the rank of the first returned row, keys collate by code point, errors are JSON.
 *
 * @module
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { prng } from "./names.ts";
import { hash32, type RegistryData } from "./registry_data.ts";

/** Kinds of injected fault. `drop` cuts the connection mid-body. */
export type FaultKind = "500" | "503" | "429" | "truncated" | "drop" | "slow";

/** Every fault kind, the default set for `faultRate`. */
export const FAULT_KINDS: readonly FaultKind[] = ["500", "503", "429", "truncated", "drop", "slow"];

/** How the registry behaves. */
export interface RegistryOptions {
  /** Database name in the URL path. @default "registry" */
  db?: string;
  /** Added latency for every request, in milliseconds. @default 0 */
  latencyMs?: number;
  /** Added latency for every document GET, in milliseconds. @default 0 */
  docLatencyMs?: number;
  /** Documents whose id starts with this prefix cost `hotMs` more. @default undefined */
  hotPrefix?: string;
  /** Extra latency of a hot-prefix document, in milliseconds. @default 0 */
  hotMs?: number;
  /** Share of requests that fail, 0..1. @default 0 */
  faultRate?: number;
  /** Which faults to inject. @default FAULT_KINDS */
  faults?: readonly FaultKind[];
  /** `Retry-After` sent with 429, in seconds. @default 1 */
  retryAfterS?: number;
  /** Delay of a `slow` fault, in milliseconds. @default 1000 */
  slowMs?: number;
  /** Share of listed documents whose GET answers 404 (deleted between listing and fetch). @default 0 */
  missingDocRate?: number;
  /** Whether `skip` is honoured (the npm replica rejects it). @default true */
  skip?: boolean;
  /** Whether `include_docs` is honoured (the npm replica rejects it). @default true */
  includeDocs?: boolean;
  /** Largest `limit` accepted; above it the answer is 400. @default 10000 */
  maxLimit?: number;
  /** PRNG seed for faults. @default 42 */
  seed?: number;
}

/** Counters of what the registry served, for benchmarks and tests. */
export interface RegistryStats {
  /** Requests to database routes. */
  requests: number;
  /** `_all_docs` requests. */
  allDocs: number;
  /** Document GETs. */
  docs: number;
  /** `_changes` requests. */
  changes: number;
  /** Faults injected. */
  faults: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function couchError(c: Context, status: 400 | 404, error: string, reason: string) {
  return c.json({ error, reason }, status);
}

/** Parses a JSON-encoded string query parameter; `undefined` when absent, Error when malformed. */
function jsonKey(raw: string | undefined): string | undefined | Error {
  if (raw === undefined) return undefined;
  try {
    const v = JSON.parse(raw);
    if (typeof v !== "string") return new Error(`key must be a JSON string: ${raw.slice(0, 80)}`);
    return v;
  } catch {
    return new Error(`Invalid value for JSON: ${raw.slice(0, 80)}`);
  }
}

function boolParam(raw: string | undefined, dflt: boolean): boolean | Error {
  if (raw === undefined) return dflt;
  if (raw === "true") return true;
  if (raw === "false") return false;
  return new Error(`Invalid boolean parameter: ${raw.slice(0, 40)}`);
}

function intParam(raw: string | undefined, dflt: number): number | Error {
  if (raw === undefined) return dflt;
  if (!/^\d+$/.test(raw)) return new Error(`Invalid integer parameter: ${raw.slice(0, 40)}`);
  return Number(raw);
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
  const faultRate = options.faultRate ?? 0;
  const faults = options.faults ?? FAULT_KINDS;
  const rand = prng(options.seed ?? 42);
  const stats = options.stats ?? { requests: 0, allDocs: 0, docs: 0, changes: 0, faults: 0 };
  const maxLimit = options.maxLimit ?? 10_000;
  const app = new Hono();

  // Latency and faults apply to every database route; the fault is decided before the handler runs
  // and applied to its answer, so a truncated body is a real prefix of a real answer.
  app.use(`/${db}/*`, async (c, next) => {
    stats.requests++;
    if (options.latencyMs) await sleep(options.latencyMs);
    const fault = faultRate > 0 && rand() < faultRate
      ? faults[Math.floor(rand() * faults.length)]
      : undefined;
    if (fault === "500" || fault === "503" || fault === "429") {
      stats.faults++;
      const headers: Record<string, string> = {};
      if (fault === "429") headers["retry-after"] = String(options.retryAfterS ?? 1);
      return c.json(
        { error: "injected", reason: `injected fault ${fault}` },
        Number(fault) as 500,
        headers,
      );
    }
    if (fault === "slow") {
      stats.faults++;
      await sleep(options.slowMs ?? 1000);
    }
    await next();
    if (fault === "truncated" || fault === "drop") {
      stats.faults++;
      const body = new Uint8Array(await c.res.arrayBuffer());
      const cut = body.slice(0, Math.floor(body.length / 2));
      if (fault === "truncated") {
        c.res = new Response(cut, { status: 200, headers: { "content-type": "application/json" } });
      } else {
        // Declare the full length, send half, then fail the stream: the client sees a dropped
        // connection in the middle of the body.
        const stream = new ReadableStream<Uint8Array>({
          start(ctl) {
            ctl.enqueue(cut);
            ctl.error(new Error("injected connection drop"));
          },
        });
        c.res = new Response(stream, {
          status: 200,
          headers: { "content-type": "application/json" },
        });
      }
    }
  });

  app.get(
    "/",
    (c) => c.json({ couchdb: "Welcome", version: "3.3.3-sim", vendor: { name: "sim" } }),
  );

  app.get(`/${db}`, (c) =>
    c.json({
      db_name: db,
      doc_count: data.size,
      doc_del_count: 0,
      update_seq: data.updateSeq,
      instance_start_time: "0",
    }));

  app.get(`/${db}/_all_docs`, (c) => {
    stats.allDocs++;
    const q = c.req.query();
    const start = jsonKey(q.startkey ?? q.start_key);
    const end = jsonKey(q.endkey ?? q.end_key);
    const limit = intParam(q.limit, Number.MAX_SAFE_INTEGER);
    const skip = intParam(q.skip, 0);
    const descending = boolParam(q.descending, false);
    const inclusiveEnd = boolParam(q.inclusive_end, true);
    const includeDocs = boolParam(q.include_docs, false);
    for (const v of [start, end, limit, skip, descending, inclusiveEnd, includeDocs]) {
      if (v instanceof Error) return couchError(c, 400, "query_parse_error", v.message);
    }
    if (q.skip !== undefined && options.skip === false) {
      return couchError(c, 400, "query_parse_error", "skip is not supported by this database");
    }
    if (includeDocs && options.includeDocs === false) {
      return couchError(c, 400, "query_parse_error", "include_docs is not supported");
    }
    if ((limit as number) > maxLimit && q.limit !== undefined) {
      return couchError(c, 400, "query_parse_error", `limit must be at most ${maxLimit}`);
    }
    const keys = data.keys;
    const n = keys.length;
    const lim = limit as number;
    let ids: string[];
    let offset: number;
    if (!descending) {
      const from = start === undefined ? 0 : data.rank(start as string);
      let to = n;
      if (end !== undefined) {
        to = data.rank(end as string);
        if (inclusiveEnd && to < n && keys[to] === end) to++;
      }
      offset = Math.min(from + (skip as number), n);
      ids = data.slice(offset, Math.max(offset, Math.min(to, offset + lim)));
    } else {
      // Descending: walk down from startkey; offset counts the rows above it.
      let from = n - 1;
      if (start !== undefined) {
        const r = data.rank(start as string);
        from = r < n && keys[r] === start ? r : r - 1;
      }
      let to = -1;
      if (end !== undefined) {
        const r = data.rank(end as string);
        to = inclusiveEnd ? r - 1 : (r < n && keys[r] === end ? r : r - 1);
      }
      const first = from - (skip as number);
      offset = n - 1 - first;
      ids = [];
      for (let i = first; i > to && ids.length < lim && i >= 0; i--) ids.push(keys[i]);
      offset = Math.min(offset, n);
    }
    const rows = ids.map((id) => {
      const row: Record<string, unknown> = { id, key: id, value: { rev: data.rev(id) } };
      if (includeDocs) row.doc = data.doc(id);
      return row;
    });
    return c.json({ total_rows: n, offset, rows });
  });

  app.get(`/${db}/_changes`, (c) => {
    stats.changes++;
    const q = c.req.query();
    const since = q.since === "now" ? data.updateSeq : intParam(q.since, 0);
    const limit = intParam(q.limit, 1000);
    if (since instanceof Error) return couchError(c, 400, "bad_request", since.message);
    if (limit instanceof Error) return couchError(c, 400, "bad_request", limit.message);
    const { results, lastSeq } = data.changes(since, Math.min(limit, maxLimit));
    return c.json({
      results: results.map((r) => ({
        seq: r.seq,
        id: r.id,
        changes: [{ rev: r.rev }],
        ...(r.deleted ? { deleted: true } : {}),
      })),
      last_seq: lastSeq,
      pending: Math.max(0, data.updateSeq - lastSeq),
    });
  });

  app.get(`/${db}/:id`, async (c) => {
    stats.docs++;
    const id = c.req.param("id");
    if (options.docLatencyMs) await sleep(options.docLatencyMs);
    if (options.hotPrefix && options.hotMs && id.startsWith(options.hotPrefix)) {
      await sleep(options.hotMs);
    }
    const doc = data.doc(id);
    const missing = (options.missingDocRate ?? 0) > 0 &&
      hash32(`missing:${id}`) / 4294967296 < options.missingDocRate!;
    if (!doc || missing) return couchError(c, 404, "not_found", "missing");
    return c.json(doc);
  });

  app.put(`/${db}/:id`, (c) => {
    const rev = data.put(c.req.param("id"));
    return c.json({ ok: true, id: c.req.param("id"), rev }, 201);
  });

  app.delete(`/${db}/:id`, (c) => {
    if (!data.delete(c.req.param("id"))) return couchError(c, 404, "not_found", "missing");
    return c.json({ ok: true, id: c.req.param("id") });
  });

  app.notFound((c) => couchError(c, 404, "not_found", "Database does not exist."));
  return app;
}

/** A running registry server. */
export interface RunningRegistry {
  /** The database URL to pass as `--source`. */
  url: string;
  /** What was served so far. */
  stats: RegistryStats;
  /** The database (mutable: tests move it under a crawl). */
  data: RegistryData;
  /** Stops the server and waits for it. */
  close(): Promise<void>;
}

/**
 * Serves `data` on 127.0.0.1 (`port` 0 picks a free one) and resolves once it is listening.
 */
export function startRegistry(
  data: RegistryData,
  options: RegistryOptions & { port?: number } = {},
): Promise<RunningRegistry> {
  const stats: RegistryStats = { requests: 0, allDocs: 0, docs: 0, changes: 0, faults: 0 };
  const app = createRegistryApp(data, { ...options, stats });
  const db = options.db ?? "registry";
  return new Promise((resolve) => {
    const server = Deno.serve({
      hostname: "127.0.0.1",
      port: options.port ?? 0,
      onListen: () => {},
      // A handler failure (or an injected drop) must not print a stack per request.
      onError: () => new Response("internal error", { status: 500 }),
    }, app.fetch);
    const addr = server.addr as Deno.NetAddr;
    resolve({
      url: `http://127.0.0.1:${addr.port}/${db}`,
      stats,
      data,
      close: async () => {
        await server.shutdown();
      },
    });
  });
}
