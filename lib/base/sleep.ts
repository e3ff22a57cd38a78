/**
 * The one abortable sleep on the system's timers (behind `SYSTEM_CLOCK.sleep` in `clock.ts`, and
 * the CLI's follow watcher).
 *
 * @module
 */

/** Sleeps `ms`; ends early when `signal` aborts (at once if it already has). */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
