/**
 * Bounded concurrency: run async work with at most N in flight (stands in for `@std/async/pool`).
 *
 * @module
 */

/** A counting semaphore. */
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
 * Maps `items` through `fn` with at most `concurrency` calls in flight, keeping input order. The
 * first rejection rejects the whole map (calls already started still finish).
 */
export async function mapPool<T, R>(
  items: readonly T[],
  fn: (item: T, index: number) => Promise<R>,
  options: { concurrency: number },
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  const n = Math.min(items.length, Math.max(1, Math.floor(options.concurrency)));
  await Promise.all(Array.from({ length: n }, worker));
  return out;
}
