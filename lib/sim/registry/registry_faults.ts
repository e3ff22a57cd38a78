/**
 * Injected misbehaviour of the simulated registry: added latency and random faults (500, 503, 429
 * with `Retry-After`, a truncated body, a connection dropped mid-body, a slow answer), decided
 * before the handler runs and applied to its answer, so a truncated body is a real prefix of a
 * real answer.
 *
 * @module
 */
import type { Context, Next } from "hono";
import { prng } from "../names.ts";

/**
 * Kinds of injected fault. `drop` cuts the connection mid-body; `error-body` answers 200 with a
 * CouchDB error object instead of the answer (as some proxies and overloaded clusters do).
 */
export type FaultKind = "500" | "503" | "429" | "truncated" | "drop" | "slow" | "error-body";

/** The default set for `faultRate`. */
export const FAULT_KINDS: readonly FaultKind[] = ["500", "503", "429", "truncated", "drop", "slow"];

/** Every fault kind that can be asked for. */
export const ALL_FAULT_KINDS: readonly FaultKind[] = [...FAULT_KINDS, "error-body"];

/** Options of {@linkcode faultMiddleware}. */
export interface FaultOptions {
  /** Added latency for every request, in milliseconds. @default 0 */
  latencyMs?: number;
  /** Share of requests that fail, 0..1. @default 0 */
  faultRate?: number;
  /** Which faults to inject. @default FAULT_KINDS */
  faults?: readonly FaultKind[];
  /** `Retry-After` sent with 429, in seconds. @default 1 */
  retryAfterS?: number;
  /** Delay of a `slow` fault, in milliseconds. @default 1000 */
  slowMs?: number;
  /** PRNG seed for faults. @default 42 */
  seed?: number;
  /**
   * Requests a second this host serves, over any sliding second; beyond, it answers 429 (as a
   * CDN's rate limit does; a 429 is not counted as served). @default no limit
   */
  rateLimit?: number;
  /** `Retry-After` sent with a rate-limit 429, in seconds. @default none sent */
  rateLimitRetryAfterS?: number;
}

/** Times of the requests served over the last second, for `rateLimit`. */
class ServedWindow {
  #times: number[] = [];
  #head = 0;
  /** True (and counted) when one more request fits within `perSecond` over the last second. */
  admit(now: number, perSecond: number): boolean {
    while (this.#head < this.#times.length && this.#times[this.#head] <= now - 1000) this.#head++;
    if (this.#head > 4096) (this.#times = this.#times.slice(this.#head), this.#head = 0);
    if (this.#times.length - this.#head >= perSecond) return false;
    this.#times.push(now);
    return true;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A Hono middleware injecting latency and faults; `counters` counts requests and faults. */
export function faultMiddleware(
  options: FaultOptions,
  counters: { requests: number; faults: number; limited?: number },
): (c: Context, next: Next) => Promise<Response | void> {
  const faultRate = options.faultRate ?? 0;
  const faults = options.faults ?? FAULT_KINDS;
  const rand = prng(options.seed ?? 42);
  const served = new ServedWindow();
  return async (c, next) => {
    counters.requests++;
    if (options.rateLimit && !served.admit(performance.now(), options.rateLimit)) {
      counters.limited = (counters.limited ?? 0) + 1;
      const headers: Record<string, string> = options.rateLimitRetryAfterS === undefined
        ? {}
        : { "retry-after": String(options.rateLimitRetryAfterS) };
      return c.json({ error: "too_many_requests", reason: "rate limited" }, 429, headers);
    }
    if (options.latencyMs) await sleep(options.latencyMs);
    const fault = faultRate > 0 && rand() < faultRate
      ? faults[Math.floor(rand() * faults.length)]
      : undefined;
    if (fault === "500" || fault === "503" || fault === "429") {
      counters.faults++;
      const headers: Record<string, string> = {};
      if (fault === "429") headers["retry-after"] = String(options.retryAfterS ?? 1);
      return c.json(
        { error: "injected", reason: `injected fault ${fault}` },
        Number(fault) as 500,
        headers,
      );
    }
    if (fault === "error-body") {
      counters.faults++;
      return c.json({ error: "timeout", reason: "injected: the request timed out upstream" }, 200);
    }
    if (fault === "slow") {
      counters.faults++;
      await sleep(options.slowMs ?? 1000);
    }
    await next();
    if (fault === "truncated" || fault === "drop") {
      counters.faults++;
      c.res = await cutBody(c.res, fault);
    }
  };
}

/**
 * Half of `res`'s body: as a complete short answer (`truncated`), or declared whole and then
 * failed mid-stream (`drop`: the client sees a dropped connection in the middle of the body).
 */
async function cutBody(res: Response, fault: "truncated" | "drop"): Promise<Response> {
  const body = new Uint8Array(await res.arrayBuffer());
  const cut = body.slice(0, Math.floor(body.length / 2));
  const headers = { "content-type": "application/json" };
  if (fault === "truncated") return new Response(cut, { status: 200, headers });
  const stream = new ReadableStream<Uint8Array>({
    start(ctl) {
      ctl.enqueue(cut);
      ctl.error(new Error("injected connection drop"));
    },
  });
  return new Response(stream, { status: 200, headers });
}
