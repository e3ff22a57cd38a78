/**
 * What the pacer (`host_pacer.ts`) keeps of each host: the spacing its requests leave at (GCRA),
 * what it sent, served and pushed back over the last second and the last ten, each route's latency
 * against its usual, and the cut on trial, if any.
 *
 * @module
 */

/** Requests leaving `1/rate` apart, with `burst` at once (GCRA: a theoretical arrival time). */
export class Spacing {
  #tat = -Infinity;
  /** Reserves a send time at `ratePerSecond`; resolves to the wait, in milliseconds. */
  reserve(now: number, ratePerSecond: number): number {
    const interval = 1000 / ratePerSecond;
    const tolerance = Math.max(0, ratePerSecond / 20 - 1) * interval;
    const tat = Math.max(this.#tat, now);
    this.#tat = tat + interval;
    return Math.max(0, tat - tolerance - now);
  }
}

/** Events counted in 100 ms buckets, for how many came over the last `seconds`. */
export class SentWindow {
  #n: number;
  #buckets: number[];
  #at: number[];
  constructor(seconds = 1) {
    this.#n = 10 * seconds;
    this.#buckets = new Array<number>(this.#n).fill(0);
    this.#at = new Array<number>(this.#n).fill(-1);
  }
  add(now: number): void {
    const slot = Math.floor(now / 100);
    const i = slot % this.#n;
    if (this.#at[i] !== slot) (this.#at[i] = slot, this.#buckets[i] = 0);
    this.#buckets[i]++;
  }
  /** Events over the window (per second for the default one). */
  perSecond(now: number): number {
    const slot = Math.floor(now / 100);
    let n = 0;
    for (let i = 0; i < this.#n; i++) if (slot - this.#at[i] < this.#n) n += this.#buckets[i];
    return n;
  }
}

/** The middle of `xs` (the upper one of an even count). */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[xs.length >> 1];
}

/** Answers a route's latency is the median of. */
export const LATENCY_WINDOW = 21;

/** The latency of one route of a host (the median of its last answers), against its usual. */
export interface Latency {
  recent: number[];
  next: number;
  usual: number;
  samples: number;
}

/** What can slow a host: its pushback (429, 503, 504), or its latency growing. */
export type Signal = "pushback" | "latency";

/**
 * A cut on trial: the signal's measure when it was made (the share of answers pushing back over
 * the 10 s up to the end of its cool-down, or the route's median latency), and what came at the
 * slower pace since.
 */
export interface Trial {
  signal: Signal;
  route: string;
  atCut: number;
  before: number | null;
  reason: string | null;
  answers: number;
  pushed: number;
  ms: number[];
}

export class HostState {
  limit: number | null = null;
  reason: string | null = null;
  cutAt: number | null = null;
  heldUntil = 0;
  requests = 0;
  pushbacks = 0;
  held = false; // the rate held a request back since the last growth
  grownAt = 0;
  spacing = new Spacing();
  sent = new SentWindow();
  served = new SentWindow(); // answers that did not push back, over the last second
  servingSince: number | null = null; // the first such answer, epoch ms
  pushed = new SentWindow(); // answers that pushed back, over the last second
  // Over the last 10 s, the share that pushed back: what a cut on trial is judged against (over
  // one second it is at its highest when a pushback comes, which would pass chance for a cure).
  served10 = new SentWindow(10);
  pushed10 = new SentWindow(10);
  /** A cut being watched: did slowing down make the host push back less, or answer faster? */
  trial: Trial | null = null;
  /** Until then a signal is taken for the host's own ways, not our pace (epoch ms). */
  deafUntil: Record<Signal, number> = { pushback: 0, latency: 0 };
  latency = new Map<string, Latency>();
}
