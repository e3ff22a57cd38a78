/**
 * How a CouchDB listing is asked for and read: `_all_docs` (ids are keys) or a view (rows are
 * `(key, docid)` pairs, carried as encoded string keys, see `lib/plan/view/view_keys.ts`). The
 * {@linkcode CouchSource} sends what a dialect builds and hands the answer back to it.
 *
 * @module
 */
import { FatalError } from "../base/errors.ts";
import { VIEW_PATTERN } from "../base/spec.ts";
import type { ListOptions, Page } from "../plan/source.ts";
import { decodeViewRow } from "../plan/view/mod.ts";
import { checkPage } from "./couch_answers.ts";
import { type GetJson, viewCollation } from "./view_collation.ts";
import { listViewPage } from "./view_listing.ts";
import { ViewState } from "./view_rows.ts";

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
  /** The path under the database, e.g. `_all_docs`. */
  path: string;
  /** Added to the source's description (e.g. `view pkg/by_name`). */
  label: string | null;
  /**
   * The checked page for `options` (see `Source.list`), made of one request or more (a view on a
   * server that ignores `startkey_docid` may take several).
   */
  list(options: ListOptions, ctx: ListingContext): Promise<Page>;
  /** The document id of a listed key. */
  docId(key: string): string;
}

/** `_all_docs`: keys are ids. */
export const ALL_DOCS: ListingDialect = {
  path: "_all_docs",
  label: null,
  async list(options, ctx) {
    const params = new URLSearchParams();
    if (options.start !== undefined && options.start !== null) {
      params.set("startkey", JSON.stringify(options.start));
    }
    if (options.end !== undefined && options.end !== null) {
      params.set("endkey", JSON.stringify(options.end));
      params.set("inclusive_end", "false");
    }
    params.set("limit", String(options.limit));
    if (options.descending) params.set("descending", "true");
    if (options.skip) params.set("skip", String(options.skip));
    if (options.includeDocs) params.set("include_docs", "true");
    if (options.updateSeq) params.set("update_seq", "true");
    return checkPage(await ctx.send(params), options, ctx.description);
  },
  docId: (key) => key,
};

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
  return {
    path: `_design/${encodeURIComponent(ddoc)}/_view/${encodeURIComponent(name)}`,
    label: `view ${ddoc}/${name}`,
    list: async (options, ctx) => {
      state.ready ??= viewCollation(ctx.getJson, ctx.dbUrl, {
        ddoc,
        name,
        description: ctx.description,
      }).then((c) => void (state.collation = c), (err) => {
        if (!(err instanceof FatalError)) state.ready = null; // asked again next time
        throw err;
      });
      await state.ready;
      return await listViewPage(options, { ...ctx, state });
    },
    docId: (key) => decodeViewRow(key).docid,
  };
}
