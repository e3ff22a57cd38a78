/**
 * The simulated registry's documents: `GET /<db>/<id>` (with added latency, a hot prefix, documents
 * deleted between listing and fetch, and misbehaving documents), `POST /<db>/_bulk_get` as CouchDB
 * 2+ answers it, and `PUT`/`DELETE` to move the registry under a running crawl.
 *
 * @module
 */
import type { Context, Hono } from "hono";
import { hash32, type RegistryData } from "./registry_data.ts";
import {
  badDocResponse,
  badKindOf,
  type HostileOptions,
  paddingStream,
} from "./registry_hostile.ts";

/** How documents are served. */
export interface DocServeOptions extends HostileOptions {
  /** Added latency for every document GET, in milliseconds. @default 0 */
  docLatencyMs?: number;
  /** Documents whose id starts with this prefix cost `hotMs` more. @default undefined */
  hotPrefix?: string;
  /** Extra latency of a hot-prefix document, in milliseconds. @default 0 */
  hotMs?: number;
  /** Share of listed documents whose GET answers 404 (deleted between listing and fetch). @default 0 */
  missingDocRate?: number;
  /** Whether `POST _bulk_get` is served. @default true */
  bulkGet?: boolean;
  /**
   * How a document GET's JSON is written: `compact` (one line, no newline), `newline` (ended by a
   * newline, as pouchdb-server and CouchDB do), or `pretty` (indented over many lines).
   * @default "compact"
   */
  docFormat?: "compact" | "newline" | "pretty";
  /** Share of documents (by a hash of the id) whose GET answers another document. @default 0 */
  wrongIdRate?: number;
  /** `_bulk_get` answers each id asked with the document of another one. @default false */
  wrongBulkGet?: boolean;
  /**
   * Share of documents (by a hash of the id) over any answer's size: their GET declares
   * `hugeDocBytes`, and a listing with `include_docs` or a `_bulk_get` that holds one declares 2 GB.
   * @default 0
   */
  oversizeDocRate?: number;
  /**
   * Document GETs under the database are a 404, as on npm's replica: documents come from a
   * document host (`startRegistry` serves one beside the database). @default false
   */
  docsElsewhere?: boolean;
  /**
   * Document GETs answer the state of `docLagMs` ago for documents changed since (the previous
   * revision, or 404 for one just inserted), as npm's document host lags its feed. @default 0
   */
  docLagMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** True when the document `id` answers 404 although listed. */
export function isMissing(id: string, o: DocServeOptions): boolean {
  return (o.missingDocRate ?? 0) > 0 && hash32(`missing:${id}`) / 4294967296 < o.missingDocRate!;
}

/** True when the document `id` is over any answer's size (see `oversizeDocRate`). */
export function isOversize(id: string, o: DocServeOptions): boolean {
  return (o.oversizeDocRate ?? 0) > 0 &&
    hash32(`oversize:${id}`) / 4294967296 < o.oversizeDocRate!;
}

/** True when the document `id` answers another document (see `wrongIdRate`). */
export function answersWrongId(id: string, o: DocServeOptions): boolean {
  return (o.wrongIdRate ?? 0) > 0 && hash32(`wrong:${id}`) / 4294967296 < o.wrongIdRate!;
}

/** An answer declaring `bytes` of body and streaming padding (the client stops reading). */
export function oversizeAnswer(bytes: number): Response {
  return new Response(paddingStream(bytes), {
    headers: { "content-type": "application/json", "content-length": String(bytes) },
  });
}

/** A document's JSON text in the registry's `docFormat`. */
function docText(doc: unknown, o: DocServeOptions): string {
  if (o.docFormat === "pretty") return JSON.stringify(doc, null, 2) + "\n";
  return JSON.stringify(doc) + (o.docFormat === "newline" ? "\n" : "");
}

/**
 * A request's JSON body, gunzipped when it says `content-encoding: gzip` (IBM's Cloudant SDK,
 * which couchbackup uses, compresses what it posts). Null when it is not JSON.
 */
export async function jsonBody(c: Context): Promise<unknown> {
  try {
    if (c.req.header("content-encoding") !== "gzip") return await c.req.json();
    const stream = c.req.raw.body!.pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  } catch {
    return null;
  }
}

/** The document of the id listed after `id` (before it, for the last one). */
function neighbourDoc(data: RegistryData, id: string): Record<string, unknown> | undefined {
  const i = data.rank(id);
  const other = data.keys[i + 1] ?? data.keys[i - 1];
  return other === undefined ? undefined : data.doc(other);
}

function notFound(c: Context, reason = "missing") {
  return c.json({ error: "not_found", reason }, 404);
}

/**
 * Adds the document routes of database `db` to `app`; `count` counts GETs and bulk requests. With
 * `docsElsewhere`, a document GET under the database is a 404 (its documents are on a host of
 * their own, {@linkcode docHandler}).
 */
export function addDocumentRoutes(
  app: Hono,
  db: string,
  data: RegistryData,
  o: DocServeOptions,
  count: { docs: number; bulkGets: number },
): void {
  app.post(`/${db}/_bulk_get`, async (c) => {
    if (o.bulkGet === false) return notFound(c, "Database does not exist.");
    count.bulkGets++;
    const body = await jsonBody(c);
    if (body === null) return c.json({ error: "bad_request", reason: "invalid JSON" }, 400);
    const docs = (body as { docs?: unknown }).docs;
    if (!Array.isArray(docs)) return c.json({ error: "bad_request", reason: "no docs" }, 400);
    if (o.docLatencyMs) await sleep(o.docLatencyMs);
    const asked = docs.map((d: { id?: unknown }) => String(d?.id));
    if (asked.some((id) => isOversize(id, o))) return oversizeAnswer(2 ** 31);
    const results = asked.map((id, i) => {
      // A wrong answer carries, under each id asked, the document of the next id asked.
      const of = o.wrongBulkGet && asked.length > 1 ? asked[(i + 1) % asked.length] : id;
      const doc = isMissing(of, o) ? undefined : data.doc(of);
      return {
        id,
        docs: [
          doc ? { ok: doc } : {
            error: { id, rev: "undefined", error: "not_found", reason: "missing" },
          },
        ],
      };
    });
    return c.json({ results });
  });

  // A registry whose documents come from another host (npm's replica) answers 404 here.
  const get = docHandler(data, o, count);
  app.get(`/${db}/:id`, (c) => o.docsElsewhere ? notFound(c, "not_found") : get(c));

  app.put(`/${db}/:id`, (c) => {
    const rev = data.put(c.req.param("id"));
    return c.json({ ok: true, id: c.req.param("id"), rev }, 201);
  });

  app.delete(`/${db}/:id`, (c) => {
    if (!data.delete(c.req.param("id"))) return notFound(c);
    return c.json({ ok: true, id: c.req.param("id") });
  });
}

/** What npm's document host answers abbreviated metadata as (and is asked for it with). */
const ABBREVIATED_TYPE = "application/vnd.npm.install-v1+json";

/**
 * npm's abbreviated form of a document, as registry.npmjs.org derives it: no `_id`, no `_rev`, and
 * `modified`, here one hour a revision generation after 2026-01-01 (later for each revision of a
 * document, so that an older revision's form is told apart by it alone).
 */
export function abbreviatedDoc(doc: Record<string, unknown>): Record<string, unknown> {
  const gen = Number.parseInt(String(doc._rev), 10) || 1;
  return {
    name: doc.name,
    modified: new Date(Date.UTC(2026, 0, 1) + gen * 3_600_000).toISOString(),
    "dist-tags": doc["dist-tags"],
    versions: doc.versions,
  };
}

/**
 * The GET of one document (`:id` in the route), with the latency, hot prefix and misbehaviour of
 * `o`: the database's own route, or a document host's (`<host>/<name>`, scoped names as `%2f`).
 */
export function docHandler(
  data: RegistryData,
  o: DocServeOptions,
  count: { docs: number; notModified?: number },
): (c: Context) => Promise<Response> {
  return async (c) => {
    count.docs++;
    const id = c.req.param("id")!;
    if (o.docLatencyMs) await sleep(o.docLatencyMs);
    if (o.hotPrefix && o.hotMs && id.startsWith(o.hotPrefix)) await sleep(o.hotMs);
    const bad = badKindOf(id, o);
    if (bad && data.doc(id)) return await badDocResponse(c, bad, id, o);
    const doc = o.docLagMs ? data.docBehind(id, o.docLagMs) : data.doc(id);
    if (!doc || isMissing(id, o)) return notFound(c);
    if (isOversize(id, o)) return oversizeAnswer(o.hugeDocBytes ?? 40 * 1024 * 1024);
    const other = answersWrongId(id, o) ? neighbourDoc(data, id) : undefined;
    const abbreviated = (c.req.header("accept") ?? "").includes(ABBREVIATED_TYPE);
    // As registry.npmjs.org: an ETag of the revision served (and of the form), cacheable for 5
    // minutes, and a 304 without a body for a request that names it.
    const etag = `"${(other ?? doc)._rev}${abbreviated ? "-abbreviated" : ""}"`;
    const cdn = { etag, "cache-control": "public, max-age=300" };
    const asked = c.req.header("if-none-match");
    if (asked !== undefined && asked.split(",").some((t) => t.trim() === etag)) {
      count.notModified = (count.notModified ?? 0) + 1;
      return c.body(null, 304, cdn);
    }
    if (abbreviated) {
      return c.body(docText(abbreviatedDoc(other ?? doc), o), 200, {
        "content-type": ABBREVIATED_TYPE,
        ...cdn,
      });
    }
    return c.body(docText(other ?? doc, o), 200, { "content-type": "application/json", ...cdn });
  };
}
