/**
 * How a CouchDB listing is asked for and read: `_all_docs` (ids are keys) or a view (rows are
 * `(key, docid)` pairs, carried as encoded string keys, see `lib/plan/view/view_keys.ts`). The
 * {@linkcode CouchSource} sends what a dialect builds and hands the answer back to it.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import { VIEW_PATTERN } from "../../base/spec.ts";
import type { ListOptions, Page } from "../../plan/source.ts";
import { decodeViewRow } from "../../plan/view/mod.ts";
import { checkPage } from "../answers/mod.ts";
import { type GetJson, listViewPage, serverKind, viewCollation, ViewState } from "../view/mod.ts";
import { idOfKey, type IdOrder, keyOfId } from "../../plan/id_order.ts";

/** Sends one listing request with these parameters and gives back its parsed JSON body. */
export type SendListing = (params: URLSearchParams) => Promise<unknown>;

/** What a dialect lists with. */
export interface ListingContext {
  /** Sends one listing request. */
  send: SendListing;
  /** The source, for messages. */
  description: string;
  /** The largest limit the server takes, as far as known. */
  maxPage: number;
  /** The database URL. */
  dbUrl: string;
  /** A GET of any URL of the server (status and JSON body), for what a dialect must ask first. */
  getJson: GetJson;
}

/** A kind of listing. */
export interface ListingDialect {
  /** `_all_docs` (keys are ids, mapped by the registry's id order) or a view. */
  kind: "all_docs" | "view";
  /** The path under the database, e.g. `_all_docs`. */
  path: string;
  /** Added to the source's description (e.g. `view pkg/by_name`). */
  label: string | null;
  /**
   * Learns, once, what the dialect must know of its server before keys mean anything (a view's
   * collation, the registry's id order); asked again after a failure that is not fatal.
   */
  prepare(ctx: ListingContext): Promise<void>;
  /**
   * The checked page for `options` (see `Source.list`), made of one request or more (a view on a
   * server that ignores `startkey_docid` may take several). Prepares first (see
   * {@linkcode prepare}), or meanwhile where the request does not depend on it.
   */
  list(options: ListOptions, ctx: ListingContext): Promise<Page>;
  /** The document id of a listed key (after {@linkcode prepare}). */
  docId(key: string): string;
  /** The key of a document id (`_all_docs` only; after {@linkcode prepare}). */
  keyOf(id: string): string;
  /** How the registry orders ids (`codepoint` until prepared). */
  readonly idOrder: IdOrder;
}

/** A step run once (with the first caller's context), again after a failure that is not fatal. */
function once<C>(step: (ctx: C) => Promise<void>): (ctx: C) => Promise<void> {
  let ready: Promise<void> | null = null;
  return (ctx) =>
    ready ??= step(ctx).catch((err) => {
      if (!(err instanceof FatalError)) ready = null;
      throw err;
    });
}

/**
 * `_all_docs`: keys are ids, or on a registry ordering ids by UTF-16 unit (pouchdb-server), keys
 * made from them (`lib/plan/id_order.ts`) so that key order is still the listing's order.
 */
export function allDocsDialect(): ListingDialect {
  let order: IdOrder = "codepoint";
  const prepare = once<ListingContext>(async (ctx) => {
    if (await serverKind(ctx.getJson, ctx.dbUrl) === "pouchdb") order = "utf16";
  });
  return {
    kind: "all_docs",
    path: "_all_docs",
    label: null,
    get idOrder() {
      return order;
    },
    prepare,
    async list(options, ctx) {
      const keyless = (options.start ?? null) === null && (options.end ?? null) === null;
      // Without keys the request is the same in either id order: it goes out with the first
      // question to the server (one round trip less at the start of every crawl), and only its
      // answer waits for the order.
      const ready = prepare(ctx).then(() => null, (err: unknown) => ({ err }));
      if (!keyless) {
        const failed = await ready;
        if (failed) throw failed.err;
      }
      const params = new URLSearchParams();
      if (options.start !== undefined && options.start !== null) {
        params.set("startkey", JSON.stringify(idOfKey(options.start, order)));
      }
      if (options.end !== undefined && options.end !== null) {
        params.set("endkey", JSON.stringify(idOfKey(options.end, order)));
        params.set("inclusive_end", "false");
      }
      params.set("limit", String(options.limit));
      if (options.descending) params.set("descending", "true");
      if (options.skip) params.set("skip", String(options.skip));
      if (options.includeDocs) params.set("include_docs", "true");
      if (options.updateSeq) params.set("update_seq", "true");
      const sent = await ctx.send(params).then((body) => ({ body }), (err: unknown) => ({ err }));
      const failed = await ready;
      if (failed) throw failed.err;
      if ("err" in sent) throw sent.err;
      const body = sent.body;
      return checkPage(order === "codepoint" ? body : keyedRows(body), options, ctx.description);
    },
    docId: (key) => idOfKey(key, order),
    keyOf: (id) => keyOfId(id, order),
  };
}

/** An `_all_docs` answer whose rows carry keys made from their ids (`docid`: the id itself). */
function keyedRows(body: unknown): unknown {
  const b = body as { rows?: unknown };
  if (typeof b !== "object" || b === null || !Array.isArray(b.rows)) return body;
  const rows = b.rows.map((r: Record<string, unknown> | null) => {
    if (typeof r !== "object" || r === null || typeof r.id !== "string" || r.key !== r.id) return r;
    const key = keyOfId(r.id, "utf16");
    return { ...r, id: key, key, docid: r.id };
  });
  return { ...b, rows };
}

/** Checks the name of a view: `ddoc/view`, each a plain name. @throws FatalError otherwise. */
export function parseViewName(view: string): { ddoc: string; name: string } {
  if (!VIEW_PATTERN.test(view)) {
    throw new FatalError(`a view is named ddoc/view (letters, digits, _ . -): "${view}"`);
  }
  const [ddoc, name] = view.split("/");
  return { ddoc, name };
}

/**
 * A view, `ddoc/view`. Listing bounds are encoded rows, or any string between them (the planner's
 * probes); see `view_listing.ts` for how they are asked of servers that honour docids or not.
 * Each dialect remembers what its server was seen to do.
 */
export function viewDialect(view: string): ListingDialect {
  const { ddoc, name } = parseViewName(view);
  const state = new ViewState();
  const prepare = once<ListingContext>(async (ctx) => {
    const view = { ddoc, name, description: ctx.description };
    state.collation = await viewCollation(ctx.getJson, ctx.dbUrl, view);
  });
  return {
    kind: "view",
    path: `_design/${encodeURIComponent(ddoc)}/_view/${encodeURIComponent(name)}`,
    label: `view ${ddoc}/${name}`,
    idOrder: "codepoint",
    prepare,
    async list(options, ctx) {
      await prepare(ctx);
      return await listViewPage(options, { ...ctx, state });
    },
    docId: (key) => decodeViewRow(key).docid,
    keyOf: () => {
      throw new FatalError("a view's keys are rows, not document ids");
    },
  };
}
