/**
 * Reading answer bodies within bounds: each body cut off at its `maxBytes` (a declared
 * `content-length` above it refused before anything is read), every body's bytes taken from the
 * process's budget before they are read, and answers past {@linkcode LARGE_ANSWER_BYTES} read a few
 * at a time, so that however many requests are in flight, what their answers hold is bounded. A
 * compressed body (gzip, deflate: sent although `identity` was asked) is inflated as it is read,
 * and every bound counts what it inflates to, never its bytes on the wire.
 *
 * @module
 */
import { PermanentError, TransientError } from "../../base/errors.ts";
import { redactUrl } from "../../base/redact.ts";
import { Semaphore } from "../../base/pool.ts";
import type { ByteBudget } from "../../base/byte_budget.ts";

/** Answers past this many bytes are large: few are read and parsed at once (`largeAnswers`). */
export const LARGE_ANSWER_BYTES = 1024 * 1024;

/** Large answers one process reads and parses at once, by default. */
export const LARGE_ANSWERS = 4;

/** Bytes of answer bodies one process reads at once, by default (see `bodyBytes`). */
export const BODY_BYTES_IN_FLIGHT = 64 * 1024 * 1024;

/**
 * How slowly a body may come: once it has taken `graceMs` of reading, it must have come at
 * `minBytesPerSecond` on average, and no read may wait `stallMs` for a byte. A host that sends a
 * byte every few seconds (a slowloris) is cut within seconds, not at the attempt's timeout.
 */
export const SLOW_BODY = { graceMs: 5_000, minBytesPerSecond: 8_192, stallMs: 10_000 } as const;

/** A body that came too slowly (see {@linkcode SLOW_BODY}): asked again like a dropped one. */
export class SlowBodyError extends TransientError {
  /** Error name. */
  override name = "SlowBodyError";
}

/**
 * A body declared at most this long, sent as it is, is read in one go (no stream reads in script,
 * no timer per chunk: a quarter of a crawl's CPU went there when every document was a few hundred
 * bytes), within one deadline that {@linkcode SLOW_BODY} allows it whole: `graceMs`, or the time its
 * bytes take at `minBytesPerSecond` (8 s at this size, under `stallMs`).
 */
export const QUICK_BODY_BYTES = 64 * 1024;

/** What a body without a declared length takes from the budget first, and at least as it grows. */
const GROWTH_BYTES = 64 * 1024;

/**
 * Compressed bytes handed to the inflater at a time. Deflate inflates at most ~1,032 times, so one
 * step makes at most ~4 MiB; fed a whole wire chunk (under load the socket hands over a megabyte
 * at once), one step of a gzip bomb made 1 GiB before its cap was ever looked at.
 */
const INFLATE_STEP_BYTES = 4096;

/** Cuts a stream's chunks into views of at most {@linkcode INFLATE_STEP_BYTES} (no copy). */
function sliced(): TransformStream<Uint8Array, Uint8Array> {
  return new TransformStream({
    transform(chunk, ctl) {
      for (let at = 0; at < chunk.length; at += INFLATE_STEP_BYTES) {
        ctl.enqueue(chunk.subarray(at, at + INFLATE_STEP_BYTES));
      }
    },
  });
}

/** A gate for large answers, to share among the sources of a process (see `largeAnswers`). */
export function largeAnswers(
  permits: number = LARGE_ANSWERS,
): { overBytes: number; permits: Semaphore } {
  return { overBytes: LARGE_ANSWER_BYTES, permits: new Semaphore(permits) };
}

/**
 * How a body is encoded: as is, compressed in a way this reader inflates, or otherwise (refused).
 * (Requests ask for `identity`, so fetch never inflates a body itself.)
 */
function contentEncoding(headers: Headers): "identity" | "gzip" | "deflate" | "unknown" {
  const e = (headers.get("content-encoding") ?? "identity").trim().toLowerCase();
  if (e === "" || e === "identity") return "identity";
  if (e === "gzip" || e === "x-gzip") return "gzip";
  if (e === "deflate") return "deflate";
  return "unknown";
}

/** The next read of `reader`, or a {@linkcode SlowBodyError} when no byte came within `ms`. */
function readWithin<T>(
  reader: ReadableStreamDefaultReader<T>,
  ms: number,
): Promise<ReadableStreamReadResult<T>> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stalled = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SlowBodyError(`sent nothing for ${ms / 1000} s`)), ms);
  });
  return Promise.race([reader.read(), stalled]).finally(() => clearTimeout(timer));
}

/**
 * A short body with a declared length, whole, or a {@linkcode SlowBodyError} once it has taken
 * longer than {@linkcode SLOW_BODY} lets that many bytes take (its request stopped by `o.abort`).
 */
async function readQuick(
  res: Response,
  o: { url: string; abort: (reason: Error) => void },
  declared: number,
): Promise<Uint8Array> {
  const withinMs = Math.max(SLOW_BODY.graceMs, (declared * 1000) / SLOW_BODY.minBytesPerSecond);
  const timer = setTimeout(() =>
    o.abort(
      new SlowBodyError(
        `answer of ${redactUrl(o.url)} came too slowly: not its ${declared} bytes in ` +
          `${(withinMs / 1000).toFixed(1)} s`,
      ),
    ), withinMs);
  try {
    return await res.bytes();
  } finally {
    clearTimeout(timer);
  }
}

/** A body over `maxBytes`: how much was declared or read before stopping. */
export class TooLargeError extends PermanentError {
  /** Error name. */
  override name = "TooLargeError";
  /** Bytes declared by `content-length`, or read before the cut. */
  readonly bytes: number;
  /** The body of `url` was over `limit` (`bytes` seen so far). */
  constructor(url: string, bytes: number, limit: number) {
    super(`answer of ${redactUrl(url)} is over ${limit} bytes`, { status: 0 });
    this.bytes = bytes;
  }
}

/** What {@linkcode readCapped} reads a body within. */
export interface BodyBounds {
  /** The URL answered (for the error). */
  url: string;
  /** The most bytes the body may have. */
  maxBytes: number;
  /** Answers past `overBytes` wait for one of `permits`. */
  large: { overBytes: number; permits: Semaphore };
  /** The process's bytes of bodies being read. */
  bytes: ByteBudget;
  /** Where what it took (permits, bytes) goes, for the caller to give back once it is parsed. */
  held: (() => void)[];
  /**
   * Stops the request the body comes with (its read then fails with `reason`). Given, a short body
   * with a declared length is read in one go under one deadline ({@linkcode QUICK_BODY_BYTES});
   * not given, every body is read chunk by chunk. @default none
   */
  abort?: (reason: Error) => void;
}

/**
 * Reads `res`'s body up to `o.maxBytes`, failing as soon as it is over (a declared length over
 * it fails before anything is read). Past `o.large.overBytes` it waits for a permit; every body
 * takes its bytes from `o.bytes` before they are read. @throws TooLargeError past `maxBytes`.
 */
export async function readCapped(res: Response, o: BodyBounds): Promise<Uint8Array> {
  const { url, maxBytes, large, held } = o;
  const gates = { bytes: o.bytes };
  const encoding = contentEncoding(res.headers);
  const wire = Number(res.headers.get("content-length") ?? NaN);
  if (wire > maxBytes) {
    await res.body?.cancel();
    throw new TooLargeError(url, wire, maxBytes);
  }
  if (!res.body) return new Uint8Array(0);
  if (encoding === "unknown") {
    await res.body.cancel();
    throw new PermanentError(
      `answer of ${redactUrl(url)} is encoded as ${res.headers.get("content-encoding")}, ` +
        "which was not asked for",
    );
  }
  // A compressed body is inflated here, as it is read: its cap and its budget count the bytes it
  // inflates to (a small body may inflate without end), and its declared length says nothing of
  // them.
  const declared = encoding === "identity" ? wire : NaN;
  const body = encoding === "identity" ? res.body : res.body.pipeThrough(sliced()).pipeThrough(
    new DecompressionStream(encoding) as unknown as ReadableWritablePair<Uint8Array, Uint8Array>,
  );
  // A large answer waits for its permit before anything of it is held; then every body takes
  // its bytes from the budget before any is read (the server waits meanwhile). In that order,
  // so that nothing waits for a permit holding bytes.
  let permitted = declared > large.overBytes;
  if (permitted) held.push(await large.permits.acquire());
  // A body without a declared length takes what a large answer's permit begins at (or its cap):
  // past it, the permit bounds such bodies, and none waits for bytes holding any.
  const known = Number.isInteger(declared) && declared > 0;
  let taken = known ? declared : Math.min(maxBytes, large.overBytes);
  held.push(await gates.bytes.take(taken));
  if (known && declared <= QUICK_BODY_BYTES && o.abort) {
    return await readQuick(res, { url, abort: o.abort }, declared);
  }
  // A declared length is read straight into one buffer (no second copy to join the parts).
  const into = known ? new Uint8Array(declared) : null;
  const parts: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  // Time spent waiting for the body's bytes (not for a permit or the budget: the server waits then).
  let readingMs = 0;
  for (;;) {
    if (!permitted && size > large.overBytes) {
      permitted = true;
      held.push(await large.permits.acquire());
    }
    const started = performance.now();
    const { value, done } = await readWithin(reader, SLOW_BODY.stallMs).catch(async (err) => {
      await reader.cancel().catch(() => {});
      throw err instanceof SlowBodyError
        ? new SlowBodyError(`answer of ${redactUrl(url)} ${err.message}`)
        : err;
    });
    readingMs += performance.now() - started;
    if (done) break;
    if (readingMs > SLOW_BODY.graceMs && (size * 1000) / readingMs < SLOW_BODY.minBytesPerSecond) {
      await reader.cancel().catch(() => {});
      throw new SlowBodyError(
        `answer of ${redactUrl(url)} came too slowly: ${size} bytes in ` +
          `${(readingMs / 1000).toFixed(1)} s`,
      );
    }
    if (!into && size + value.length > taken) {
      // No declared length, past what it took: it holds a permit (above), so it takes more as it
      // grows (twice as much each time) without waiting.
      const more = Math.max(GROWTH_BYTES, size + value.length);
      held.push(await gates.bytes.take(more, { wait: false }));
      taken += more;
    }
    if (size + value.length > maxBytes || (into && size + value.length > into.length)) {
      await reader.cancel();
      throw new TooLargeError(url, size + value.length, maxBytes);
    }
    if (into) into.set(value, size);
    // A chunk may be a view of a much larger buffer (Deno 2.5 hands over 4 KiB of a 64 KiB one):
    // kept as it is, a body would hold sixteen times its bytes. Such a chunk is kept as a copy.
    else parts.push(value.byteLength * 2 < value.buffer.byteLength ? value.slice() : value);
    size += value.length;
  }
  if (into) return size === into.length ? into : into.subarray(0, size);
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) (out.set(p, at), at += p.length);
  return out;
}
