/**
 * Bounded concurrency: run async work with at most N in flight (stands in for `@std/async/pool`).
 *
 * @module
 */

/**
 * A counting semaphore.
 *
 * @example
 * ```ts
 * const pool = new Semaphore(4); // at most 4 in flight
 * const pages = await Promise.all(
 *   ["a", "m"].map((start) => pool.run(() => source.list({ start, limit: 100 }))),
 * );
 * ```
 */
export class Semaphore {
  #free: number;
  #waiting: (() => void)[] = [];

  /** A semaphore with `size` permits (at least 1). */
  constructor(size: number) {
    this.#free = Math.max(1, Math.floor(size));
  }

  /** Runs `fn` once a permit is free, releasing it however `fn` ends. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Takes a permit once one is free; the returned function gives it back (once). */
  async acquire(): Promise<() => void> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((r) => this.#waiting.push(r));
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const next = this.#waiting.shift();
      if (next) next();
      else this.#free++;
    };
  }
}

/**
 * Maps `items` through `fn` with at most `concurrency` calls in flight, keeping input order. After
 * the first rejection no new call starts; the calls already started are waited for (so nothing of
 * this map runs on after it returns), then the map rejects with that first error.
 *
 * @example
 * ```ts
 * const ids = ["a", "b", "c"];
 * const lengths = await mapPool(ids, async (id) => id.length, { concurrency: 2 }); // [1, 1, 1]
 * ```
 */
export async function mapPool<T, R>(
  items: readonly T[],
  fn: (item: T, index: number) => Promise<R>,
  options: { concurrency: number },
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  let failure: { err: unknown } | null = null;
  const worker = async () => {
    while (next < items.length && failure === null) {
      const i = next++;
      try {
        out[i] = await fn(items[i], i);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  const n = Math.min(items.length, Math.max(1, Math.floor(options.concurrency)));
  await Promise.all(Array.from({ length: n }, worker));
  if (failure !== null) throw (failure as { err: unknown }).err;
  return out;
}

/**
 * `Promise.all` that ends with its work: waits for every promise to settle, then resolves with all
 * values in order, or rejects with the first rejection (in input order). Requests run together
 * with retries and backoff sleeps: with `Promise.all`, a failure would leave the others running on
 * after the caller has moved on (or ended).
 */
export async function allSettledOrThrow<T>(promises: readonly Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}
