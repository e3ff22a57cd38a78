/**
 * Reading several streams ahead, in order: the output is every item of the first source, then of
 * the second, and so on, while up to `concurrency` sources are read at once into bounded buffers.
 * (Export reads the item ranges of a crawl this way: KV answers several range reads faster than
 * one, and the output stays in key order.)
 *
 * @module
 */

/** One source being read ahead into a bounded buffer. */
class Ahead<T> {
  #buffer: T[] = [];
  #done = false;
  #error: unknown = null;
  #wake: (() => void) | null = null;
  #room: (() => void) | null = null;

  constructor(source: AsyncIterable<T>, limit: number) {
    (async () => {
      try {
        for await (const item of source) {
          this.#buffer.push(item);
          this.#wake?.();
          if (this.#buffer.length >= limit) await new Promise<void>((r) => this.#room = r);
        }
      } catch (err) {
        this.#error = err;
      } finally {
        this.#done = true;
        this.#wake?.();
      }
    })();
  }

  async *drain(): AsyncGenerator<T> {
    for (;;) {
      if (this.#buffer.length > 0) {
        const item = this.#buffer.shift()!;
        const room = this.#room;
        this.#room = null;
        room?.();
        yield item;
        continue;
      }
      if (this.#error !== null) throw this.#error;
      if (this.#done) return;
      await new Promise<void>((r) => this.#wake = r);
      this.#wake = null;
    }
  }
}

/**
 * Yields the items of `sources` in order, reading up to `concurrency` of them ahead with at most
 * `buffer` items each. An error of a source is thrown when its turn comes.
 *
 * @example
 * ```ts
 * for await (const batch of readAhead(ranges.map((r) => () => listRange(r)), { concurrency: 4 })) {
 *   write(batch);
 * }
 * ```
 */
export async function* readAhead<T>(
  sources: (() => AsyncIterable<T>)[],
  options: { concurrency?: number; buffer?: number } = {},
): AsyncGenerator<T> {
  const concurrency = Math.max(1, options.concurrency ?? 4);
  const started: Ahead<T>[] = [];
  const start = (i: number) => {
    if (i < sources.length && !started[i]) {
      started[i] = new Ahead(sources[i](), options.buffer ?? 4);
    }
  };
  for (let i = 0; i < Math.min(concurrency, sources.length); i++) start(i);
  for (let i = 0; i < sources.length; i++) {
    start(i);
    yield* started[i].drain();
    start(i + concurrency); // a slot is free: the next source starts reading
  }
}
