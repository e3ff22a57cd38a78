/**
 * The CouchDB HTTP source: `_all_docs` listings as a rank oracle, documents from a configurable base
 * URL (the npm replica serves ids only; documents come from another host), `_changes`. Transient
 * failures (5xx, 429 with `Retry-After`, timeouts, dropped connections, cut JSON) are retried with
 * exponential backoff and full jitter; answers of the wrong shape are fatal, never guessed around.
 *
 * The sources layer (`lib/sources/`): implementations of the source interface, this HTTP one and
 * an in-memory one over the simulator's data.
 *
 * @module
 */
import { FatalError, PermanentError, TransientError } from "../base/errors.ts";
import { compareKeys } from "../plan/keys.ts";
import type { ChangeRow, DocResult, ListOptions, Page, Row, Source } from "../plan/source.ts";
import { redactUrl } from "../base/redact.ts";

/** Options of {@linkcode CouchSource}. */
export interface CouchSourceOptions {
  /** Base URL for documents (`<docsUrl>/<encoded id>`). @default the database URL */
  docsUrl?: string;
  /** The fetch to use (injected in tests). @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Per-request timeout, including the body, in milliseconds. @default 30000 */
  timeoutMs?: number;
  /** Attempts per request before a transient failure is thrown. @default 8 */
  maxAttempts?: number;
  /** First backoff step, in milliseconds. @default 100 */
  backoffBaseMs?: number;
  /** Largest backoff step (and cap on `Retry-After`), in milliseconds. @default 30000 */
  backoffMaxMs?: number;
  /** Largest page the source accepts. @default 1000 */
  maxPage?: number;
  /** Whether to use `skip` (only for sources whose offsets are not ranks). @default false */
  skip?: boolean;
  /** Random numbers in [0, 1) for jitter. @default Math.random */
  random?: () => number;
  /** Sleeps; injected so tests need not wait. @default setTimeout */
  sleep?: (ms: number) => Promise<void>;
  /** Called before each retry, for logs and counters (never given credentials). */
  onRetry?: (info: { attempt: number; delayMs: number; error: Error }) => void;
}

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Parses a `Retry-After` header (seconds or HTTP date) into milliseconds. */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number | undefined {
  if (value === null) return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0;
}

/**
 * A CouchDB database reached over HTTP.
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
export class CouchSource implements Source {
  readonly description: string;
  readonly capabilities: { skip: boolean; maxPage: number };
  #db: string;
  #docs: string;
  #fetch: typeof fetch;
  #o: Required<Omit<CouchSourceOptions, "docsUrl" | "fetch" | "onRetry" | "skip">>;
  #onRetry?: CouchSourceOptions["onRetry"];
  #requests = 0;
  #retries = 0;

  /** Opens `dbUrl` (e.g. `http://127.0.0.1:5984/registry`); nothing is requested until used. */
  constructor(dbUrl: string, options: CouchSourceOptions = {}) {
    this.#db = dbUrl.replace(/\/+$/, "");
    this.#docs = (options.docsUrl ?? dbUrl).replace(/\/+$/, "");
    this.description = redactUrl(this.#db);
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#o = {
      timeoutMs: options.timeoutMs ?? 30_000,
      maxAttempts: options.maxAttempts ?? 8,
      backoffBaseMs: options.backoffBaseMs ?? 100,
      backoffMaxMs: options.backoffMaxMs ?? 30_000,
      maxPage: options.maxPage ?? 1000,
      random: options.random ?? Math.random,
      sleep: options.sleep ?? defaultSleep,
    };
    this.#onRetry = options.onRetry;
    this.capabilities = { skip: options.skip ?? false, maxPage: this.#o.maxPage };
  }

  /** Logical requests made (retries not counted). */
  get requests(): number {
    return this.#requests;
  }

  /** Retries made after transient failures. */
  get retries(): number {
    return this.#retries;
  }

  /**
   * Runs one logical request with retries. `parse` turns a 2xx body into a value or throws; a
   * {@linkcode TransientError} from it (cut JSON) is retried like a 5xx.
   */
  async #request<T>(
    url: string,
    parse: (res: Response, text: string) => T,
    onStatus?: (res: Response) => T | undefined,
  ): Promise<T> {
    this.#requests++;
    let last: Error = new TransientError("no attempt made");
    for (let attempt = 1; attempt <= this.#o.maxAttempts; attempt++) {
      try {
        return await this.#attempt(url, parse, onStatus);
      } catch (err) {
        if (!(err instanceof TransientError)) throw err;
        last = err;
        if (attempt === this.#o.maxAttempts) break;
        const cap = Math.min(this.#o.backoffMaxMs, this.#o.backoffBaseMs * 2 ** (attempt - 1));
        let delayMs = Math.floor(this.#o.random() * cap);
        if (err.retryAfterMs !== undefined) {
          delayMs = Math.max(delayMs, Math.min(err.retryAfterMs, this.#o.backoffMaxMs));
        }
        this.#retries++;
        this.#onRetry?.({ attempt, delayMs, error: err });
        await this.#o.sleep(delayMs);
      }
    }
    throw new TransientError(
      `${this.#o.maxAttempts} attempts failed for ${redactUrl(url)}: ${last.message}`,
      { cause: last, status: (last as TransientError).status },
    );
  }

  async #attempt<T>(
    url: string,
    parse: (res: Response, text: string) => T,
    onStatus?: (res: Response) => T | undefined,
  ): Promise<T> {
    let res: Response;
    let text: string;
    try {
      res = await this.#fetch(url, {
        signal: AbortSignal.timeout(this.#o.timeoutMs),
        headers: { accept: "application/json" },
      });
    } catch (err) {
      throw new TransientError(`request failed: ${(err as Error).message}`, { cause: err });
    }
    if (res.status >= 500 || res.status === 429 || res.status === 408) {
      await res.body?.cancel();
      throw new TransientError(`HTTP ${res.status}`, {
        status: res.status,
        retryAfterMs: parseRetryAfter(res.headers.get("retry-after")),
      });
    }
    const special = onStatus?.(res);
    if (special !== undefined) {
      await res.body?.cancel();
      return special;
    }
    try {
      text = await res.text();
    } catch (err) {
      throw new TransientError(`body read failed: ${(err as Error).message}`, { cause: err });
    }
    if (res.status >= 400) {
      const reason = text.slice(0, 200).replace(/\s+/g, " ");
      if (res.status === 401 || res.status === 403) {
        throw new FatalError(`access denied (HTTP ${res.status}) at ${redactUrl(url)}`);
      }
      throw new PermanentError(`HTTP ${res.status} at ${redactUrl(url)}: ${reason}`, {
        status: res.status,
      });
    }
    return parse(res, text);
  }

  #json(res: Response, text: string, what: string): unknown {
    try {
      return JSON.parse(text);
    } catch (err) {
      const type = res.headers.get("content-type") ?? "";
      if (!type.includes("json") && /^\s*</.test(text)) {
        throw new FatalError(`${what} is not a CouchDB answer (got ${type || "non-JSON"})`);
      }
      // A JSON answer that does not parse was cut short on the way: worth another try.
      throw new TransientError(`invalid JSON from ${what}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }

  /** See {@linkcode Source.list}. Checks the answer's shape and order; garbage is a FatalError. */
  list(options: ListOptions): Promise<Page> {
    const desc = options.descending ?? false;
    const params = new URLSearchParams();
    if (options.start !== undefined && options.start !== null) {
      params.set("startkey", JSON.stringify(options.start));
    }
    if (options.end !== undefined && options.end !== null) {
      params.set("endkey", JSON.stringify(options.end));
      params.set("inclusive_end", "false");
    }
    params.set("limit", String(options.limit));
    if (desc) params.set("descending", "true");
    if (options.skip) params.set("skip", String(options.skip));
    const url = `${this.#db}/_all_docs?${params}`;
    return this.#request(url, (res, text) => {
      const body = this.#json(res, text, `${this.description}/_all_docs`);
      return checkPage(body, options, this.description);
    }, (res) => {
      if (res.status === 404) {
        throw new FatalError(`${this.description} is not a CouchDB database (404 at _all_docs)`);
      }
      return undefined;
    });
  }

  /** See {@linkcode Source.doc}. 404 and 410 are misses, not errors. */
  doc(id: string): Promise<DocResult> {
    const url = `${this.#docs}/${encodeURIComponent(id)}`;
    return this.#request<DocResult>(url, (res, text) => {
      const v = this.#json(res, text, `document ${JSON.stringify(id)}`);
      if (!isObject(v)) throw new FatalError(`document ${JSON.stringify(id)} is not a JSON object`);
      return { ok: true, json: text };
    }, (res) => {
      if (res.status === 404 || res.status === 410) {
        return { ok: false, status: res.status, reason: "not found" };
      }
      return undefined;
    }).catch((err) => {
      if (err instanceof PermanentError) {
        return { ok: false, status: err.status ?? 0, reason: err.message };
      }
      throw err;
    });
  }

  /** See {@linkcode Source.updateSeq}: `update_seq` from the database info. */
  updateSeq(): Promise<string | null> {
    return this.#request(this.#db, (res, text) => {
      const v = this.#json(res, text, this.description);
      if (!isObject(v)) throw new FatalError(`${this.description} info is not a JSON object`);
      const seq = v.update_seq;
      return seq === undefined || seq === null ? null : String(seq);
    });
  }

  /** See {@linkcode Source.changes}. */
  changes(since: string, limit: number): Promise<{ rows: ChangeRow[]; lastSeq: string }> {
    const url = `${this.#db}/_changes?since=${encodeURIComponent(since)}&limit=${limit}`;
    return this.#request(url, (res, text) => {
      const v = this.#json(res, text, `${this.description}/_changes`);
      if (!isObject(v) || !Array.isArray(v.results) || v.last_seq === undefined) {
        throw new FatalError(`${this.description}/_changes answered garbage`);
      }
      const rows: ChangeRow[] = v.results.map((r: unknown) => {
        if (!isObject(r) || typeof r.id !== "string" || !Array.isArray(r.changes)) {
          throw new FatalError(`${this.description}/_changes answered a malformed row`);
        }
        const rev = isObject(r.changes[0]) ? String(r.changes[0].rev ?? "") : "";
        return { seq: String(r.seq), id: r.id, rev, deleted: r.deleted === true };
      });
      return { rows, lastSeq: String(v.last_seq) };
    });
  }
}

/**
 * Validates a parsed `_all_docs` answer against what was asked: numbers are counts, `offset` is at
 * most `total_rows`, rows are `{id, key, value: {rev}}` with `id === key`, strictly ordered, within
 * the requested bounds and no more than `limit`. Anything else is a FatalError naming the problem.
 */
export function checkPage(body: unknown, options: ListOptions, description: string): Page {
  const bad = (why: string) => new FatalError(`${description} answered garbage: ${why}`);
  if (!isObject(body)) throw bad("not a JSON object");
  if (!Array.isArray(body.rows)) throw bad("no rows array (not a CouchDB listing?)");
  if (!isCount(body.total_rows)) throw bad("total_rows is not a count");
  if (!isCount(body.offset)) throw bad("offset is not a count");
  if (body.offset > body.total_rows) {
    throw bad(`offset ${body.offset} > total_rows ${body.total_rows}`);
  }
  if (body.rows.length > options.limit) throw bad(`more rows than limit ${options.limit}`);
  const desc = options.descending ?? false;
  const rows: Row[] = [];
  for (const r of body.rows as unknown[]) {
    if (!isObject(r) || typeof r.id !== "string" || r.key !== r.id) {
      throw bad("a row is not {id, key, value} with key === id");
    }
    const rev = isObject(r.value) ? r.value.rev : undefined;
    if (typeof rev !== "string") throw bad(`row ${JSON.stringify(r.id)} has no value.rev`);
    const prev = rows.at(-1);
    if (prev) {
      const c = compareKeys(prev.id, r.id);
      if (desc ? c <= 0 : c >= 0) {
        throw bad(`keys out of order: ${JSON.stringify(prev.id)} then ${JSON.stringify(r.id)}`);
      }
    }
    rows.push({ id: r.id, rev });
  }
  const first = rows[0]?.id;
  const last = rows.at(-1)?.id;
  const { start, end } = options;
  if (first !== undefined && start !== undefined && start !== null) {
    if (desc ? compareKeys(first, start) > 0 : compareKeys(first, start) < 0) {
      throw bad(`row ${JSON.stringify(first)} is outside the requested start`);
    }
  }
  if (last !== undefined && end !== undefined && end !== null) {
    if (desc ? compareKeys(last, end) <= 0 : compareKeys(last, end) >= 0) {
      throw bad(`row ${JSON.stringify(last)} is outside the requested end`);
    }
  }
  return { offset: body.offset, total: body.total_rows, rows };
}
