/**
 * One target's next request in the boundary search, decided from its bracket alone: finish it (a
 * known real point sits at its rank), read one page that must contain it (forward from below, or
 * descending from above, once it is within a page of a known point), read a page down from the
 * bracket's top after a probe that barely moved it, read pages on from the nearer end once probes
 * keep missing, or probe a key interpolated between the bracket's ends over the alphabet seen so
 * far, safeguarded towards bisection when interpolation stalls (Illinois rule).
 *
 * @module
 */
import { type Alphabet, keyBetween } from "../keys.ts";
import { inconsistent, type Point, type PointSet } from "./points.ts";

/** What a target does next. */
export type Step =
  | { kind: "found"; key: string }
  /** Drift removed every point below the target: the start of the key space is rank 0. */
  | { kind: "anchor-start" }
  /** Drift removed every point above the target: learn the current last key again. */
  | { kind: "relearn-end" }
  /** Read `limit` rows from `start`: the target's key is among them. */
  | { kind: "read"; start: string; limit: number }
  /** Read `limit` rows downwards from `from`: the target's key is among them. */
  | { kind: "read-down"; from: Point; limit: number }
  /** Ask for the rank of `key` (and `limit` rows from it). */
  | { kind: "probe"; key: string; limit: number };

/** A target's memory of its own probes (the Illinois rule). */
export interface ProbeMemory {
  /** Own probes that landed above the target in a row (halved by one that lands below). */
  high: number;
  /** Own probes that landed below it in a row (halved by one that lands above). */
  low: number;
  /**
   * The last probe landed above the target yet within a fifth of a page of the bracket's top:
   * between that key and the top lie almost no keys, though the model put many there.
   */
  stalled?: boolean;
}

/** Tuning of the search. */
export interface SearchTuning {
  /** Largest page to request with a probe. */
  maxPage: number;
  /** Largest page to read from the nearer end after missed probes (at least `maxPage`). */
  readPage: number;
  /** Probe with a full page once a bracket is at most this many pages wide. */
  widePageSpan: number;
  /**
   * Finish a target with one read once it is within this many rows of a known real point (a
   * probe would likely take two more round trips): `FINISH_PAGES` pages, within `readPage`.
   */
  finishRows: number;
  /** Descending listings are available. */
  descending: boolean;
}

/**
 * Decides the next request for target rank `t`, from its bracket in `points` and its memory. Pure
 * but for `alphabet`, which learns the bracket's keys.
 */
export function nextStep(
  t: number,
  points: PointSet,
  memory: ProbeMemory,
  o: SearchTuning & { alphabet: Alphabet },
): Step {
  const { a, b } = points.bracket(t);
  if (!a) return { kind: "anchor-start" };
  if (a.real && a.rank === t) return { kind: "found", key: a.key };
  if (!b) return { kind: "relearn-end" };
  const width = b.rank - a.rank;
  // Close above the lower point: read just far enough to hold t.
  const finish = Math.max(o.maxPage, o.finishRows);
  if (t - a.rank < finish) {
    return { kind: "read", start: a.key, limit: Math.min(finish, width, t - a.rank + 1) };
  }
  // Close below the upper point: one descending read finishes it.
  const below = b.real ? b.rank - t + 1 : b.rank - t;
  if (o.descending && below <= finish) return { kind: "read-down", from: b, limit: below };
  // After probes that keep missing (a crowd of keys the model cannot see into, like
  // `eslint-plugin-…`), reading pages on from the nearer end is bounded and probing may not be:
  // read once t is within as many pages of an end as probes have missed (at least 3), in one
  // request where the registry allows pages that big.
  // A probe that barely moved the top landed in a stretch the model overrates (`@t-…` above a
  // crowd of `@s…` names): probes aimed by the same model land there again, a few rows lower each
  // time, while one read down from the top passes the stretch and ends on a real key at the
  // crowd's edge. On 4,500,000 names (N = 56, 5 seeds): 7.43 -> 7.20 requests a boundary with
  // reads capped at 1,000 rows, 5.02 -> 4.74 with reads of 10,000.
  if (memory.stalled && o.descending) {
    return { kind: "read-down", from: b, limit: Math.min(o.readPage, below) };
  }
  const misses = memory.high + memory.low;
  if (misses >= 2) {
    const reach = Math.max(3, misses) * o.maxPage;
    const up = a.real && t - a.rank < reach ? t - a.rank : Infinity;
    const down = o.descending && below <= reach ? below : Infinity;
    if (up <= down && up < Infinity) {
      return { kind: "read", start: a.key, limit: Math.min(o.readPage, up + 1) };
    }
    if (down < Infinity) return { kind: "read-down", from: b, limit: Math.min(o.readPage, down) };
  }
  // Aim below t when a full page will be read, so the page likely covers t.
  const fullPage = fullPageProbes(width, o);
  const aim = fullPage ? Math.max(a.rank + 1, t - Math.floor(o.maxPage / 2)) : t;
  // Illinois-style memory: when the same end of the bracket survives probe after probe, the rank
  // mass sits near it, so its rank is pulled towards t to push the next probe over there (from
  // the third probe on that side: pulling earlier overshoots on names, measured).
  const ra = aim - (aim - a.rank) / 2 ** Math.min(8, Math.max(0, memory.high - 2));
  const rb = aim + (b.rank - aim) / 2 ** Math.min(8, Math.max(0, memory.low - 2));
  const probe = keyBetween(a.key, b.key, (aim - ra) / (rb - ra), o.alphabet);
  if (probe === null) throw inconsistent();
  return { kind: "probe", key: probe, limit: fullPage ? o.maxPage : 1 };
}

/** Probes into a bracket `width` ranks wide read a full page (wider: rank probes of one row). */
export function fullPageProbes(width: number, o: SearchTuning): boolean {
  return width <= o.widePageSpan * o.maxPage;
}
