/**
 * A breaker per host: a host whose every attempt over the last minute failed (no answer, a
 * timeout, a 5xx, a 429, a body sent a byte at a time) is paused. While paused, a request to it
 * fails at once with a {@linkcode HostPausedError} instead of waiting out its own timeouts and
 * attempts: the work that needed it (a page, a feed look, a plan) retries on its own schedule,
 * which bounds how long a crawl whose host stays dead runs before it fails (minutes, where a host
 * answering nothing used to hold a crawl for tens of minutes), while work on other hosts goes on.
 * One request every few seconds still goes through, so that a host that comes back is seen at
 * once: any answer (2xx-4xx but 408 and 429) ends the pause. Each pause is told once (`onPause`).
 *
 * The numbers are `HOST_BREAKER`'s (`base/retry_policy.ts`).
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { TransientError } from "../../base/errors.ts";
import { HOST_BREAKER, OUTAGE } from "../../base/retry_policy.ts";

/**
 * A request not sent: its host is paused (see the module comment). Retry after `retryAfterMs`.
 *
 * @example
 * ```ts
 * try {
 *   await new CouchSource("http://127.0.0.1:5984/registry").list({ limit: 1 });
 * } catch (err) {
 *   if (err instanceof HostPausedError) console.log("asked again in", err.retryAfterMs, "ms");
 * }
 * ```
 */
export class HostPausedError extends TransientError {
  /** Error name. */
  override name = "HostPausedError";
}

/** A host paused now, for logs, status and metrics (no URL, no credentials). */
export interface HostPause {
  /** The host (`name:port`). */
  host: string;
  /** How its attempts failed (`timed out after 20 s ×12, connection refused ×2`). */
  reason: string;
  /** Since when every attempt failed, epoch milliseconds. */
  failingSince: number;
  /** Since when it is paused, epoch milliseconds. */
  pausedAt: number;
}

/** Options of a {@linkcode HostBreaker}. */
export interface HostBreakerOptions {
  /** What pauses are timed by. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** Failing this long pauses a host, in milliseconds. @default HOST_BREAKER.windowMs */
  windowMs?: number;
  /** Failures at least, over that time. @default HOST_BREAKER.minFailures */
  minFailures?: number;
  /** While paused, one request every this many ms. @default HOST_BREAKER.probeEveryMs */
  probeEveryMs?: number;
  /** Told once at each pause. @default none */
  onPause?: (pause: HostPause) => void;
  /**
   * Told when a host is down (every attempt failed for `OUTAGE.downAfterMs`), again every
   * `OUTAGE.sayEveryMs` while it lasts (on a failure's report), and when it answers again.
   * @default none
   */
  onOutage?: (outage: HostOutage) => void;
}

/** A host that answers nothing, or answers again (see {@linkcode HostBreakerOptions.onOutage}). */
export interface HostOutage {
  /** The host (`name:port`). */
  host: string;
  /** `down` when first said, `still` every while after, `up` when it answered again. */
  state: "down" | "still" | "up";
  /** Since when every attempt failed, epoch milliseconds. */
  since: number;
  /** When this is said, epoch milliseconds. */
  at: number;
  /** Attempts that failed since then. */
  failures: number;
  /** How they failed (`connection refused ×14`). */
  reason: string;
}

/** The outcome of one attempt, as {@linkcode HostBreaker.report} takes it. */
export type BreakerOutcome = { answered: true } | { failed: string };

interface Failing {
  since: number;
  failures: number;
  kinds: Map<string, number>;
  /** When it was paused, or 0. */
  pausedAt: number;
  reason: string;
  /** When the last request let through to try it went, or 0. */
  probeAt: number;
  /** When its outage was last said (`onOutage`), or 0 while it was not. */
  saidAt: number;
}

/** Kinds of failure counted per host (a host failing in more ways is told by its commonest). */
const MAX_KINDS = 8;

/**
 * Breakers of every host one process asks (see the module comment). A process's pacer holds one
 * (`Pacer.breaker`), which its HTTP clients consult before each attempt and tell after it.
 *
 * @example
 * ```ts
 * const breaker = new HostBreaker({ onPause: (p) => console.error(pauseLine(p)) });
 * const url = new URL("https://replicate.npmjs.com/registry/_all_docs");
 * breaker.admit(url); // throws HostPausedError while the host is paused
 * breaker.report(url, { answered: true });
 * ```
 */
export class HostBreaker {
  #clock: Clock;
  #windowMs: number;
  #minFailures: number;
  #probeEveryMs: number;
  #onPause: ((pause: HostPause) => void) | undefined;
  #onOutage: ((outage: HostOutage) => void) | undefined;
  // Only hosts failing now: a host that answers is removed, so the map holds the hosts failing at
  // once, no more.
  #failing = new Map<string, Failing>();

  /** Breakers with `options` (see {@linkcode HostBreakerOptions} for defaults). */
  constructor(options: HostBreakerOptions = {}) {
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#windowMs = options.windowMs ?? HOST_BREAKER.windowMs;
    this.#minFailures = options.minFailures ?? HOST_BREAKER.minFailures;
    this.#probeEveryMs = options.probeEveryMs ?? HOST_BREAKER.probeEveryMs;
    this.#onPause = options.onPause;
    this.#onOutage = options.onOutage;
  }

  /**
   * True while every attempt at `host` since its last answer failed, `atLeast` of them (a host
   * that answers between failures is not failing).
   */
  failing(host: string, atLeast = 1): boolean {
    return (this.#failing.get(host)?.failures ?? 0) >= atLeast;
  }

  /** The hosts {@linkcode failing} now, `atLeast` failures each. */
  failingHosts(atLeast = 1): string[] {
    return [...this.#failing].filter(([, f]) => f.failures >= atLeast).map(([host]) => host);
  }

  /**
   * Lets a request to `url` go, or throws a {@linkcode HostPausedError} while its host is paused
   * (but for one request every `probeEveryMs`, which tries it).
   */
  admit(url: URL): void {
    const f = this.#failing.get(url.host);
    if (!f || f.pausedAt === 0) return;
    const now = this.#clock.now();
    if (now >= this.#nextProbe(f)) {
      f.probeAt = now;
      return;
    }
    throw this.#error(url.host, f, now);
  }

  /**
   * The error a request to `url` that just failed ends with when its host is paused now: asking
   * again at once would only meet the pause (a try that failed is not tried again in a row);
   * null while the host is not paused.
   */
  pausedError(url: URL, cause?: unknown): HostPausedError | null {
    const f = this.#failing.get(url.host);
    return f && f.pausedAt > 0 ? this.#error(url.host, f, this.#clock.now(), cause) : null;
  }

  #nextProbe(f: Failing): number {
    return Math.max(f.pausedAt, f.probeAt) + this.#probeEveryMs;
  }

  #error(host: string, f: Failing, now: number, cause?: unknown): HostPausedError {
    return new HostPausedError(
      `${host} answers nothing (${f.reason}, since ${new Date(f.since).toISOString()}): ` +
        `paused, tried again every ${this.#probeEveryMs / 1000} s`,
      { retryAfterMs: Math.max(0, this.#nextProbe(f) - now), cause },
    );
  }

  /** Learns from one attempt at `url`: the host answered, or the attempt failed (its kind). */
  report(url: URL, outcome: BreakerOutcome): void {
    const host = url.host;
    if ("answered" in outcome) {
      const f = this.#failing.get(host);
      if (f && f.saidAt > 0) this.#tell(host, f, "up", this.#clock.now());
      this.#failing.delete(host);
      return;
    }
    const now = this.#clock.now();
    let f = this.#failing.get(host);
    if (!f) {
      f = {
        since: now,
        failures: 0,
        kinds: new Map(),
        pausedAt: 0,
        reason: "",
        probeAt: 0,
        saidAt: 0,
      };
      this.#failing.set(host, f);
    }
    f.failures++;
    if (f.kinds.has(outcome.failed) || f.kinds.size < MAX_KINDS) {
      f.kinds.set(outcome.failed, (f.kinds.get(outcome.failed) ?? 0) + 1);
    }
    f.reason = [...f.kinds].sort((a, b) => b[1] - a[1]).slice(0, 2)
      .map(([kind, n]) => `${kind} ×${n}`).join(", ");
    if (f.saidAt === 0) {
      if (now - f.since >= OUTAGE.downAfterMs && f.failures >= OUTAGE.minFailures) {
        this.#tell(host, f, "down", now);
      }
    } else if (now - f.saidAt >= OUTAGE.sayEveryMs) this.#tell(host, f, "still", now);
    if (f.pausedAt > 0) return;
    if (now - f.since >= this.#windowMs && f.failures >= this.#minFailures) {
      f.pausedAt = now;
      this.#onPause?.({ host, reason: f.reason, failingSince: f.since, pausedAt: now });
    }
  }

  #tell(host: string, f: Failing, state: HostOutage["state"], now: number): void {
    f.saidAt = now;
    this.#onOutage?.({
      host,
      state,
      since: f.since,
      at: now,
      failures: f.failures,
      reason: f.reason,
    });
  }

  /** The hosts paused now. */
  paused(): HostPause[] {
    return [...this.#failing].filter(([, f]) => f.pausedAt > 0).map(([host, f]) => ({
      host,
      reason: f.reason,
      failingSince: f.since,
      pausedAt: f.pausedAt,
    }));
  }
}

/** A pause in one line, for logs: which host, how it failed, since when, what happens now. */
export function pauseLine(p: HostPause, options: { probeEveryMs?: number } = {}): string {
  const every = (options.probeEveryMs ?? HOST_BREAKER.probeEveryMs) / 1000;
  const for_ = Math.round((p.pausedAt - p.failingSince) / 1000);
  return `${p.host} answered nothing for ${for_} s (${p.reason}): paused, one request every ` +
    `${every} s tries it; work on other hosts goes on`;
}

/**
 * An outage in one line, for logs: `127.0.0.1:5984 has failed every request since 12:00:01 UTC
 * (connection refused ×14): they are retried, and the crawl goes on when it answers`; then how
 * long it has lasted, and when it answers again, how long it was.
 *
 * @example
 * ```ts
 * outageLine({
 *   host: "127.0.0.1:5984",
 *   state: "down",
 *   since: Date.UTC(2026, 0, 1, 12),
 *   at: Date.UTC(2026, 0, 1, 12, 0, 5),
 *   failures: 14,
 *   reason: "connection refused ×14",
 * }); // "127.0.0.1:5984 has failed every request since 12:00:00 UTC (connection refused ×14): …"
 * ```
 */
export function outageLine(o: HostOutage): string {
  const lasted = Math.round((o.at - o.since) / 1000);
  const since = new Date(o.since).toISOString().slice(11, 19);
  switch (o.state) {
    case "down":
      return `${o.host} has failed every request since ${since} UTC (${o.reason}): they are ` +
        `retried, and the crawl goes on when it answers`;
    case "still":
      return `${o.host} still fails every request after ${lasted} s (${o.failures} attempts: ` +
        `${o.reason})`;
    case "up":
      return `${o.host} answers again after ${lasted} s of failures (${o.failures} attempts failed)`;
  }
}
