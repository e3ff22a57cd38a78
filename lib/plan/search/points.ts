/**
 * Known (key, rank) points of a listing, kept sorted by key with non-decreasing ranks: what every
 * answer of the rank oracle teaches, shared by all boundary searches. A registry that changes while
 * it is planned (the live npm replica does) makes older answers disagree slightly with newer ones:
 * the newer point wins and the older ones it contradicts are dropped; only wholesale contradiction
 * means the offsets are not ranks at all.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import { compareKeys } from "../keys.ts";

/** A key with a known rank. */
export interface Point {
  /** The key. */
  key: string;
  /** Keys sorting before it. */
  rank: number;
  /** True when `key` is a real key (at rank `rank`); false for a probe key (rank = keys below it). */
  real: boolean;
}

/** The error for offsets that cannot be ranks. */
export function inconsistent(): FatalError {
  return new FatalError(
    "the registry's offsets contradict each other (not a rank, or the registry changed while planning)",
  );
}

/** Sorted, self-correcting set of points. */
export class PointSet {
  #points: Point[] = [];
  #conflicts = 0;
  #maxConflicts: number;

  /** `maxConflicts` contradictions are tolerated (drift); one more throws `inconsistent()`. */
  constructor(options: { maxConflicts: number }) {
    this.#maxConflicts = options.maxConflicts;
  }

  /** Number of points. */
  get size(): number {
    return this.#points.length;
  }

  /** The points in key order (read only). */
  get all(): readonly Point[] {
    return this.#points;
  }

  #conflict(): void {
    if (++this.#conflicts > this.#maxConflicts) throw inconsistent();
  }

  /** Index of the first point whose key sorts after `key`. */
  #indexAfter(key: string): number {
    let lo = 0;
    let hi = this.#points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(this.#points[mid].key, key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Adds a point; points it contradicts (same key other rank, or out of rank order) are dropped. */
  add(p: Point): void {
    const points = this.#points;
    let i = this.#indexAfter(p.key);
    const prev = points[i - 1];
    if (prev && prev.key === p.key) {
      if (prev.rank === p.rank) {
        prev.real ||= p.real;
        return;
      }
      this.#conflict();
      points.splice(--i, 1);
    }
    while (i > 0 && points[i - 1].rank > p.rank) {
      this.#conflict();
      points.splice(--i, 1);
    }
    while (i < points.length && points[i].rank < p.rank) {
      this.#conflict();
      points.splice(i, 1);
    }
    points.splice(i, 0, p);
  }

  /**
   * The bracket of target rank `t`: `a` = the last point with rank <= t (the real one when tied),
   * `b` = the first with rank > t. Either is undefined when drift removed every point on that side.
   */
  bracket(t: number): { a?: Point; b?: Point } {
    const points = this.#points;
    let i = 0;
    let hi = points.length;
    while (i < hi) {
      const mid = (i + hi) >>> 1;
      if (points[mid].rank <= t) i = mid + 1;
      else hi = mid;
    }
    return { a: points[i - 1], b: points[i] };
  }
}
