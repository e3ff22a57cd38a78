/**
 * The simulated registry's documents: `GET /<db>/<id>` (with added latency, a hot prefix, documents
 * deleted between listing and fetch, and misbehaving documents), `POST /<db>/_bulk_get` as CouchDB
 * 2+ answers it, and `PUT`/`DELETE` to move the registry under a running crawl.
 *
 * @module
 */
import type { Context, Hono } from "hono";
import { hash32, type RegistryData } from "./registry_data.ts";
import { badDocResponse, badKindOf, type HostileOptions } from "./registry_hostile.ts";

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
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** True when the document `id` answers 404 although listed. */
export function isMissing(id: string, o: DocServeOptions): boolean {
  return (o.missingDocRate ?? 0) > 0 && hash32(`missing:${id}`) / 4294967296 < o.missingDocRate!;
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

function notFound(c: Context, reason = "missing") {
  return c.json({ error: "not_found", reason }, 404);
}

/** Adds the document routes of database `db` to `app`; `count` counts GETs and bulk requests. */
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
    const results = docs.map((d: { id?: unknown }) => {
      const id = String(d?.id);
      const doc = isMissing(id, o) ? undefined : data.doc(id);
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

  app.get(`/${db}/:id`, async (c) => {
    count.docs++;
    const id = c.req.param("id");
    if (o.docLatencyMs) await sleep(o.docLatencyMs);
    if (o.hotPrefix && o.hotMs && id.startsWith(o.hotPrefix)) await sleep(o.hotMs);
    const bad = badKindOf(id, o);
    if (bad && data.doc(id)) return await badDocResponse(c, bad, id, o);
    const doc = data.doc(id);
    if (!doc || isMissing(id, o)) return notFound(c);
    return c.json(doc);
  });

  app.put(`/${db}/:id`, (c) => {
    const rev = data.put(c.req.param("id"));
    return c.json({ ok: true, id: c.req.param("id"), rev }, 201);
  });

  app.delete(`/${db}/:id`, (c) => {
    if (!data.delete(c.req.param("id"))) return notFound(c);
    return c.json({ ok: true, id: c.req.param("id") });
  });
}
