/**
 * One guarded HTTP exchange with a registry, and the retry loop around it:
 *
 * - redirects are never followed blindly (`redirect: "manual"`): each hop is followed only when
 *   `allowRedirect` accepts its target (the server's ALLOWED_SOURCES, or the CLI's same-origin
 *   rule), at most `maxRedirects` hops; otherwise a {@linkcode PermanentError} names the target;
 * - bodies are read as a stream and cut off at `maxBytes` (a declared `content-length` above it is
 *   refused before anything is read), so a registry cannot make us hold gigabytes
 *   (`body_read.ts`);
 * - every attempt has a timeout covering the body; transient failures (5xx, 429 with
 *   `Retry-After`, timeouts, refused or dropped connections, cut bodies) are retried with
 *   exponential backoff and full jitter up to `maxAttempts`, then thrown with their cause named
 *   (connection refused, DNS, TLS, timeout) and the URL without credentials.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { headersFor, type RequestHeader } from "./request_headers.ts";
import { backoff, HTTP_RETRY } from "../../base/retry_policy.ts";
import { PermanentError, TransientError } from "../../base/errors.ts";
import { redactUrl } from "../../base/redact.ts";
import type { Semaphore } from "../../base/pool.ts";
import { ByteBudget } from "../../base/byte_budget.ts";
import {
  BODY_BYTES_IN_FLIGHT,
  largeAnswers,
  readCapped,
  SlowBodyError,
  TooLargeError,
} from "./body_read.ts";
import type { Pacer } from "./host_pacer.ts";
import { HostPausedError } from "./host_breaker.ts";

/** Options shared by every request of a source. */
export interface HttpOptions {
  /** The fetch to use (injected in tests). @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Per-attempt timeout, including the body, in milliseconds. @default 30000 */
  timeoutMs?: number;
  /** Attempts per request before a transient failure is thrown. @default 8 */
  maxAttempts?: number;
  /** First backoff step, in milliseconds. @default 100 */
  backoffBaseMs?: number;
  /** Largest backoff step (and cap on `Retry-After`), in milliseconds. @default 30000 */
  backoffMaxMs?: number;
  /** Whether a redirect to `target` may be followed. @default same origin as the request */
  allowRedirect?: (target: URL, from: URL) => boolean;
  /** Redirect hops followed at most. @default 3 */
  maxRedirects?: number;
  /** Random numbers in [0, 1) for jitter. @default Math.random */
  random?: () => number;
  /** What retry pauses wait on (tests pass one whose sleeps end at once). @default SYSTEM_CLOCK */
  clock?: Clock;
  /** Called before each retry, for logs and counters (never given credentials). */
  onRetry?: (info: { attempt: number; delayMs: number; error: Error }) => void;
  /** Called after every attempt, for metrics: the route, the status (0: no answer), the time. */
  onExchange?: (info: { route: string; status: number; ms: number }) => void;
  /**
   * Large answers in memory at once: an answer past `overBytes` waits for one of the permits
   * before it is read on (the server waits too), and holds it until it is parsed. Share one
   * among a process's sources to bound them all. @default 4 permits, past 1 MiB, per client
   */
  largeAnswers?: { overBytes: number; permits: Semaphore };
  /**
   * Bytes of bodies held at once, however small each: a body takes its declared length from the
   * budget before it is read (one without a length, as it grows), and gives it back once it is
   * parsed, so that 256 documents of 900 KiB in flight hold no more than the budget. Share one
   * among a process's sources. @default BODY_BYTES_IN_FLIGHT (64 MiB), per client
   */
  bodyBytes?: ByteBudget;
  /**
   * Headers added to requests (`request_headers.ts`: per host or for all; credentials kept to
   * their origin). Never logged. @default none (every request says `User-Agent: rankcrawl/…`)
   */
  headers?: readonly RequestHeader[];
  /**
   * Paces every attempt (`host_pacer.ts`: the process's `--rate`, a crawl's own rate, each
   * host's learned pace and `Retry-After` holds) and learns from its answer; the wait is not part
   * of the attempt's timeout. Share one among a process's sources. @default no pacing
   */
  pacer?: Pacer;
}

/** The kind of registry route a URL is, for metrics: `_all_docs`, `_changes`, `_bulk_get`, `doc`. */
export function routeOf(url: URL): string {
  if (url.pathname.includes("/_view/")) return "_view";
  const last = url.pathname.split("/").pop() ?? "";
  return last.startsWith("_") ? last : "doc";
}

/** One request: what to send and how much may come back. */
export interface HttpRequest {
  /** The URL. */
  url: string;
  /** Method. @default "GET" */
  method?: string;
  /** JSON body (POST). */
  body?: string;
  /** Largest body accepted, in bytes. */
  maxBytes: number;
  /** Attempts for this request. @default the source's `maxAttempts` */
  maxAttempts?: number;
  /** Timeout of one attempt, in milliseconds. @default the source's `timeoutMs` */
  timeoutMs?: number;
  /**
   * A body over `maxBytes` is garbled on the way (a request that cannot be made smaller): asked
   * again like a 5xx instead of failing as a {@linkcode TooLargeError}. @default false
   */
  oversizeIsTransient?: boolean;
  /** `If-None-Match`: an `ETag` seen before (a 304 then comes back as it is). @default none */
  ifNoneMatch?: string;
}

/** An answer: its status, headers and body (bytes, at most `maxBytes`). */
export interface HttpAnswer {
  /** HTTP status. */
  status: number;
  /** Response headers. */
  headers: Headers;
  /** The body. */
  body: Uint8Array;
  /** The URL that answered (after allowed redirects). */
  url: string;
}

/** Parses a `Retry-After` header (seconds or HTTP date) into milliseconds. */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number | undefined {
  if (value === null) return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** A short name for why a connection failed: refused, DNS, TLS, timeout, reset, or the message. */
export function networkCause(err: unknown, timeoutMs: number): string {
  const e = err as Error;
  const text = `${e?.message ?? ""} ${(e?.cause as Error)?.message ?? ""}`;
  if (e?.name === "TimeoutError" || /timed out|signal timed out/i.test(text)) {
    return `timed out after ${Math.round(timeoutMs / 100) / 10} s`;
  }
  if (/connection refused/i.test(text)) return "connection refused";
  if (/dns error|failed to lookup|name or service not known|no such host/i.test(text)) {
    return "DNS lookup failed";
  }
  if (/certificate|tls|ssl|handshake|corrupt message/i.test(text)) return "TLS error";
  if (/reset|broken pipe|connection closed|unexpected eof|incomplete/i.test(text)) {
    return "connection dropped";
  }
  return (e?.message ?? String(err)).split("\n")[0];
}

/** Makes requests for one source with its options; counts retries. */
export class HttpClient {
  #o:
    & Required<Omit<HttpOptions, "onRetry" | "onExchange" | "pacer">>
    & Pick<HttpOptions, "onRetry" | "onExchange" | "pacer">;
  #retries = 0;

  /** A client with `options` (see {@linkcode HttpOptions} for defaults). */
  constructor(options: HttpOptions = {}) {
    this.#o = {
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
      timeoutMs: options.timeoutMs ?? 30_000,
      maxAttempts: options.maxAttempts ?? HTTP_RETRY.maxAttempts,
      backoffBaseMs: options.backoffBaseMs ?? HTTP_RETRY.backoffBaseMs,
      backoffMaxMs: options.backoffMaxMs ?? HTTP_RETRY.backoffMaxMs,
      allowRedirect: options.allowRedirect ?? ((t, f) => t.origin === f.origin),
      maxRedirects: options.maxRedirects ?? 3,
      random: options.random ?? Math.random,
      clock: options.clock ?? SYSTEM_CLOCK,
      onRetry: options.onRetry,
      onExchange: options.onExchange,
      largeAnswers: options.largeAnswers ?? largeAnswers(),
      bodyBytes: options.bodyBytes ?? new ByteBudget(BODY_BYTES_IN_FLIGHT),
      headers: options.headers ?? [],
      pacer: options.pacer,
    };
  }

  /** Retries made after transient failures. */
  get retries(): number {
    return this.#retries;
  }

  /**
   * Runs `req` with retries, then `parse` on a 2xx-4xx answer (a {@linkcode TransientError}
   * from `parse`, e.g. for cut JSON, is retried like a 5xx). 5xx, 408 and 429 are transient.
   */
  async request<T>(req: HttpRequest, parse: (answer: HttpAnswer) => T | Promise<T>): Promise<T> {
    const max = req.maxAttempts ?? this.#o.maxAttempts;
    // Made only when an attempt failed: an error's stack costs on every request of a crawl.
    let last: TransientError | undefined;
    for (let attempt = 1; attempt <= max; attempt++) {
      const held: (() => void)[] = [];
      // A large answer's permit is given back once it is parsed or dropped, never kept asleep.
      const letGo = () => held.splice(0).forEach((release) => release());
      try {
        // Awaited here: a large answer's permit is held until its parse is done with it.
        return await parse(await this.#exchange(req, held));
      } catch (err) {
        letGo();
        if (!(err instanceof TransientError)) throw err;
        // Its host answered nothing for a minute: the caller's schedule decides when to ask
        // again, not a backoff of seconds here that would meet the same pause.
        if (err instanceof HostPausedError) throw err;
        const paused = this.#o.pacer?.breaker.pausedError(new URL(req.url), err);
        if (paused) throw paused;
        last = err;
        if (attempt === max) break;
        let delayMs = backoff(
          {
            firstMs: this.#o.backoffBaseMs,
            maxMs: this.#o.backoffMaxMs,
            growth: "double",
            jitter: "full",
          },
          attempt,
          this.#o.random,
        );
        if (err.retryAfterMs !== undefined) {
          delayMs = Math.max(delayMs, Math.min(err.retryAfterMs, this.#o.backoffMaxMs));
        } else if (err.status === 429) {
          const least = HTTP_RETRY.tooManyMinMs * (0.5 + this.#o.random());
          delayMs = Math.max(delayMs, Math.min(least, this.#o.backoffMaxMs));
        }
        this.#retries++;
        this.#o.onRetry?.({ attempt, delayMs, error: err });
        await this.#o.clock.sleep(delayMs);
      } finally {
        letGo();
      }
    }
    if (last === undefined) throw new TransientError("no attempt made");
    throw new TransientError(`${last.message} (${max} attempts)`, {
      cause: last,
      status: last.status,
    });
  }

  /** One attempt, timed for `onExchange`. */
  async #exchange(req: HttpRequest, held: (() => void)[]): Promise<HttpAnswer> {
    const t = performance.now();
    const url = new URL(req.url);
    let status = 0;
    try {
      const answer = await this.#attempt(req, held, url);
      status = answer.status;
      return answer;
    } catch (err) {
      status = (err as TransientError).status ?? 0;
      throw err;
    } finally {
      this.#o.onExchange?.({ route: routeOf(url), status, ms: performance.now() - t });
    }
  }

  /** One attempt at `url` (`req.url`, parsed), following allowed redirects. */
  async #attempt(req: HttpRequest, held: (() => void)[], url: URL): Promise<HttpAnswer> {
    const timeoutMs = req.timeoutMs ?? this.#o.timeoutMs;
    const pacer = this.#o.pacer;
    const breaker = pacer?.breaker;
    // A paused host is not waited for (nor paced): the request fails at once.
    breaker?.admit(url);
    // Waiting for its turn is not part of an attempt's time.
    await pacer?.pace(url);
    // One controller for the attempt: its timeout, and a short body's deadline (`readCapped`).
    const stop = new AbortController();
    // (A timer past 2^31 - 1 ms would fire at once, as AbortSignal.timeout's does not.)
    const timer = setTimeout(
      () => stop.abort(new DOMException("Signal timed out.", "TimeoutError")),
      Math.min(timeoutMs, 2 ** 31 - 1),
    );
    try {
      return await this.#hops(req, held, { url, timeoutMs, stop });
    } finally {
      clearTimeout(timer);
    }
  }

  /** The attempt's requests, one a redirect, under `o.stop`'s signal. */
  async #hops(
    req: HttpRequest,
    held: (() => void)[],
    o: { url: URL; timeoutMs: number; stop: AbortController },
  ): Promise<HttpAnswer> {
    let url = o.url;
    const { timeoutMs, stop } = o;
    const signal = stop.signal;
    const pacer = this.#o.pacer;
    const breaker = pacer?.breaker;
    for (let hop = 0;; hop++) {
      if (hop > 0) {
        breaker?.admit(url);
        await pacer?.pace(url);
      }
      let res: Response;
      const sentAt = performance.now();
      try {
        res = await this.#o.fetch(url.href, {
          method: req.method ?? "GET",
          body: req.body,
          signal,
          redirect: "manual",
          headers: headersFor(url, this.#o.headers, {
            body: req.body !== undefined,
            firstOrigin: o.url.origin,
            ifNoneMatch: req.ifNoneMatch,
          }),
        });
      } catch (err) {
        const cause = networkCause(err, timeoutMs);
        breaker?.report(url, { failed: cause });
        throw new TransientError(`${cause} at ${redactUrl(url.href)}`, { cause: err });
      }
      const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
      pacer?.report(url, {
        status: res.status,
        ms: performance.now() - sentAt,
        route: routeOf(url),
        retryAfterMs,
      });
      if (res.status >= 300 && res.status < 400 && res.headers.has("location")) {
        breaker?.report(url, { answered: true });
        await res.body?.cancel();
        url = this.#redirectTarget(url, res.headers.get("location")!, { hop, status: res.status });
        continue;
      }
      if (res.status >= 500 || res.status === 429 || res.status === 408) {
        breaker?.report(url, { failed: `HTTP ${res.status}` });
        await res.body?.cancel();
        throw new TransientError(`HTTP ${res.status} at ${redactUrl(url.href)}`, {
          status: res.status,
          retryAfterMs,
        });
      }
      let body: Uint8Array;
      try {
        body = await readCapped(res, {
          url: url.href,
          maxBytes: req.maxBytes,
          large: this.#o.largeAnswers,
          bytes: this.#o.bodyBytes,
          held,
          abort: (reason) => stop.abort(reason),
        });
      } catch (err) {
        // A body too large was answered; one sent a byte at a time, or cut, was not.
        if (err instanceof TooLargeError) breaker?.report(url, { answered: true });
        if (err instanceof TooLargeError && req.oversizeIsTransient) {
          throw new TransientError(err.message, { cause: err });
        }
        if (err instanceof TooLargeError) throw err;
        if (err instanceof SlowBodyError) {
          breaker?.report(url, { failed: "a body sent a byte at a time" });
          throw err;
        }
        const cause = networkCause(err, timeoutMs);
        breaker?.report(url, { failed: `${cause} while reading` });
        throw new TransientError(`${cause} while reading ${redactUrl(url.href)}`, { cause: err });
      }
      breaker?.report(url, { answered: true });
      return { status: res.status, headers: res.headers, body, url: url.href };
    }
  }

  #redirectTarget(from: URL, location: string, o: { hop: number; status: number }): URL {
    let target: URL;
    try {
      target = new URL(location, from);
    } catch {
      throw new PermanentError(`redirect from ${redactUrl(from.href)} to a malformed location`, {
        status: o.status,
      });
    }
    if (o.hop >= this.#o.maxRedirects) {
      throw new PermanentError(`too many redirects from ${redactUrl(from.href)}`, {
        status: o.status,
      });
    }
    if (!this.#o.allowRedirect(target, from)) {
      throw new PermanentError(
        `refused redirect from ${redactUrl(from.href)} to ${redactUrl(target.href)}`,
        { status: o.status },
      );
    }
    return target;
  }
}
