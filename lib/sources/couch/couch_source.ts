/**
 * The CouchDB HTTP source: `_all_docs` listings as a rank oracle, documents one by one, in bulk
 * (`include_docs`, `_bulk_get`) or from a separate document host (the npm replica serves ids only;
 * documents come from registry.npmjs.org), and `_changes`. Every exchange goes through
 * `http.ts` (redirect policy, byte caps, timeouts, retries); answers of the wrong shape are fatal,
 * never guessed around (`../answers/`); revisions are looked up in `couch_revs.ts`.
 *
 * The source learns the registry's page cap: a 400 that names `limit` lowers
 * `capabilities.maxPage` and the request is made again with the smaller limit (the caller gets a
 * shorter page; it never reads a short page as the end of anything). An answer over the byte cap
 * is that request's own problem, never a cap for the others.
 *
 * @module
 */
import { DOCUMENT_RETRY } from "../../base/retry_policy.ts";
import { PermanentError } from "../../base/errors.ts";
import { redactUrl } from "../../base/redact.ts";
import { normalizeSourceUrl } from "../../base/spec.ts";
import type {
  ChangeRow,
  DocMode,
  DocOptions,
  DocResult,
  FeedAsk,
  LearnedCaps,
  ListOptions,
  Page,
  Source,
} from "../../plan/source.ts";
import { isRefusal, learnedFrom } from "./learned_caps.ts";
import { lookUpRevs } from "./couch_revs.ts";
import { checkBulkGet, checkChanges } from "../answers/mod.ts";
import { HttpClient, type HttpOptions, TooLargeError } from "../http/mod.ts";
import {
  allDocsDialect,
  type ListingContext,
  type ListingDialect,
  viewDialect,
} from "./listing_dialect.ts";
import { CouchDocs, probeDocMode } from "./couch_docs.ts";
import { keepFields, keepingFields } from "./doc_fields.ts";
import { CouchExchange, MAX_BULK_BYTES, PAGE_BYTES, ROW_BYTES } from "./couch_exchange.ts";
import type { IdOrder } from "../../plan/id_order.ts";

/** Options of {@linkcode CouchSource}. */
export interface CouchSourceOptions extends HttpOptions {
  /** Base URL for documents (`<docsUrl>/<encoded id>`). @default the database URL */
  docsUrl?: string;
  /**
   * Largest page asked of the registry, until it says it takes fewer (a 400 naming `limit`
   * lowers `capabilities.maxPage`). @default 10000, the npm replica's cap
   */
  maxPage?: number;
  /** Whether to use `skip` (only for sources whose offsets are not ranks). @default false */
  skip?: boolean;
  /** Documents above this many bytes are `tooLarge` (never held in memory). @default 33554432 */
  maxDocBytes?: number;
  /** Attempts for one document before its transient failure is thrown. @default 4 */
  docMaxAttempts?: number;
  /** Timeout of one document request, in milliseconds. @default 20000 */
  docTimeoutMs?: number;
  /**
   * List a view (`ddoc/view`) instead of `_all_docs`: keys are then encoded `(key, docid)` rows
   * (`lib/plan/view/view_keys.ts`), documents are the rows' documents, and there is no change feed.
   * @default none: `_all_docs`
   */
  view?: string;
  /**
   * What a crawl remembered its registry serves (see `LearnedCaps`): asked in those forms from the
   * start. @default nothing known: learned as the registry answers
   */
  learned?: Partial<LearnedCaps> | null;
  /**
   * Keep only these top-level fields of every document (`_id` and `_rev` always), cut as each
   * arrives, in listings, `_bulk_get` and GETs alike (`doc_fields.ts`). @default whole documents
   */
  docFields?: readonly string[] | null;
}

/**
 * A CouchDB database reached over HTTP: its listing as a rank oracle (`offset`), its documents,
 * its change feed, whatever dialect it turns out to speak (learned as it answers).
 *
 * @example
 * ```ts
 * const source = new CouchSource("https://replicate.npmjs.com/registry", {
 *   docsUrl: "https://registry.npmjs.org", // npm's replica serves names only
 *   headers: [parseHeader("User-Agent: my-mirror/1.0")],
 * });
 * const page = await source.list({ start: "react", limit: 3 });
 * // page.offset: the names before "react"; page.rows: react and the two after it
 * ```
 */
export class CouchSource implements Source {
  readonly description: string;
  readonly capabilities: { skip: boolean; maxPage: number };
  #db: string;
  #docs: string;
  #http: HttpClient;
  #x: CouchExchange;
  #docsById: CouchDocs;
  #requests = 0;
  #docMode: Promise<DocMode> | null = null;
  #listing: ListingDialect;
  #learned: LearnedCaps;
  #noFeedHead = false;
  /** Rows of `_changes` one answer was last seen to fit (an answer over its cap halves it). */
  #changesFit = Infinity;
  #fields: readonly string[] | null;

  /**
   * Opens `dbUrl` (e.g. `http://127.0.0.1:5984/registry`); nothing is requested until used.
   *
   * @example
   * ```ts
   * const npm = new CouchSource("https://replicate.npmjs.com/registry", {
   *   docsUrl: "https://registry.npmjs.org",
   *   maxPage: 10_000,
   * });
   * const page = await npm.list({ start: "react", limit: 3 }); // page.offset = rank of "react"
   * ```
   */
  constructor(dbUrl: string, options: CouchSourceOptions = {}) {
    // The same canonical form every entry point keeps (credentials are the caller's to give).
    this.#db = normalizeSourceUrl(dbUrl, "database URL", { credentials: true });
    this.#docs = options.docsUrl === undefined
      ? this.#db
      : normalizeSourceUrl(options.docsUrl, "document URL", { credentials: true });
    this.#listing = options.view === undefined ? allDocsDialect() : viewDialect(options.view);
    this.description = redactUrl(this.#db) +
      (this.#listing.label === null ? "" : ` ${this.#listing.label}`);
    this.#http = new HttpClient(options);
    this.#learned = learnedFrom(options.learned);
    this.#fields = options.docFields?.length ? options.docFields : null;
    this.#x = new CouchExchange({
      learned: this.#learned,
      http: this.#http,
      db: this.#db,
      description: this.description,
      listingPath: this.#listing.path,
      allDocs: this.#listing.kind === "all_docs",
    });
    this.#docsById = new CouchDocs({
      http: this.#http,
      docsUrl: this.#docs,
      maxDocBytes: options.maxDocBytes ?? 32 * 1024 * 1024,
      attempts: options.docMaxAttempts ?? DOCUMENT_RETRY.attemptsPerRound,
      timeoutMs: options.docTimeoutMs ?? 20_000,
    });
    this.capabilities = { skip: options.skip ?? false, maxPage: options.maxPage ?? 10_000 };
  }

  /** See {@linkcode Source.learned}: what this source learned its registry serves, so far. */
  get learned(): Readonly<LearnedCaps> {
    return this.#learned;
  }

  /** The document host, where documents come from another host than the database. */
  get docsUrl(): string | null {
    return this.#docs === this.#db ? null : redactUrl(this.#docs);
  }

  /** Logical listing requests made (retries not counted). */
  get requests(): number {
    return this.#requests;
  }

  /** Retries made after transient failures. */
  get retries(): number {
    return this.#http.retries;
  }

  /**
   * See {@linkcode Source.list}. Checks the answer's shape and order; garbage is a FatalError. A
   * limit the registry refuses (a 400 naming `limit`) is learned for later requests. An answer over
   * the byte cap concerns this request only: with documents, the same rows are listed without them
   * (each row then lacks its document: the caller fetches it by id); without, the limit is halved
   * for this request (the page says so in `limit`), down to 2 rows, and an answer still too large
   * is asked again like a 5xx, then fails. `updateSeq` is asked only of a registry not seen to
   * ignore or refuse it: a 400 to a listing that asked for it is asked again without it (and,
   * answered then, learned); the page then has no `seq`.
   */
  async list(options: ListOptions): Promise<Page> {
    this.#requests++;
    let limit = options.limit;
    const noSeq = this.#learned.listingSeq === "ignored" || this.#learned.listingSeq === "refused";
    let askSeq = (options.updateSeq ?? false) && !noSeq;
    let seqRefused = false;
    for (;;) {
      try {
        const floor = !options.includeDocs && limit <= 2;
        let page = await this.#listOnce({ ...options, limit, updateSeq: askSeq }, {
          oversizeIsTransient: floor,
        });
        if (this.#fields && options.includeDocs) {
          page = {
            ...page,
            rows: page.rows.map((r) => r.doc ? { ...r, doc: this.#shaped(r.doc) } : r),
          };
        }
        if (seqRefused) this.#learned.listingSeq = "refused";
        else if (askSeq) this.#learned.listingSeq = page.seq === undefined ? "ignored" : "served";
        return limit < options.limit ? { ...page, limit } : page;
      } catch (err) {
        if (err instanceof TooLargeError) {
          if (options.includeDocs) return await this.#listWithoutDocs({ ...options, limit });
          limit = Math.max(2, limit >> 1);
          continue;
        }
        const stated = this.#statedCap(err, limit);
        if (stated === null && askSeq && isRefusal(err) && err.status === 400) {
          // The optional parameter is the likeliest cause: asked again without it; a 400 again
          // was about something else, and is thrown.
          askSeq = false;
          seqRefused = true;
          continue;
        }
        if (stated === null) throw err;
        limit = stated;
        this.capabilities.maxPage = Math.min(this.capabilities.maxPage, Math.max(2, stated));
      }
    }
  }

  /** The smaller limit a 400 answer states (or half the limit when it names `limit` only). */
  #statedCap(err: unknown, limit: number): number | null {
    if (!(err instanceof PermanentError) || err.status !== 400) return null;
    // The registry's own words follow the route: "limit must be at most 100", "limit out of range"
    // (never the numbers of the URL before them).
    const route = `${this.#listing.path}: `;
    const reason = err.message.slice(err.message.indexOf(route) + route.length);
    if (!/limit/i.test(reason) || limit <= 1) return null;
    const stated = [...reason.matchAll(/\b(\d{1,7})\b/g)].map((m) => Number(m[1]))
      .filter((n) => n >= 1 && n < limit);
    return stated.length ? Math.max(...stated) : limit >> 1;
  }

  async #listOnce(
    options: ListOptions,
    o: { oversizeIsTransient?: boolean } = {},
  ): Promise<Page> {
    const ctx = this.#context((params) => this.#x.listing(params, options.includeDocs ?? false, o));
    return await this.#listing.list(options, ctx);
  }

  #context(send: ListingContext["send"]): ListingContext {
    return {
      description: this.description,
      maxPage: this.capabilities.maxPage,
      dbUrl: this.#db,
      getJson: (url, expected) => this.#x.getJson(url, expected),
      send,
    };
  }

  /** What the listing must know of the server before keys and ids can be mapped (asked once). */
  #prepare(): Promise<void> {
    return this.#listing.prepare(
      this.#context(() => Promise.reject(new Error("no listing while preparing"))),
    );
  }

  /**
   * How the registry orders ids (`utf16` on pouchdb-server: its keys are then made from ids, see
   * `lib/plan/id_order.ts`), known once anything was asked of it.
   */
  get idOrder(): IdOrder {
    return this.#listing.idOrder;
  }

  /**
   * The rows of a listing whose documents make it too large for one answer, without their
   * documents: the caller fetches each by id (one over `maxDocBytes` is `tooLarge` then). Nothing
   * is lost and no other page gets smaller.
   */
  async #listWithoutDocs(options: ListOptions): Promise<Page> {
    return await this.#listOnce({ ...options, includeDocs: false });
  }

  /**
   * See {@linkcode Source.doc}. 404, 410, 401, 403 and other 4xx, an answer that is not a JSON
   * object, an empty body, a refused redirect and an id that cannot be a URL path segment are the
   * document's own errors; over `maxDocBytes` it is `tooLarge`, and its body is never held.
   */
  async doc(key: string, options: DocOptions = {}): Promise<DocResult> {
    await this.#prepare();
    // Cut before it is kept: what is stored is the smaller document.
    const o = this.#fields ? keepingFields(options, this.#fields) : options;
    const r = this.#shaped(await this.#docsById.byId(this.#listing.docId(key), o));
    // A document host of its own may not have a document the registry lists yet (npm's lags its
    // feed): its 404 is worth asking again before it is the document's own answer.
    if (r.kind !== "error" || r.status !== 404 || this.#docs === this.#db) return r;
    return {
      ...r,
      reason: "not found on the document host (it may lag the registry)",
      later: true,
    };
  }

  /**
   * See {@linkcode Source.bulkDocs}: `POST _bulk_get`; an answer over the byte cap is split in
   * halves, down to one id, whose document is then `tooLarge`.
   */
  async bulkDocs(keys: string[]): Promise<DocResult[]> {
    await this.#prepare();
    const docs = await this.#bulkGet(keys.map((k) => this.#listing.docId(k)));
    return this.#fields ? docs.map((d) => this.#shaped(d)) : docs;
  }

  /** `doc` cut to the crawl's fields (as it is without them). */
  #shaped(doc: DocResult): DocResult {
    return this.#fields ? keepFields(doc, this.#fields) : doc;
  }

  async #bulkGet(ids: string[]): Promise<DocResult[]> {
    if (ids.length === 0) return [];
    if (this.#learned.post === "no") {
      throw new PermanentError(`${this.description} takes no POST (_bulk_get)`, { status: 405 });
    }
    try {
      return await this.#x.json(
        "_bulk_get",
        { body: { docs: ids.map((id) => ({ id })) }, maxBytes: MAX_BULK_BYTES },
        (body) => checkBulkGet(body, ids, this.description),
      );
    } catch (err) {
      if (err instanceof PermanentError && err.status === 405) this.#learned.post = "no";
      if (!(err instanceof TooLargeError)) throw err;
      // One document alone over the answer's cap: asked by itself (its own cap is larger).
      if (ids.length === 1) return [await this.#docsById.byId(ids[0])];
      const half = ids.length >> 1;
      return [
        ...await this.#bulkGet(ids.slice(0, half)),
        ...await this.#bulkGet(ids.slice(half)),
      ];
    }
  }

  /**
   * See {@linkcode Source.revs}: `POST _all_docs` with `{"keys": ids}`, or where POST is refused
   * `GET _all_docs?keys=[…]` (URLs kept under what servers take), or where that is refused too one
   * listing from each id; `REVS_PER_REQUEST` ids a request, a few at once (`couch_revs.ts`). Each
   * refusal is learned once. An id answered `not_found` or deleted has no revision. Views have no such
   * lookup (their keys are not document ids): the method is absent for them.
   */
  get revs(): ((ids: string[]) => Promise<(string | null)[]>) | undefined {
    if (this.#listing.kind !== "all_docs") return undefined;
    return async (keys) => {
      await this.#prepare();
      return await lookUpRevs({
        x: this.#x,
        learned: this.#learned,
        description: this.description,
        db: this.#db,
        docId: (k) => this.#listing.docId(k),
        byListing: (k) => this.#revByListing(k),
      }, keys);
    };
  }

  /** The revision of `key` by a one-row listing from it (null: not there). */
  async #revByListing(key: string): Promise<string | null> {
    const row = (await this.list({ start: key, limit: 1 })).rows[0];
    return row !== undefined && row.id === key ? row.rev : null;
  }

  /**
   * See {@linkcode Source.docMode}: documents from another host are fetched one by one; else
   * `include_docs` when a listing honours it, `_bulk_get` when it answers, `get` otherwise.
   */
  docMode(): Promise<DocMode> {
    this.#docMode ??= this.#probeDocMode();
    return this.#docMode;
  }

  async #probeDocMode(): Promise<DocMode> {
    const mode = await probeDocMode({
      ownHost: this.#docs !== this.#db,
      list: (includeDocs) => this.#listOnce({ limit: 1, includeDocs }),
      postRefused: () => this.#learned.post === "no",
      bulk: (ids) => this.bulkDocs(ids),
    });
    this.#learned.docs = mode;
    return mode;
  }

  /**
   * See {@linkcode Source.updateSeq}: `update_seq` from the database info. A view has none: its
   * rows change with documents in ways `_changes` does not say, so a view crawl is not caught up.
   */
  updateSeq(o: FeedAsk = {}): Promise<string | null> {
    if (this.#listing.kind !== "all_docs") return Promise.resolve(null);
    return this.#x.updateSeq({ maxAttempts: o.attempts });
  }

  /**
   * See {@linkcode Source.feedHead}: the newest row of `_changes?descending=true&limit=1`. Null
   * for a view, an empty feed, or a registry that refuses it (asked once: a refusal is
   * remembered).
   */
  async feedHead(o: FeedAsk = {}): Promise<string | null> {
    if (this.#listing.kind !== "all_docs" || this.#noFeedHead) return null;
    await this.#prepare();
    try {
      const feed = await this.#x.json(
        "_changes",
        {
          query: "descending=true&limit=1",
          maxBytes: PAGE_BYTES + ROW_BYTES,
          maxAttempts: o.attempts,
        },
        (body) => checkChanges(body, this.description),
      );
      return feed.rows[0]?.seq ?? null;
    } catch (err) {
      if (!(err instanceof PermanentError)) throw err;
      this.#noFeedHead = true;
      return null;
    }
  }

  /** See {@linkcode Source.changes}: each row's `id` is its key (see {@linkcode idOrder}). */
  async changes(
    since: string,
    limit: number,
    o: FeedAsk = {},
  ): Promise<{ rows: ChangeRow[]; lastSeq: string; pending?: number }> {
    await this.#prepare();
    // An answer over its cap (rows carrying whole documents, say) is asked again with half the
    // rows, down to one: never dropped, never taken for a feed that is not there. What fitted is
    // where the next batch starts.
    let feed;
    for (let asked = Math.min(limit, this.#changesFit);; asked = Math.max(1, asked >> 1)) {
      try {
        feed = await this.#x.json(
          "_changes",
          {
            query: `since=${encodeURIComponent(since)}&limit=${asked}`,
            maxBytes: PAGE_BYTES + asked * ROW_BYTES,
            maxAttempts: o.attempts,
          },
          (body) => checkChanges(body, this.description),
        );
        break;
      } catch (err) {
        if (!(err instanceof TooLargeError) || asked === 1) throw err;
        this.#changesFit = Math.max(1, asked >> 1);
      }
    }
    this.#learned.pending = feed.pending === undefined ? "no" : "yes";
    if (this.idOrder === "codepoint") return feed;
    return { ...feed, rows: feed.rows.map((r) => ({ ...r, id: this.#listing.keyOf(r.id) })) };
  }
}
