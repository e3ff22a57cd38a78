/**
 * Concurrency that follows the other side's answers (AIMD, as TCP does): it grows while requests
 * succeed — doubling per round in slow start, then one at a time — and halves when the other side
 * pushes back (a request failed, or needed retries: 429s, 503s, timeouts). Latency alone is not a
 * signal here: a page of 10,000 rows is rightly slower than a probe of one. The planner uses it to
 * keep many requests in flight at high latency; document fetching, to back off when a registry
 * pushes back.
 *
 * @module
 */

/** Options of {@linkcode AdaptiveLimit}. */
export interface AdaptiveLimitOptions {
  /** Requests in flight at first. @default max */
  start?: number;
  /** Never more than this. */
  max: number;
  /** Double per round until the first sign of trouble, instead of adding one. @default false */
  slowStart?: boolean;
}

/** A concurrency limit that adapts (see the module comment). */
export class AdaptiveLimit {
  #value: number;
  #max: number;
  #slowStart: boolean;
  #streak = 0;

  /** A limit within [1, `max`]. */
  constructor(options: AdaptiveLimitOptions | number) {
    const o = typeof options === "number" ? { max: options } : options;
    this.#max = Math.max(1, o.max);
    this.#value = Math.min(this.#max, Math.max(1, o.start ?? this.#max));
    this.#slowStart = o.slowStart ?? false;
  }

  /** Requests allowed in flight now. */
  get value(): number {
    return Math.floor(this.#value);
  }

  /** A request succeeded without pushback: a round of them grows the limit. */
  success(): void {
    if (++this.#streak >= this.#value) {
      this.#value = Math.min(this.#max, this.#slowStart ? this.#value * 2 : this.#value + 1);
      this.#streak = 0;
    }
  }

  /** The other side pushed back (a failure, or retries on the way): halve. */
  failure(): void {
    this.#value = Math.max(1, this.#value / 2);
    this.#slowStart = false;
    this.#streak = 0;
  }

  /**
   * Runs `fn` when a slot is free under the current limit; its outcome feeds the limit (a
   * rejection counts as pushback).
   */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    return await (await this.reserve()).run(fn);
  }

  /**
   * Takes a slot as soon as one is free and hands it over: a caller that decides only then what
   * to send (and sends it in the slot) decides with everything answered while it waited. The slot
   * counts as in flight until it has run its one request or is released.
   */
  async reserve(): Promise<Slot> {
    while (this.#inFlight >= this.value) await new Promise<void>((r) => this.#waiting.push(r));
    this.#inFlight++;
    let held = true;
    const release = () => {
      if (!held) return;
      held = false;
      this.#inFlight--;
      this.#waiting.shift()?.();
    };
    return {
      run: async <T>(fn: () => Promise<T>): Promise<T> => {
        if (!held) throw new Error("a slot runs one request");
        try {
          const out = await fn();
          this.success();
          return out;
        } catch (err) {
          this.failure();
          throw err;
        } finally {
          release();
        }
      },
      release,
    };
  }

  #inFlight = 0;
  #waiting: (() => void)[] = [];
}

/** A slot of an {@linkcode AdaptiveLimit}: runs one request, or is released unused. */
export interface Slot {
  /** Runs `fn` in the slot (once), feeding its outcome to the limit, then frees the slot. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Frees the slot without a request (no effect once it ran or was released). */
  release(): void;
}
