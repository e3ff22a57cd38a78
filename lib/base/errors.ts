/**
 * Errors grouped by what the caller should do with them, each chaining its `cause`:
 * - {@linkcode TransientError}: retry later (5xx, 429, timeouts, dropped connections, cut bodies);
 * - {@linkcode PermanentError}: never retry this request (404 of a document, other 4xx);
 * - {@linkcode FatalError}: stop the job, the configuration or the source is wrong (not a CouchDB
 *   listing, `offset` is not a rank, a registry answering garbage);
 * - {@linkcode InputError}: the user's input is wrong (maps to HTTP 400 / CLI exit 2).
 *
 * The base layer (`lib/base/`): errors, bounded concurrency, redaction and the crawl spec. It
 * imports nothing else of the project; every other layer may import it.
 *
 * @module
 */

/**
 * What a caller does with an error, carried by its class: `later` (retry after a delay), `never`
 * (it would fail the same way: record it, fail the work), `stop` (the process stops; nothing is
 * recorded against the work, and the same command resumes).
 */
export type Retry = "later" | "never" | "stop";

/**
 * Base class: every error this project raises on purpose.
 *
 * @example
 * ```ts
 * try {
 *   await planShards(source, 56);
 * } catch (err) {
 *   if (err instanceof CrawlerError && err.retry === "later") {
 *     // a registry that failed for now: try again after a pause
 *   } else throw err;
 * }
 * ```
 */
export class CrawlerError extends Error {
  /** Error name. */
  override name = "CrawlerError";
  /** What a caller does with it. */
  readonly retry: Retry = "never";
}

/**
 * True for an error that fails the same way every time it is tried (`retry: "never"`).
 *
 * @example
 * ```ts
 * neverRetried(new PermanentError("HTTP 404", { status: 404 })); // true: record it, move on
 * neverRetried(new TransientError("HTTP 503")); // false: try again later
 * ```
 */
export function neverRetried(err: unknown): boolean {
  return err instanceof CrawlerError && err.retry === "never";
}

/**
 * Worth retrying after a delay. `retryAfterMs` carries a server's `Retry-After` when given.
 *
 * @example
 * ```ts
 * throw new TransientError("HTTP 429", { retryAfterMs: 2_000 }); // asked again in 2 s
 * ```
 */
export class TransientError extends CrawlerError {
  /** Error name. */
  override name = "TransientError";
  /** What a caller does with it. */
  override readonly retry: Retry = "later";
  /** The delay the server asked for, in milliseconds, if any. */
  readonly retryAfterMs?: number;
  /** The HTTP status, when the error came from a response. */
  readonly status?: number;
  /** A transient failure; `retryAfterMs` and `status` are kept for the retry policy. */
  constructor(
    message: string,
    options: ErrorOptions & { retryAfterMs?: number; status?: number } = {},
  ) {
    super(message, options);
    this.retryAfterMs = options.retryAfterMs;
    this.status = options.status;
  }
}

/**
 * Refused for now because a bound is reached (too many crawls running at once): retry later, when
 * some have finished (HTTP 429).
 */
export class BusyError extends TransientError {
  /** Error name. */
  override name = "BusyError";
}

/**
 * Will fail the same way every time; record it and move on.
 *
 * @example
 * ```ts
 * throw new PermanentError("document answered 410 Gone", { status: 410 });
 * ```
 */
export class PermanentError extends CrawlerError {
  /** Error name. */
  override name = "PermanentError";
  /** The HTTP status, when the error came from a response. */
  readonly status?: number;
  /** A permanent failure, with the HTTP status when there was one. */
  constructor(message: string, options: ErrorOptions & { status?: number } = {}) {
    super(message, options);
    this.status = options.status;
  }
}

/**
 * The job cannot go on: wrong source, broken contract, corrupt state.
 *
 * @example
 * ```ts
 * throw new FatalError("the registry's offsets contradict each other: not a rank");
 * ```
 */
export class FatalError extends CrawlerError {
  /** Error name. */
  override name = "FatalError";
}

/**
 * The store cannot be written (the disk is full, or it fails with I/O errors): the process stops,
 * nothing stored is corrupt (every write is one atomic op), and the same command resumes once there
 * is room. Not a property of any one crawl, so no crawl is marked failed for it.
 */
export class StorageError extends CrawlerError {
  /** Error name. */
  override name = "StorageError";
  /** What a caller does with it. */
  override readonly retry: Retry = "stop";
}

/**
 * Bad input from a user: a flag, a request body, a parameter.
 *
 * @example
 * ```ts
 * throw new InputError("shards must be a whole number from 1 to 100,000"); // a 400, or one line
 * ```
 */
export class InputError extends CrawlerError {
  /** Error name. */
  override name = "InputError";
}

/** A command-line flag or argument is wrong (CLI exit 2); a kind of {@linkcode InputError}. */
export class UsageError extends InputError {
  /** Error name. */
  override name = "UsageError";
}

/** Stopped by the user (Ctrl-C, SIGTERM): nothing is lost, the same command resumes. */
export class InterruptedError extends CrawlerError {
  /** Error name. */
  override name = "InterruptedError";
  /** What a caller does with it. */
  override readonly retry: Retry = "stop";
}

/** Not found: an unknown crawl id and the like. */
export class NotFoundError extends CrawlerError {
  /** Error name. */
  override name = "NotFoundError";
}

/** The operation conflicts with the current state (e.g. resuming a finished crawl). */
export class ConflictError extends CrawlerError {
  /** Error name. */
  override name = "ConflictError";
}

/** Longest error line kept or shown, in characters (ids in messages can be very long). */
export const MAX_ERROR_CHARS = 500;

/**
 * The one line an error is recorded and shown as: the first line of its message (of `String(err)`
 * for anything else), cut to {@linkcode MAX_ERROR_CHARS} characters.
 */
export function errorLine(err: unknown): string {
  const text = (err instanceof Error ? err.message : String(err)).split("\n")[0];
  return text.length <= MAX_ERROR_CHARS ? text : text.slice(0, MAX_ERROR_CHARS - 1) + "…";
}
