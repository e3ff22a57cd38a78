/**
 * Documents fetched one by one from a CouchDB database or a separate document host (the npm
 * replica serves ids only; documents come from registry.npmjs.org): URLs that cannot leave the
 * host's path, a byte cap per document, damaged bodies told from a document's own answer; and
 * which way a registry serves documents best (`probeDocMode`).
 *
 * @module
 */
import { DOCUMENT_RETRY } from "../../base/retry_policy.ts";
import { errorLine, PermanentError, TransientError } from "../../base/errors.ts";
import { redactUrl } from "../../base/redact.ts";
import type { DocMode, DocOptions, DocResult, Page } from "../../plan/source.ts";
import { docFromBody } from "../answers/mod.ts";
import { type HttpAnswer, type HttpClient, SlowBodyError, TooLargeError } from "../http/mod.ts";

/** Longest document URL asked for (the HTTP stack takes up to 65,534 bytes). */
const MAX_DOC_URL = 32_000;

/** A document's own error from a 4xx answer. */
function docError(a: HttpAnswer): DocResult {
  const reason = a.status === 404 || a.status === 410
    ? "not found"
    : a.status === 401 || a.status === 403
    ? "access denied"
    : new TextDecoder().decode(a.body.subarray(0, 200)).replace(/\s+/g, " ");
  return { kind: "error", status: a.status, reason };
}

/** How documents are fetched. */
export interface CouchDocsOptions {
  /** The client every request goes through. */
  http: HttpClient;
  /** Base URL of documents (`<docsUrl>/<encoded id>`). */
  docsUrl: string;
  /** Documents above this many bytes are `tooLarge`. */
  maxDocBytes: number;
  /** Attempts for one document in one round. */
  attempts: number;
  /** Timeout of one document request, in milliseconds. */
  timeoutMs?: number;
}

/** Fetches documents by id (see the module comment). */
export class CouchDocs {
  #o: CouchDocsOptions;
  #base: URL | null = null;

  /** Fetches with `options`; nothing is requested until asked. */
  constructor(options: CouchDocsOptions) {
    this.#o = options;
  }

  /**
   * The document `id`: see `Source.doc`. An id no URL can name is the document's own error; a
   * body damaged in every attempt of two rounds is too.
   */
  async byId(id: string, options: DocOptions = {}): Promise<DocResult> {
    const url = this.#docUrl(id);
    if (url === null) {
      return {
        kind: "error",
        status: 0,
        reason: "this id cannot be requested by URL ('.', '..', a lone surrogate, or too long)",
      };
    }
    // A 200 whose body is empty or cut is most likely damaged on the way: worth other attempts.
    // Only when every attempt of two rounds answered that way is it the document's own answer:
    // one round of 4 can be all damaged by chance on a registry that cuts a few % of answers.
    for (let round = 1;; round++) {
      const r = await this.#fetchDoc(url, id, options);
      if (!("damaged" in r)) return r;
      if (round === DOCUMENT_RETRY.damagedRounds) {
        return { kind: "error", status: 200, reason: r.damaged };
      }
    }
  }

  /** One round of attempts at a document; `damaged` when every attempt's body was damaged. */
  async #fetchDoc(
    url: string,
    expectedId: string,
    options: DocOptions,
  ): Promise<DocResult | { damaged: string }> {
    let damaged = 0;
    try {
      return await this.#o.http.request({
        url,
        maxBytes: this.#o.maxDocBytes,
        maxAttempts: this.#o.attempts,
        timeoutMs: this.#o.timeoutMs,
        ifNoneMatch: options.ifNoneMatch,
      }, async (a) => {
        if (a.status >= 400) return docError(a);
        if (a.status === 304) {
          return {
            kind: "error",
            status: 304,
            reason: "not modified: the document host still serves what it served before",
            later: true,
          };
        }
        let doc: DocResult;
        try {
          doc = docFromBody(a.body, a.headers.get("content-type"), expectedId, {
            rawOverBytes: options.rawOverBytes,
          });
          if (doc.kind === "error" && doc.reason === "empty body") {
            throw new TransientError(`empty body from ${redactUrl(url)}`, { status: 200 });
          }
        } catch (err) {
          if (err instanceof TransientError) damaged++;
          throw err;
        }
        // Stored while this answer still holds its large-answer permit.
        const kept = doc.kind === "raw" && options.keep ? await options.keep(expectedId, doc) : doc;
        const etag = a.headers.get("etag");
        return etag !== null && kept.kind !== "error" && kept.kind !== "tooLarge"
          ? { ...kept, etag }
          : kept;
      });
    } catch (err) {
      if (err instanceof TooLargeError) return { kind: "tooLarge", bytes: err.bytes };
      if (err instanceof PermanentError) {
        return { kind: "error", status: err.status ?? 0, reason: err.message };
      }
      if (!(err instanceof TransientError)) throw err;
      // A host that answers this document a byte at a time (a slowloris) is this document's
      // problem, recorded as its error, not its page's to retry for minutes.
      if (err.cause instanceof SlowBodyError) {
        return { kind: "error", status: 0, reason: errorLine(err) };
      }
      if (damaged === this.#o.attempts) {
        return { damaged: err.message.replace(/ \(\d+ attempts\)$/, "") };
      }
      throw new TransientError(err.message, {
        cause: err,
        status: err.status === 200 ? 0 : err.status,
      });
    }
  }

  /**
   * The document URL of `id`, or null when no URL names it: `.` and `..` are path steps whatever
   * their encoding, and a lone surrogate has no UTF-8 to percent-encode.
   */
  #docUrl(id: string): string | null {
    if (id === "." || id === ".." || !id.isWellFormed()) return null;
    const url = `${this.#o.docsUrl}/${encodeURIComponent(id)}`;
    if (url.length > MAX_DOC_URL) return null;
    const base = this.#base ??= new URL(this.#o.docsUrl + "/");
    const parsed = new URL(url);
    return parsed.origin === base.origin && parsed.pathname.startsWith(base.pathname) ? url : null;
  }
}

/**
 * How a registry serves documents best: one by one from a host of their own (`ownHost`); else
 * `include_docs` when a listing honours it, `_bulk_get` when it answers (and POST is not known to
 * be refused), `get` otherwise.
 */
export async function probeDocMode(o: {
  ownHost: boolean;
  list: (includeDocs: boolean) => Promise<Page>;
  postRefused: () => boolean;
  bulk: (ids: string[]) => Promise<DocResult[]>;
}): Promise<DocMode> {
  if (o.ownHost) return "get";
  const first = await o.list(true).catch(() => null);
  if (first && (first.rows.length === 0 || first.rows[0].doc?.kind === "doc")) {
    return "include_docs";
  }
  const id = first?.rows[0]?.id ?? (await o.list(false)).rows[0]?.id;
  if (id === undefined || o.postRefused()) return "get";
  const bulk = await o.bulk([id]).catch(() => null);
  return bulk?.[0]?.kind === "doc" ? "bulk_get" : "get";
}
