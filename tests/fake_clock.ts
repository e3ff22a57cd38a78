/**
 * A clock for tests: time stands still until `advance` moves it, and what falls due on the way
 * (sleeps, repeating calls) runs in time order, each call's promise awaited before time moves on,
 * so a test drives heartbeats and backoffs without waiting on real timers.
 */
import type { Clock } from "../lib/base/clock.ts";

interface Timer {
  at: number;
  seq: number;
  run: () => unknown;
  everyMs?: number;
}

/** See the module comment. */
export class FakeClock implements Clock {
  #now: number;
  #timers: Timer[] = [];
  #seq = 0;

  /** A clock at `startMs` (epoch milliseconds). */
  constructor(startMs = 1_700_000_000_000) {
    this.#now = startMs;
  }

  /** Epoch milliseconds now. */
  now(): number {
    return this.#now;
  }

  /** Resolves once the clock was advanced `ms` (at once when `signal` aborts). */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const timer = this.#add({ at: this.#now + Math.max(0, ms), run: resolve });
      signal?.addEventListener("abort", () => (this.#drop(timer), resolve()), { once: true });
    });
  }

  /** Calls `fn` each time the clock passes another `ms`, until the returned function is called. */
  every(ms: number, fn: () => unknown): () => void {
    const timer = this.#add({ at: this.#now + ms, run: fn, everyMs: Math.max(1, ms) });
    return () => this.#drop(timer);
  }

  /** Timers waiting (sleeps and repeating calls). */
  get pending(): number {
    return this.#timers.length;
  }

  /**
   * Moves time `ms` on, running each timer that falls due on the way at its own time, in order,
   * and awaiting what it returns (a beat's KV writes) before going on.
   */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      const next = this.#timers.sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next || next.at > end) break;
      this.#now = next.at;
      if (next.everyMs) next.at += next.everyMs;
      else this.#drop(next);
      await next.run();
      // Let what the call set going (promise callbacks) run before the next timer.
      for (let i = 0; i < 10; i++) await Promise.resolve();
    }
    this.#now = end;
  }

  #add(t: Omit<Timer, "seq">): Timer {
    const timer = { ...t, seq: this.#seq++ };
    this.#timers.push(timer);
    return timer;
  }

  #drop(timer: Timer): void {
    const i = this.#timers.indexOf(timer);
    if (i >= 0) this.#timers.splice(i, 1);
  }
}

/**
 * Lets the event loop take one turn (I/O callbacks such as KV answers run) while no fake time
 * passes: what a test awaits between `advance` calls when the code under test is doing I/O.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * A clock whose sleeps end at once, moving its time on by their length, each noted in `slept`
 * (after `onSleep`, awaited, was told of it): for tests that count a component's pauses over
 * simulated minutes. Its repeating calls never fall due.
 */
export class JumpingClock implements Clock {
  #now: number;
  #onSleep?: (ms: number) => unknown;
  /** Every sleep asked for, in milliseconds, in order. */
  readonly slept: number[] = [];

  /** A clock at `startMs` (epoch milliseconds). */
  constructor(startMs = 1_700_000_000_000, onSleep?: (ms: number) => unknown) {
    this.#now = startMs;
    this.#onSleep = onSleep;
  }

  /** Epoch milliseconds now. */
  now(): number {
    return this.#now;
  }

  /** Notes the sleep and moves time `ms` on. */
  async sleep(ms: number): Promise<void> {
    this.slept.push(ms);
    await this.#onSleep?.(ms);
    this.#now += Math.max(0, ms);
  }

  /** Never calls `fn`: time moves only by sleeps. */
  every(): () => void {
    return () => {};
  }
}
