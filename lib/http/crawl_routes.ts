/**
 * The `/crawls` routes: create (sources normalized and checked against the allowlist first),
 * list, status, pause, resume (a failed crawl is planned again or resumed), cancel, delete (with
 * everything it stored), items page by page, and the plan picture.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import type { Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import { InputError } from "../base/errors.ts";
import { redactUrl } from "../base/redact.ts";
import {
  buildSpec,
  CRAWL_ID_PATTERN,
  CRAWL_ID_RULE,
  crawlIdFor,
  isCrawlId,
  MAX_CRAWL_SINKS,
  MAX_DOC_FIELDS,
  normalizeSourceUrl,
  SPEC_LIMITS,
} from "../base/spec.ts";
import {
  cancelCrawl,
  crawlDocErrors,
  crawlItemsPage,
  type CrawlLimits,
  crawlPicture,
  crawlStatus,
  createCrawl,
  deleteCrawl,
  type Dispatcher,
  findCrawl,
  listCrawlSummaries,
  pauseCrawl,
  resumeCrawl,
} from "../engine/mod.ts";
import { planSvg } from "../plan/plan_svg.ts";
import { shownKey } from "../plan/shown_key.ts";
import { isValueDigest, splitValueBlob } from "../plan/view/mod.ts";
import { isAllowedSource } from "./auth.ts";
import type { PaceState } from "../sources/http/mod.ts";

/** What the crawl routes need. */
export interface CrawlRouteDeps {
  /** The store. */
  kv: Deno.Kv;
  /** URL prefixes a crawl may target. */
  allowedSources: readonly string[];
  /** Where work goes (planning, resumed shards). */
  dispatcher: Dispatcher;
  /** What records' times are read from. */
  clock: Clock;
  /** Largest request body, in bytes. */
  maxBodyBytes: number;
  /** The pace of this process's requests to the given URLs' hosts. @default none shown */
  pace?: (only: readonly string[]) => PaceState;
  /** Bounds on crawls a new one must stay within (429 or 409 beyond). */
  limits: CrawlLimits;
  /** The sinks a crawl may name (`SINKS`). @default none */
  sinkNames: readonly string[];
}

const L = SPEC_LIMITS;
const CreateBody = z.object({
  source: z.string().max(2000),
  shards: z.number().int().min(L.shards.min).max(L.shards.max),
  docs: z.boolean().optional(),
  docsUrl: z.string().max(2000).optional(),
  concurrency: z.number().int().min(L.concurrency.min).max(L.concurrency.max).optional(),
  maxPage: z.number().int().min(L.maxPage.min).max(L.maxPage.max).optional(),
  rebalance: z.boolean().optional(),
  follow: z.boolean().optional(),
  view: z.string().max(201).optional(),
  rate: z.number().min(L.rate.min).max(L.rate.max).optional(),
  docFields: z.array(z.string().max(100)).max(MAX_DOC_FIELDS).optional(),
  abbreviated: z.boolean().optional(),
  sinks: z.array(z.string().max(32)).max(MAX_CRAWL_SINKS).optional(),
  id: z.string().regex(CRAWL_ID_PATTERN, `id must be ${CRAWL_ID_RULE}`).optional(),
}).strict();

/**
 * A database URL given to the API, as the crawler keeps it (`normalizeSourceUrl`; credentials are
 * refused: they would be stored and shown). @throws InputError (400).
 */
export function normalizeSource(raw: string, field: string): string {
  return normalizeSourceUrl(raw, field);
}

function crawlId(c: Context): string {
  const id = c.req.param("id") ?? "";
  if (!isCrawlId(id)) throw new InputError("crawl id is malformed");
  return id;
}

/** Adds the `/crawls` routes to `app` (authentication is the caller's middleware). */
export function addCrawlRoutes(app: Hono, deps: CrawlRouteDeps): void {
  const { kv, clock } = deps;
  const limit = bodyLimit({
    maxSize: deps.maxBodyBytes,
    onError: (c) => c.json({ error: "request body too large" }, 413),
  });

  app.post("/crawls", limit, (c) => createFromBody(c, deps));

  app.get("/crawls", async (c) => c.json({ crawls: await listCrawlSummaries(kv) }));
  app.get("/crawls/:id", async (c) => {
    const status = await crawlStatus(kv, crawlId(c), { clock });
    if (!deps.pace) return c.json(status);
    // The rate in force for this crawl: its own, the process's, and its hosts' learned paces.
    const crawl = await findCrawl(kv, status.id);
    const urls = [crawl?.source, crawl?.docsUrl].filter((u): u is string =>
      !!u && !u.startsWith("demo:")
    );
    const pace = deps.pace(urls);
    return c.json({ ...status, pace: { crawlRatePerSecond: crawl?.rate ?? null, ...pace } });
  });

  app.post("/crawls/:id/pause", async (c) => {
    const r = await pauseCrawl(kv, crawlId(c), { clock });
    return c.json({ id: r.id, status: r.status });
  });
  app.post("/crawls/:id/resume", async (c) => {
    const r = await resumeCrawl({ kv, dispatcher: deps.dispatcher }, crawlId(c), { clock });
    return c.json({ id: r.id, status: r.status });
  });
  app.post("/crawls/:id/cancel", async (c) => {
    const r = await cancelCrawl(kv, crawlId(c), { clock });
    return c.json({ id: r.id, status: r.status });
  });
  app.delete("/crawls/:id", async (c) => {
    const id = crawlId(c);
    return c.json({ id, deleted: true, keys: await deleteCrawl(kv, id, { clock }) });
  });

  app.get("/crawls/:id/items", (c) => itemsPage(c, kv));
  app.get("/crawls/:id/errors", (c) => errorsPage(c, kv));
  app.get("/crawls/:id/plan.svg", async (c) => {
    const picture = await crawlPicture(kv, crawlId(c));
    return c.body(planSvg(picture), 200, { "content-type": "image/svg+xml" });
  });
}

/**
 * `POST /crawls`: validates the body, normalizes and checks the sources against the allowlist,
 * creates the crawl (within the crawl bounds) and asks for its planning; 200 when it existed.
 */
async function createFromBody(c: Context, deps: CrawlRouteDeps): Promise<Response> {
  const { kv, clock } = deps;
  const body = await c.req.json().catch(() => {
    throw new InputError("body is not valid JSON");
  });
  const parsed = CreateBody.safeParse(body);
  if (!parsed.success) {
    const i = parsed.error.issues[0];
    throw new InputError(`${i.path.join(".") || "body"}: ${i.message}`);
  }
  const { id: givenId, ...input } = parsed.data;
  input.source = normalizeSource(input.source, "source");
  if (input.docsUrl !== undefined) input.docsUrl = normalizeSource(input.docsUrl, "docsUrl");
  for (const url of [input.source, input.docsUrl]) {
    if (url !== undefined && !isAllowedSource(url, deps.allowedSources)) {
      return c.json(
        { error: `source not allowed: ${redactUrl(url)} is outside ALLOWED_SOURCES` },
        403,
      );
    }
  }
  const spec = buildSpec(input);
  const unknown = (spec.sinks ?? []).find((n) => !deps.sinkNames.includes(n));
  if (unknown !== undefined) {
    throw new InputError(
      `sinks: no sink is named "${unknown}" (${
        deps.sinkNames.length ? `SINKS names ${deps.sinkNames.join(", ")}` : "SINKS is not set"
      })`,
    );
  }
  const id = givenId ?? await crawlIdFor(spec);
  let { crawl, created } = await createCrawl(kv, spec, { id, clock, ...deps.limits });
  if (crawl.status === "deleting") {
    // A delete of this crawl was interrupted: finish it; then this is a new crawl.
    await deleteCrawl(kv, id, { clock });
    ({ crawl, created } = await createCrawl(kv, spec, { id, clock, ...deps.limits }));
  }
  if (created) await deps.dispatcher.plan(id);
  return c.json({ id: crawl.id, status: crawl.status, created }, created ? 202 : 200);
}

/** The `limit` (1..1000, 100 by default) and `cursor` of a paged route. @throws InputError */
function pageParams(c: Context): { limit: number; cursor?: string } {
  const rawLimit = c.req.query("limit") ?? "100";
  if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 1000) {
    throw new InputError("limit must be a whole number from 1 to 1000");
  }
  const cursor = c.req.query("cursor");
  if (cursor !== undefined && !/^[A-Za-z0-9_+/=-]{1,4096}$/.test(cursor)) {
    throw new InputError("cursor is malformed");
  }
  return { limit: Number(rawLimit), cursor };
}

/**
 * `GET /crawls/:id/errors`: a page of the documents the crawl could not have, `{id, status,
 * reason}` in key order (a view's rows by their document id and key).
 */
async function errorsPage(c: Context, kv: Deno.Kv): Promise<Response> {
  const id = crawlId(c);
  const page = await crawlDocErrors(kv, id, pageParams(c));
  const crawl = await findCrawl(kv, id);
  const shown = { view: crawl?.view !== undefined, idOrder: crawl?.idOrder };
  const errors = page.errors.map((e) => ({
    ...shownKey(e.id, shown),
    status: e.status,
    reason: e.reason,
  }));
  return c.json({ errors, cursor: page.cursor });
}

/** `GET /crawls/:id/items`: a page of items; a view's rows as `{key, id, value}`. */
async function itemsPage(c: Context, kv: Deno.Kv): Promise<Response> {
  const id = crawlId(c);
  const page = await crawlItemsPage(kv, id, pageParams(c));
  const crawl = await findCrawl(kv, id);
  const shown = { view: crawl?.view !== undefined, idOrder: crawl?.idOrder };
  // A view's row: its stored id is the encoded (key, docid) and its rev the value's JSON (a long
  // value's digest: the value is stored with the document then).
  const items = page.items.map(({ id, rev, ...it }) => {
    const { value, doc } = shown.view && isValueDigest(rev) && it.doc !== undefined
      ? splitValueBlob(it.doc)
      : { value: rev, doc: it.doc };
    return {
      ...shownKey(id, shown),
      ...(shown.view ? { value: JSON.parse(value) } : { rev }),
      ...it,
      doc: doc ? JSON.parse(doc) : undefined,
    };
  });
  return c.json({ items, cursor: page.cursor });
}
