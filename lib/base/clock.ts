/**
 * The one clock: what a component reads the time from, waits on and repeats with. It is passed in
 * (never read from globals where a test would want to drive it): {@linkcode SYSTEM_CLOCK} in use,
 * a fake one in tests (`tests/fake_clock.ts`), which moves only when told and runs what falls due.
 *
 * @module
 */
import { abortableSleep } from "./sleep.ts";

/** Time as a component sees it. */
export interface Clock {
  /** Epoch milliseconds now. */
  now(): number;
  /** Resolves after `ms` milliseconds, or at once when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /**
   * Calls `fn` every `ms` milliseconds until the returned function is called. A call still
   * running when the next falls due is not waited for (the caller serializes its own work).
   */
  every(ms: number, fn: () => unknown): () => void;
}

/** The system's time and timers. */
export const SYSTEM_CLOCK: Clock = clockWithNow(Date.now);

/**
 * The system's timers with the time read from `now`: a clock set at another time (a test's fixed
 * or shifted time; a replay), whose sleeps and repeating calls still take real time.
 */
export function clockWithNow(now: () => number): Clock {
  return {
    now,
    sleep: (ms, signal) => abortableSleep(ms, signal),
    every: (ms, fn) => {
      const timer = setInterval(fn, ms);
      return () => clearInterval(timer);
    },
  };
}
