/**
 * The HTTP API, built by a factory and tested with `app.request()`:
 *
 *     GET  /healthz                       200, no token
 *     GET  /                              status page (HTML), no token; it asks for one
 *     POST /crawls                        {source, shards, ...} -> 202 {id, status}
 *     GET  /crawls                        list
 *     GET  /crawls/:id                    status, totals, per-shard progress, rate, ETA, dead letters
 *     POST /crawls/:id/pause|resume|cancel
 *     GET  /crawls/:id/items?cursor=&limit=
 *
 * Every route but `/healthz` and `/` needs `Authorization: Bearer <token>` (compared in constant
 * time). Sources must sit under an allowed prefix. Bodies are size-limited and validated strictly
 * (zod stands in for a hand-written validator). One `onError` maps errors to statuses; answers never
 * echo the token or a source's credentials.
 *
 * The HTTP layer (`lib/http/`): this app, the server runtime behind `main.ts`, auth and the
 * status page.
 *
 * @module
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { z } from "zod";
import { isAllowedSource, safeEqual } from "./auth.ts";
import { redactUrl } from "../base/redact.ts";
import {
  buildSpec,
  CRAWL_ID_PATTERN,
  CRAWL_ID_RULE,
  crawlIdFor,
  isCrawlId,
  SPEC_LIMITS,
} from "../base/spec.ts";
import {
  cancelCrawl,
  createCrawl,
  type Dispatcher,
  pauseCrawl,
  resumeCrawl,
} from "../engine/coordinator.ts";
import { crawlItemsPage, crawlStatus, listCrawlSummaries } from "../engine/status.ts";
import { ConflictError, FatalError, InputError, NotFoundError } from "../base/errors.ts";
import { STATUS_PAGE } from "./status_page.ts";

/** What the app needs (all injected). */
export interface AppDeps {
  /** The store. */
  kv: Deno.Kv;
  /** The API token; null disables auth (only for `--insecure-local` on 127.0.0.1). */
  token: string | null;
  /** URL prefixes a crawl may target. */
  allowedSources: readonly string[];
  /** Used by resume to re-dispatch unfinished shards. */
  dispatcher: Dispatcher;
  /** Starts planning a crawl just created in `planning` state (enqueue, or leave it to workers). */
  startPlanning: (crawlId: string) => Promise<void>;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Largest request body, in bytes. @default 16384 */
  maxBodyBytes?: number;
}

const L = SPEC_LIMITS;
const CreateBody = z.object({
  source: z.string().url().max(2000),
  shards: z.number().int().min(L.shards.min).max(L.shards.max),
  docs: z.boolean().optional(),
  docsUrl: z.string().url().max(2000).optional(),
  concurrency: z.number().int().min(L.concurrency.min).max(L.concurrency.max).optional(),
  maxPage: z.number().int().min(L.maxPage.min).max(L.maxPage.max).optional(),
  rebalance: z.boolean().optional(),
  follow: z.boolean().optional(),
  id: z.string().regex(CRAWL_ID_PATTERN, `id must be ${CRAWL_ID_RULE}`).optional(),
}).strict();

function reason(err: z.ZodError): string {
  const i = err.issues[0];
  return `${i.path.join(".") || "body"}: ${i.message}`;
}

function status(c: Context, code: 400 | 401 | 403 | 404 | 409 | 413 | 500 | 502, error: string) {
  return c.json({ error }, code);
}

/** Builds the API app. */
export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  const now = deps.now ?? Date.now;

  app.onError((err, c) => {
    if (err instanceof HTTPException) return status(c, err.status as 400, err.message);
    if (err instanceof InputError) return status(c, 400, err.message);
    if (err instanceof NotFoundError) return status(c, 404, err.message);
    if (err instanceof ConflictError) return status(c, 409, err.message);
    if (err instanceof FatalError) return status(c, 502, err.message);
    console.error(`internal error on ${c.req.method} ${c.req.path}: ${(err as Error).message}`);
    return status(c, 500, "internal error");
  });
  app.notFound((c) => status(c, 404, "no such route"));

  app.get("/healthz", (c) => c.json({ ok: true }));
  app.get("/", (c) => c.html(STATUS_PAGE));

  app.use("/crawls", authenticate(deps.token));
  app.use("/crawls/*", authenticate(deps.token));
  const limit = bodyLimit({
    maxSize: deps.maxBodyBytes ?? 16_384,
    onError: (c) => status(c, 413, "request body too large"),
  });

  app.post("/crawls", limit, async (c) => {
    let body: unknown;
    try {
      body = await c.req.json();
    } catch {
      throw new InputError("body is not valid JSON");
    }
    const parsed = CreateBody.safeParse(body);
    if (!parsed.success) throw new InputError(reason(parsed.error));
    const b = parsed.data;
    for (const url of [b.source, b.docsUrl]) {
      if (url !== undefined && !isAllowedSource(url, deps.allowedSources)) {
        return status(c, 403, `source not allowed: ${redactUrl(url)} is outside ALLOWED_SOURCES`);
      }
    }
    const { id: givenId, ...input } = b;
    const spec = buildSpec(input);
    const id = givenId ?? await crawlIdFor(spec);
    const { crawl, created } = await createCrawl(deps.kv, spec, { id, now });
    if (created) await deps.startPlanning(id);
    return c.json({ id: crawl.id, status: crawl.status, created }, created ? 202 : 200);
  });

  app.get("/crawls", async (c) => c.json({ crawls: await listCrawlSummaries(deps.kv) }));

  app.get("/crawls/:id", async (c) => c.json(await crawlStatus(deps.kv, crawlId(c), { now })));

  app.post("/crawls/:id/pause", async (c) => {
    const r = await pauseCrawl(deps.kv, crawlId(c), now);
    return c.json({ id: r.id, status: r.status });
  });
  app.post("/crawls/:id/resume", async (c) => {
    const r = await resumeCrawl({ kv: deps.kv, dispatcher: deps.dispatcher }, crawlId(c), { now });
    return c.json({ id: r.id, status: r.status });
  });
  app.post("/crawls/:id/cancel", async (c) => {
    const r = await cancelCrawl(deps.kv, crawlId(c), now);
    return c.json({ id: r.id, status: r.status });
  });

  app.get("/crawls/:id/items", async (c) => {
    const id = crawlId(c);
    const rawLimit = c.req.query("limit") ?? "100";
    if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 1000) {
      throw new InputError("limit must be a whole number from 1 to 1000");
    }
    const cursor = c.req.query("cursor");
    if (cursor !== undefined && !/^[A-Za-z0-9_+/=-]{1,4096}$/.test(cursor)) {
      throw new InputError("cursor is malformed");
    }
    const page = await crawlItemsPage(deps.kv, id, { limit: Number(rawLimit), cursor });
    const items = page.items.map((it) => ({ ...it, doc: it.doc ? JSON.parse(it.doc) : undefined }));
    return c.json({ items, cursor: page.cursor });
  });

  return app;
}

function crawlId(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!isCrawlId(id)) throw new InputError("crawl id is malformed");
  return id;
}

function authenticate(token: string | null) {
  return async (c: Context, next: () => Promise<void>) => {
    if (token === null) return await next();
    const header = c.req.header("authorization") ?? "";
    const m = /^Bearer (.+)$/.exec(header);
    if (!m || !(await safeEqual(m[1], token))) {
      return c.json({ error: "missing or wrong bearer token" }, 401, {
        "www-authenticate": 'Bearer realm="rankcrawl"',
      });
    }
    await next();
  };
}
