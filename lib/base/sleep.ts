/**
 * The one abortable sleep: lease workers between looks, followers between ticks, the CLI's
 * follow watcher.
 *
 * @module
 */

/**
 * Sleeps `ms`; ends early when `signal` aborts (at once if it already has) or when the caller's
 * `wakers` set calls the function it was given.
 */
export function abortableSleep(
  ms: number,
  signal?: AbortSignal,
  wakers?: Set<() => void>,
): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    wakers?.add(done);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      wakers?.delete(done);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
