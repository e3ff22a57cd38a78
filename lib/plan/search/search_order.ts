/**
 * The order boundary searches start in: {@linkcode spreadOrder} visits the targets so that each
 * halves the gaps the earlier ones left (the middle, then the quarters, ...), and
 * {@linkcode LevelGates} holds a search's first step until the level before it has had its first
 * answers.
 *
 * @module
 */

/**
 * The searches' first steps, level by level of {@linkcode spreadOrder} (position p is on level
 * floor(log2(p + 1)): the middle target, then the quarters, the eighths, ...): a search whose
 * bracket is wide at the start (its first probes would be rank probes aimed over most of the key
 * space) sends its first request once every search of the level before has had its first answer,
 * so that it aims from the points its coarser neighbours found, as a binary search over the
 * targets would. Searches that started go on at once. Where answers come back together (a
 * registry far away), 32 searches had started from the whole key space at once. Measured on
 * 4,500,000 names, N = 56 (requests a boundary): capped at 1,000, 7.05 -> 6.86 and 7.09 -> 6.83
 * over HTTP 50 ms away (15 and 10 runs each, alternating; planning 1.64 -> 1.77 s), 6.99 -> 6.71
 * in memory (5 seeds), 7.72 -> 7.11 with every answer behind a timer; reads of 10,000 allowed,
 * 4.44 -> 4.36 over HTTP, 4.61 -> 4.25 in memory. Narrow brackets (a registry of up to about
 * `widePageSpan` pages) do not wait: there the waits cost more time than the requests they save
 * (300,000 names, N = 16: 3.00 -> 2.58 requests a boundary but 8% longer; a crawl of 30,000
 * documents 20 ms away, 0.64 -> 0.67 s).
 */
export class LevelGates {
  #left: number[] = [];
  #open: PromiseWithResolvers<void>[] = [];
  #stepped = new Set<number>();

  /** Gates for the positions 0..n-1 of the spread order. */
  constructor(n: number) {
    for (let p = 0; p < n; p++) {
      const level = levelOf(p);
      if (level === this.#left.length) {
        this.#left.push(0);
        this.#open.push(Promise.withResolvers<void>());
      }
      this.#left[level]++;
    }
  }

  /** Resolves once the level before `position`'s has had its first answers. */
  before(position: number): Promise<void> {
    const level = levelOf(position);
    return level === 0 ? Promise.resolve() : this.#open[level - 1].promise;
  }

  /** The search at `position` has had its first answer (or ended): counted once. */
  stepped(position: number): void {
    if (this.#stepped.has(position)) return;
    this.#stepped.add(position);
    const level = levelOf(position);
    if (--this.#left[level] === 0) this.#open[level].resolve();
  }
}

function levelOf(position: number): number {
  return Math.floor(Math.log2(position + 1));
}

/** Visits 0..n-1 in an order that halves the gaps: middle first, then quarters, ... */
export function spreadOrder(n: number): number[] {
  const out: number[] = [];
  const seen = new Set<number>();
  for (let step = 1; out.length < n; step *= 2) {
    for (let j = 1; j < 2 * step; j += 2) {
      const i = Math.min(n - 1, Math.floor((j * n) / (2 * step)));
      if (!seen.has(i)) {
        seen.add(i);
        out.push(i);
      }
    }
    if (step > 2 * n) { for (let i = 0; i < n; i++) if (!seen.has(i)) (seen.add(i), out.push(i)); }
  }
  return out;
}
