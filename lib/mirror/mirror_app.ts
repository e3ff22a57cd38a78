/**
 * The served mirror: a crawl's copy as a read-only CouchDB database (what replicators, PouchDB and
 * followers read) and as an npm registry's metadata endpoint (what `npm view` and installers read).
 * Built by a factory, tested with `app.request()`; `deno task mirror` wires it to a KV file.
 *
 * - `GET /` (a stable `uuid`), `GET|HEAD /<db>` (`doc_count`, `update_seq`: the mirror's own).
 * - `GET|POST /<db>/_all_docs` (`all_docs.ts`), `GET|POST /<db>/_changes` (`changes.ts`).
 * - `GET /<db>/<id>` (`rev`, `revs`, `open_revs`, `latest`), `POST /<db>/_bulk_get`.
 * - `GET|PUT /<db>/_local/<id>`: a replicator's checkpoints, kept beside the crawl's data (never in
 *   it), so replicators that write checkpoints to their source work as they do against CouchDB.
 * - `GET /npm/<name>` (`@scope/name` and `@scope%2fname`): the packument, or the abbreviated form.
 * Reads need the read token (`Authorization: Bearer TOKEN`, or Basic with it as the password: a
 * replicator given `http://reader:TOKEN@host/db`) unless the mirror is public; `continuous`
 * feeds count against a bound of open streams (503 beyond). Every answer streams.
 *
 * @module
 */
import { Hono } from "hono";
import type { Clock } from "../base/clock.ts";
import { InputError, NotFoundError } from "../base/errors.ts";
import { hexDigest } from "../base/hex_digest.ts";
import { safeEqual } from "../base/safe_equal.ts";
import {
  crawlItem,
  crawlItemCount,
  crawlItems,
  findCrawl,
  getMirrorLocal,
  mirrorEntry,
  mirrorHead,
  putMirrorLocal,
} from "../engine/mod.ts";
import { allDocsBody, allDocsQuery } from "./all_docs.ts";
import { changesBody, changesQuery } from "./changes.ts";
import { servedDoc, tombstoneDoc } from "./mirror_docs.ts";
import { abbreviate, ABBREVIATED, etagOf, notModified } from "./npm_packument.ts";

/** A database the mirror serves: a crawl, and whether it fetched documents. */
export interface MirrorDb {
  crawlId: string;
  docs: boolean;
}

/** What the mirror app needs. */
export interface MirrorContext {
  kv: Deno.Kv;
  clock: Clock;
}

/** How the mirror app serves. */
export interface MirrorOptions {
  /** The database named `name`, or null (a 404): a crawl id, or whatever the caller maps. */
  db: (name: string) => Promise<MirrorDb | null>;
  /** The database `/npm/` answers from, or null (every name a 404). */
  npmDb: () => Promise<MirrorDb | null>;
  /** The read token; null: reads are open (`MIRROR_PUBLIC=1`). */
  readToken: string | null;
  /** The welcome's `uuid` (stable across restarts). */
  uuid: string;
  /** Continuous feeds open at once; beyond is a 503. @default 100 */
  maxStreams?: number;
  /** Ends open feeds when aborted (the server stopping). @default never */
  signal?: AbortSignal;
}

const json = (body: unknown, status = 200) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json" },
  });

const streamed = (body: ReadableStream<Uint8Array>) =>
  new Response(body, { headers: { "content-type": "application/json" } });

/**
 * Builds the mirror's app (see the module comment).
 *
 * @example
 * ```ts
 * using kv = await Deno.openKv("crawl.kv");
 * const app = createMirrorApp({ kv, clock: SYSTEM_CLOCK }, {
 *   db: async (name) => name === "registry" ? { crawlId: "c6a984ac0266", docs: true } : null,
 *   npmDb: async () => ({ crawlId: "c6a984ac0266", docs: true }),
 *   readToken: null,
 *   uuid: "0b7c3d1e",
 * });
 * Deno.serve({ port: 5985 }, app.fetch);
 * ```
 */
export function createMirrorApp(ctx: MirrorContext, o: MirrorOptions): Hono {
  const { kv, clock } = ctx;
  // `/db/` is `/db` (PouchDB asks with the slash).
  const app = new Hono({ strict: false });
  app.notFound(() => json({ error: "not_found", reason: "no such route on this mirror" }, 404));
  const signal = o.signal ?? new AbortController().signal;
  let streams = 0;
  const maxStreams = o.maxStreams ?? 100;
  app.onError((err) => {
    if (err instanceof InputError) return json({ error: "bad_request", reason: err.message }, 400);
    if (err instanceof NotFoundError) {
      return json({ error: "not_found", reason: err.message }, 404);
    }
    return json({ error: "unknown_error", reason: "the mirror could not answer" }, 500);
  });
  app.use("*", async (c, next) => {
    if (o.readToken !== null && !await tokenOk(c.req.header("authorization"), o.readToken)) {
      return json({ error: "unauthorized", reason: "a read token is needed" }, 401);
    }
    await next();
  });
  const db = async (name: string): Promise<MirrorDb> => {
    const d = await o.db(name);
    if (!d) throw new NotFoundError("Database does not exist.");
    return d;
  };
  const body = async (c: { req: { json(): Promise<unknown> } }) =>
    await c.req.json().catch(() => {
      throw new InputError("the body is not JSON");
    }) as Record<string, unknown>;

  app.get("/", () =>
    json({
      couchdb: "Welcome",
      version: "3.3.3",
      vendor: { name: "rankcrawl mirror" },
      uuid: o.uuid,
      features: [],
    }));
  const info = async (name: string) => {
    const d = await db(name);
    const crawl = await findCrawl(kv, d.crawlId);
    return {
      db_name: name,
      doc_count: await crawlItemCount(kv, d.crawlId),
      doc_del_count: 0,
      update_seq: await mirrorHead(kv, d.crawlId),
      purge_seq: 0,
      compact_running: false,
      instance_start_time: "0",
      disk_format_version: 8,
      // What the copy is, for a reader who asks (CouchDB's clients pass over unknown fields): a
      // crawl still running or not proven serves what it holds so far, and says so here.
      rankcrawl: {
        crawl: d.crawlId,
        status: crawl?.status ?? "deleted",
        checked: crawl?.verification?.status ?? null,
        following: crawl?.follow ?? false,
      },
    };
  };
  app.on("HEAD", "/:db", async (c) => {
    await info(c.req.param("db"));
    return c.body(null, 200);
  });
  app.get("/:db", async (c) => json(await info(c.req.param("db"))));

  const allDocs = async (
    name: string,
    q: (n: string) => string | undefined,
    b?: { keys?: unknown },
  ) => {
    const d = await db(name);
    return streamed(allDocsBody(kv, d.crawlId, allDocsQuery(q, b), { docs: d.docs }));
  };
  app.get("/:db/_all_docs", (c) => allDocs(c.req.param("db"), (n) => c.req.query(n)));
  app.post(
    "/:db/_all_docs",
    async (c) => allDocs(c.req.param("db"), (n) => c.req.query(n), await body(c)),
  );

  const changes = async (
    name: string,
    q: (n: string) => string | undefined,
    b?: { doc_ids?: unknown },
  ) => {
    const d = await db(name);
    const query = changesQuery(q, b);
    if (query.feed !== "continuous") {
      return streamed(changesBody(kv, d.crawlId, query, { docs: d.docs, clock, signal }));
    }
    if (streams >= maxStreams) {
      return json({ error: "service_unavailable", reason: "too many open feeds" }, 503);
    }
    streams++;
    const feed = changesBody(kv, d.crawlId, query, { docs: d.docs, clock, signal });
    const reader = feed.getReader();
    let open = true;
    const done = () => {
      if (open) streams--;
      open = false;
    };
    return streamed(
      new ReadableStream({
        async pull(ctl) {
          const { value, done: end } = await reader.read();
          if (end) {
            done();
            ctl.close();
          } else ctl.enqueue(value);
        },
        cancel() {
          done();
          return reader.cancel();
        },
      }),
    );
  };
  app.get("/:db/_changes", (c) => changes(c.req.param("db"), (n) => c.req.query(n)));
  app.post(
    "/:db/_changes",
    async (c) => changes(c.req.param("db"), (n) => c.req.query(n), await body(c)),
  );

  app.post("/:db/_bulk_get", async (c) => {
    const d = await db(c.req.param("db"));
    const b = await body(c);
    const docs = b.docs;
    if (!Array.isArray(docs) || docs.length > 10_000) {
      throw new InputError("docs must be an array of {id, rev}, at most 10,000");
    }
    const revs = c.req.query("revs") === "true";
    // latest: a revision this mirror holds no more is answered with the one it holds (its only
    // leaf), as CouchDB answers with the asked revision's latest leaf.
    const latest = c.req.query("latest") === "true";
    const wants = docs as { id?: unknown; rev?: unknown }[];
    for (const want of wants) {
      if (typeof want?.id !== "string") throw new InputError("each of docs needs an id");
    }
    const items = await crawlItems(kv, d.crawlId, wants.map((w) => w.id as string));
    const results: string[] = [];
    for (const want of wants as { id: string; rev?: unknown }[]) {
      const rev = typeof want.rev === "string" ? want.rev : undefined;
      const it = items.get(want.id) ?? null;
      const served = it
        ? (rev === undefined || rev === it.rev || latest
          ? servedDoc(it, { docs: d.docs, revs })
          : null)
        : await tombstone(d, want.id, latest ? undefined : rev, revs);
      const one = served?.ok ? `{"ok":${served.json}}` : `{"error":${
        JSON.stringify({
          id: want.id,
          rev: rev ?? "undefined",
          error: "not_found",
          reason: served ? served.reason : "missing",
        })
      }}`;
      results.push(`{"id":${JSON.stringify(want.id)},"docs":[${one}]}`);
    }
    return c.body(`{"results":[${results.join(",\n")}]}\n`, 200, {
      "content-type": "application/json",
    });
  });

  app.get("/:db/_local/:id", async (c) => {
    const d = await db(c.req.param("db"));
    const doc = await getMirrorLocal(kv, d.crawlId, c.req.param("id"));
    return doc ? json(doc) : json({ error: "not_found", reason: "missing" }, 404);
  });
  app.put("/:db/_local/:id", async (c) => {
    const d = await db(c.req.param("db"));
    const id = `_local/${c.req.param("id")}`;
    const doc = await body(c);
    const had = await getMirrorLocal(kv, d.crawlId, c.req.param("id"));
    const n = Number(String(had?._rev ?? "0-0").split("-")[1] ?? 0) + 1;
    await putMirrorLocal(kv, d.crawlId, c.req.param("id"), { ...doc, _id: id, _rev: `0-${n}` });
    return json({ ok: true, id, rev: `0-${n}` }, 201);
  });

  app.get("/:db/:id{.+}", async (c) => {
    const name = c.req.param("db");
    if (name === "npm") return await npm(c.req.param("id"), (h) => c.req.header(h));
    const d = await db(name);
    const id = c.req.param("id");
    const it = await crawlItem(kv, d.crawlId, id);
    const openRevs = c.req.query("open_revs");
    const rev = c.req.query("rev");
    const revs = c.req.query("revs") === "true";
    const latest = c.req.query("latest") === "true";
    if (openRevs !== undefined) {
      const gone = it ? null : await mirrorEntry(kv, d.crawlId, id);
      const wanted = openRevs === "all"
        ? (it ? [it.rev] : gone?.deleted ? [gone.rev] : [])
        : parseRevs(openRevs);
      const parts = await Promise.all(wanted.map(async (r) => {
        const served = it
          ? (r === it.rev || latest ? servedDoc(it, { docs: d.docs, revs }) : null)
          : await tombstone(d, id, latest ? undefined : r, revs);
        return served?.ok ? `{"ok":${served.json}}` : `{"missing":${JSON.stringify(r)}}`;
      }));
      return c.body(`[${parts.join(",")}]\n`, 200, { "content-type": "application/json" });
    }
    if (!it && rev !== undefined) {
      const dead = await tombstone(d, id, rev, revs);
      if (dead) return c.body(dead.json, 200, { "content-type": "application/json" });
    }
    if (!it || (rev !== undefined && rev !== it.rev)) {
      const gone = it ? null : await mirrorEntry(kv, d.crawlId, id);
      return json({ error: "not_found", reason: gone?.deleted ? "deleted" : "missing" }, 404);
    }
    const served = servedDoc(it, { docs: d.docs, revs });
    if (!served.ok) return json({ error: served.error, reason: served.reason }, 404);
    return c.body(served.json, 200, {
      "content-type": "application/json",
      etag: `"${it.rev}"`,
    });
  });

  /** The tombstone of `id` at `rev` when the mirror's log has it deleted there, or null. */
  const tombstone = async (d: MirrorDb, id: string, rev: string | undefined, revs: boolean) => {
    const e = await mirrorEntry(kv, d.crawlId, id);
    if (!e?.deleted || (rev !== undefined && rev !== e.rev)) return null;
    return { ok: true as const, json: tombstoneDoc(id, e.rev, { from: e.from, revs }) };
  };

  /** npm's packument of `name` (`@scope/name`; `@scope%2fname` is decoded by the router). */
  const npm = async (name: string, header: (h: string) => string | undefined) => {
    // `npm ping` (and npm doctor) ask this of a registry.
    if (name === "-/ping") return json({});
    const d = await o.npmDb();
    const notFound = () => json({ error: "Not found" }, 404);
    if (!d) return notFound();
    const it = await crawlItem(kv, d.crawlId, name);
    if (!it) return notFound();
    const served = servedDoc(it, { docs: d.docs });
    if (!served.ok) return notFound();
    const abbreviated = (header("accept") ?? "").includes(ABBREVIATED);
    const etag = etagOf(it.rev, abbreviated ? "abbreviated" : "full");
    if (notModified(header("if-none-match"), etag)) {
      return new Response(null, { status: 304, headers: { etag } });
    }
    const text = abbreviated ? JSON.stringify(abbreviate(JSON.parse(served.json))) : served.json;
    return new Response(text, {
      headers: {
        "content-type": abbreviated ? ABBREVIATED : "application/json",
        etag,
        "cache-control": "public, max-age=300",
      },
    });
  };
  return app;
}

/**
 * Whether `header` carries the read token: `Bearer TOKEN` (npm, fetch), or `Basic` with the token as
 * the password (a replicator given `http://any:TOKEN@host/db`).
 */
async function tokenOk(header: string | undefined, token: string): Promise<boolean> {
  const bearer = /^Bearer (.+)$/.exec(header ?? "");
  if (bearer) return await safeEqual(bearer[1], token);
  const basic = /^Basic ([A-Za-z0-9+/=]+)$/.exec(header ?? "");
  if (!basic) return false;
  let pair: string;
  try {
    pair = new TextDecoder().decode(Uint8Array.from(atob(basic[1]), (c) => c.charCodeAt(0)));
  } catch {
    return false;
  }
  return await safeEqual(pair.slice(pair.indexOf(":") + 1), token);
}

/** `open_revs=["1-a","2-b"]`. @throws InputError */
function parseRevs(raw: string): string[] {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new InputError("open_revs must be all or a JSON array of revisions");
  }
  if (!Array.isArray(v) || v.some((r) => typeof r !== "string")) {
    throw new InputError("open_revs must be all or a JSON array of revisions");
  }
  return v as string[];
}

/** A stable uuid (32 hex digits) for the welcome of a mirror serving `what` (e.g. a path and id). */
export function mirrorUuid(what: string): Promise<string> {
  return hexDigest(what, 16);
}
