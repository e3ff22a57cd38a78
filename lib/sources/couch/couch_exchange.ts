/**
 * One CouchDB database's exchanges as `CouchSource` makes them: listing requests (GET, or POST
 * when the URL would be too long and the registry takes POST), JSON GETs of the database's own documents, and how their
 * answers are refused (4xx, `200 {"error": …}` asked again like a 5xx), each with a byte cap.
 *
 * @module
 */
import { FatalError, PermanentError } from "../../base/errors.ts";
import { redactUrl } from "../../base/redact.ts";
import { parseDocsListing, parseJsonAnswer, refuseErrorBody } from "../answers/mod.ts";
import type { HttpAnswer, HttpClient } from "../http/mod.ts";
import type { LearnedCaps } from "../../plan/source.ts";
import { isMethodRefusal } from "./learned_caps.ts";

/** Bytes a listing may use per row without documents (ids run up to 4 KB, escaped). */
export const ROW_BYTES = 16_384;
/** Fixed room in every listing answer. */
export const PAGE_BYTES = 65_536;
/** Room for rows of ids as long as CouchDB allows in any listing answer, however small. */
export const LONG_ROWS_BYTES = 1024 * 1024;
/**
 * Least cap on a view listing's answer: a view's rows carry values of any size (`emit(key,
 * doc.value)`), and one row up to a document's size (32 MiB) must fit even a one-row probe.
 */
export const VIEW_ROWS_BYTES = 32 * 1024 * 1024 + PAGE_BYTES;

/**
 * Largest answer that carries documents (a listing with `include_docs`, a `_bulk_get`): a larger
 * one is asked again without documents (fetched by id) or in halves, so that no answer holds more
 * than this in memory.
 */
export const MAX_BULK_BYTES = 16 * 1024 * 1024;

/**
 * Longest listing URL sent as a GET; longer ones are sent as POST with a JSON body, where the
 * registry takes POST (else as a GET all the same: the server may take it).
 */
export const MAX_GET_URL = 8_000;

/** Listing query parameters as the JSON body CouchDB takes instead (`*key` values are JSON). */
export function paramsBody(params: URLSearchParams): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [k, v] of params) {
    if (k.endsWith("key")) body[k] = JSON.parse(v);
    else if (v === "true" || v === "false") body[k] = v === "true";
    else if (/^\d+$/.test(v)) body[k] = Number(v);
    else body[k] = v;
  }
  return body;
}

/** What {@linkcode CouchExchange} works on. */
export interface CouchExchangeOptions {
  /** The client every request goes through. */
  http: HttpClient;
  /** The database URL (normalized). */
  db: string;
  /** The source, for messages (no credentials). */
  description: string;
  /** The listing's path under the database (`_all_docs`, or a view's). */
  listingPath: string;
  /** The listing is `_all_docs` (its 404 means no database). */
  allDocs: boolean;
  /** What the source learned of its registry (read and written here: POST refused). */
  learned: LearnedCaps;
}

/** The exchanges of one database (see the module comment). */
export class CouchExchange {
  #o: CouchExchangeOptions;

  /** Exchanges over `options.http`; nothing is requested until asked. */
  constructor(options: CouchExchangeOptions) {
    this.#o = options;
  }

  /**
   * A GET's status and JSON body (null when not JSON). Network failures, 5xx and a `200
   * {"error": …}` without the `expected` field are asked again, then thrown.
   */
  getJson(url: string, expected: string): Promise<{ status: number; body: unknown }> {
    return this.#o.http.request({ url, maxBytes: PAGE_BYTES + LONG_ROWS_BYTES }, (a) => {
      let body: unknown = null;
      try {
        body = JSON.parse(new TextDecoder().decode(a.body));
      } catch {
        // not JSON: the status alone says what it is
      }
      if (a.status === 200) refuseErrorBody(body, redactUrl(url), expected);
      return { status: a.status, body };
    });
  }

  /**
   * One listing request; its parsed JSON body. A POST the registry refuses (405 and the like) is
   * learned, and the listing asked again as a GET.
   */
  async listing(
    params: URLSearchParams,
    includeDocs: boolean,
    o: { oversizeIsTransient?: boolean },
  ): Promise<unknown> {
    const get = `${this.#o.db}/${this.#o.listingPath}?${params}`;
    // A listing from a long key would make a URL longer than servers take (and than fetch does):
    // it is sent as POST with the same parameters in a JSON body, as CouchDB 2.2+ accepts.
    if (get.length <= MAX_GET_URL || this.#o.learned.post === "no") {
      return await this.#listing({ url: get }, params, includeDocs, o);
    }
    try {
      const body = JSON.stringify(paramsBody(params));
      const post = { url: `${this.#o.db}/${this.#o.listingPath}`, method: "POST", body };
      return await this.#listing(post, params, includeDocs, o);
    } catch (err) {
      if (!isMethodRefusal(err)) throw err;
      this.#o.learned.post = "no";
      return await this.#listing({ url: get }, params, includeDocs, o);
    }
  }

  #listing(
    exchange: { url: string; method?: string; body?: string },
    params: URLSearchParams,
    includeDocs: boolean,
    o: { oversizeIsTransient?: boolean },
  ): Promise<unknown> {
    const path = this.#o.listingPath;
    const limit = Number(params.get("limit") ?? 0);
    const rows = PAGE_BYTES + Math.max(limit * ROW_BYTES, LONG_ROWS_BYTES);
    const maxBytes = includeDocs
      ? MAX_BULK_BYTES
      : this.#o.allDocs
      ? rows
      : Math.max(rows, VIEW_ROWS_BYTES);
    return this.#o.http.request(
      { ...exchange, maxBytes, oversizeIsTransient: o.oversizeIsTransient },
      (a) => {
        if (a.status === 404) {
          throw new FatalError(
            this.#o.allDocs
              ? `${this.#o.description} is not a CouchDB database (404 at _all_docs)`
              : `${this.#o.description}: no such database or view (404 at ${path})`,
          );
        }
        this.refuseErrors(a, path);
        // With documents, each stays the text it came as (`docs_listing.ts`); anything that does
        // not scan as such an answer is parsed plainly, which says what is wrong with it.
        const body = (includeDocs ? parseDocsListing(new TextDecoder().decode(a.body)) : null) ??
          parseJsonAnswer(a.body, a.headers.get("content-type"), this.what(path));
        // A `200 {"error": …}` is refused here, inside the exchange, so that it is asked again
        // like a 5xx (the dialect's checks run after the exchange).
        return refuseErrorBody(body, this.#o.description, "rows");
      },
    );
  }

  /**
   * One request to `path` under the database, a GET with `query` or a POST of `body` as JSON: its
   * 4xx refused (see {@linkcode refuseErrors}), its answer parsed as JSON and handed to `check`,
   * inside the exchange (so that what `check` or the parse finds transient is asked again).
   */
  json<T>(
    path: string,
    o: { query?: string; body?: unknown; maxBytes: number; maxAttempts?: number },
    check: (body: unknown) => T,
  ): Promise<T> {
    const url = `${this.#o.db}/${path}${o.query ? `?${o.query}` : ""}`;
    const post = o.body === undefined ? {} : { method: "POST", body: JSON.stringify(o.body) };
    const tries = o.maxAttempts === undefined ? {} : { maxAttempts: o.maxAttempts };
    return this.#o.http.request({ url, ...post, maxBytes: o.maxBytes, ...tries }, (a) => {
      this.refuseErrors(a, path);
      return check(parseJsonAnswer(a.body, a.headers.get("content-type"), this.what(path)));
    });
  }

  /** The database's `update_seq` from its info (null: it has none), tried `maxAttempts` times. */
  updateSeq(o: { maxAttempts?: number } = {}): Promise<string | null> {
    const tries = o.maxAttempts === undefined ? {} : { maxAttempts: o.maxAttempts };
    return this.#o.http.request({ url: this.#o.db, maxBytes: PAGE_BYTES, ...tries }, (a) => {
      this.refuseErrors(a, "");
      const v = refuseErrorBody(
        parseJsonAnswer(a.body, a.headers.get("content-type"), this.#o.description),
        this.#o.description,
        "update_seq",
      );
      if (typeof v !== "object" || v === null || Array.isArray(v)) {
        throw new FatalError(`${this.#o.description} info is not a JSON object`);
      }
      const seq = (v as Record<string, unknown>).update_seq;
      return seq === undefined || seq === null ? null : String(seq);
    });
  }

  /** `description/path`, for messages. */
  what(path: string): string {
    return `${this.#o.description}/${path}`;
  }

  /** 4xx answers of database routes: access refused is fatal, the rest permanent. */
  refuseErrors(a: HttpAnswer, path: string): void {
    if (a.status < 400) return;
    const reason = new TextDecoder().decode(a.body.subarray(0, 300)).replace(/\s+/g, " ");
    if (a.status === 401 || a.status === 403) {
      throw new FatalError(`access denied (HTTP ${a.status}) at ${this.what(path)}`);
    }
    throw new PermanentError(`HTTP ${a.status} at ${this.what(path)}: ${reason}`, {
      status: a.status,
    });
  }
}
