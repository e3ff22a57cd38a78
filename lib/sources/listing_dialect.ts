/**
 * How a CouchDB listing is asked for and read: `_all_docs` (ids are keys) or a view (rows are
 * `(key, docid)` pairs, carried as encoded string keys, see `lib/plan/view_keys.ts`). The
 * {@linkcode CouchSource} sends what a dialect builds and hands the answer back to it.
 *
 * @module
 */
import { FatalError } from "../base/errors.ts";
import { VIEW_PATTERN } from "../base/spec.ts";
import type { ListOptions, Page } from "../plan/source.ts";
import { ceilViewRow, decodeViewRow, encodeViewRow, type Json } from "../plan/view_keys.ts";
import { checkPage, refuseErrorBody } from "./couch_answers.ts";

/** One listing request as a dialect builds it. */
export interface ListingRequest {
  /** Query parameters. */
  params: URLSearchParams;
  /** Rows the request asks for (the caller's limit, or one more to drop). */
  limit: number;
  /** The checked page from the parsed answer. */
  finish(body: unknown): Page;
}

/** A kind of listing. */
export interface ListingDialect {
  /** The path under the database, e.g. `_all_docs`. */
  path: string;
  /** Added to the source's description (e.g. `view pkg/by_name`). */
  label: string | null;
  /** The request for `options`. */
  request(options: ListOptions, description: string): ListingRequest;
  /** The document id of a listed key. */
  docId(key: string): string;
}

/** `_all_docs`: keys are ids. */
export const ALL_DOCS: ListingDialect = {
  path: "_all_docs",
  label: null,
  request(options, description) {
    const params = new URLSearchParams();
    if (options.start !== undefined && options.start !== null) {
      params.set("startkey", JSON.stringify(options.start));
    }
    if (options.end !== undefined && options.end !== null) {
      params.set("endkey", JSON.stringify(options.end));
      params.set("inclusive_end", "false");
    }
    common(params, options, options.limit);
    return {
      params,
      limit: options.limit,
      finish: (body) => checkPage(body, options, description),
    };
  },
  docId: (key) => key,
};

function common(params: URLSearchParams, options: ListOptions, limit: number): void {
  params.set("limit", String(limit));
  if (options.descending) params.set("descending", "true");
  if (options.skip) params.set("skip", String(options.skip));
  if (options.includeDocs) params.set("include_docs", "true");
  if (options.updateSeq) params.set("update_seq", "true");
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
 * probes): each is turned into the least row at or above it, sent as `startkey`+`startkey_docid`
 * (or `endkey`+`endkey_docid`), so that `offset` stays the exact rank of the string asked.
 */
export function viewDialect(view: string): ListingDialect {
  const { ddoc, name } = parseViewName(view);
  return {
    path: `_design/${encodeURIComponent(ddoc)}/_view/${encodeURIComponent(name)}`,
    label: `view ${ddoc}/${name}`,
    request: (options, description) => viewRequest(options, description),
    docId: (key) => decodeViewRow(key).docid,
  };
}

/** An answer with no rows at the end of the listing (the bound is above every row). */
function emptyAtEnd(options: ListOptions, description: string): ListingRequest {
  const params = new URLSearchParams({ limit: "0" });
  return {
    params,
    limit: 0,
    finish: (body) => {
      const page = checkPage(viewRows(body, description), { limit: 0 }, description);
      return { offset: options.descending ? 0 : page.total, total: page.total, rows: [] };
    },
  };
}

function viewRequest(options: ListOptions, description: string): ListingRequest {
  const desc = options.descending ?? false;
  const params = new URLSearchParams();
  // Descending from a string that is not a row: the least row above it is sent, then dropped.
  let drop: string | null = null;
  if (options.start !== undefined && options.start !== null) {
    const c = ceilViewRow(options.start);
    if (c === null && !desc) return emptyAtEnd(options, description);
    if (c !== null) {
      params.set("startkey", JSON.stringify(c.key));
      params.set("startkey_docid", c.docid);
      if (desc && encodeViewRow(c) !== options.start) drop = encodeViewRow(c);
    }
  }
  if (options.end !== undefined && options.end !== null) {
    const c = ceilViewRow(options.end);
    if (c === null && desc) return emptyAtEnd(options, description);
    if (c !== null) {
      params.set("endkey", JSON.stringify(c.key));
      params.set("endkey_docid", c.docid);
      // Ascending: rows below the bound; descending: rows above the string, so the least row
      // above it is kept unless it is the string itself.
      params.set("inclusive_end", desc && encodeViewRow(c) !== options.end ? "true" : "false");
    }
  }
  const limit = options.limit + (drop === null ? 0 : 1);
  common(params, options, limit);
  return {
    params,
    limit,
    finish: (body) => {
      const mapped = viewRows(body, description);
      if (drop !== null && mapped.rows[0]?.id === drop) {
        mapped.rows.shift();
        mapped.offset++;
      }
      mapped.rows = mapped.rows.slice(0, options.limit);
      return checkPage(mapped, options, description);
    },
  };
}

/** A view answer reshaped as `_all_docs` rows: id = key = the encoded row, rev = value's JSON. */
function viewRows(
  body: unknown,
  description: string,
): { total_rows: unknown; offset: number; rows: { id: string }[]; update_seq: unknown } {
  const b = refuseErrorBody(body, description, "rows") as Record<string, unknown> | null;
  if (typeof b !== "object" || b === null || !Array.isArray(b.rows)) {
    throw new FatalError(`${description} answered garbage: no rows array (not a view?)`);
  }
  const rows = b.rows.map((r: Record<string, unknown> | null) => {
    if (typeof r !== "object" || r === null || typeof r.id !== "string" || !("key" in r)) {
      throw new FatalError(`${description} answered garbage: a row is not {id, key, value}`);
    }
    let id: string;
    try {
      id = encodeViewRow({ key: r.key as Json, docid: r.id });
    } catch (err) {
      throw new FatalError(`${description}: a view key is not JSON: ${String(r.key)}`, {
        cause: err,
      });
    }
    const v = r.value as Record<string, unknown> | null;
    const linked = typeof v === "object" && v !== null && typeof v._id === "string";
    return {
      id,
      key: id,
      value: { rev: JSON.stringify(r.value ?? null) },
      // The document a row carries: its own, or (null) the one its value links to.
      docid: linked ? null : r.id,
      ...("doc" in r ? { doc: r.doc } : {}),
    };
  });
  return { total_rows: b.total_rows, offset: b.offset as number, rows, update_seq: b.update_seq };
}
