/**
 * The two methods the planner is measured against (`deno task plan` summary, `deno task bench`):
 * the naive even split of the key space, and the seed's fixed 40-step bisection.
 *
 * @module
 */
import { mapPool } from "../base/pool.ts";
import { type Listing, rank } from "./source.ts";
import { type ShardSpec, targetRanks } from "./planner.ts";

const LOW = 0x20;
const SPAN = 0x7f - 0x20; // printable ASCII, the naive view of a key's alphabet

/**
 * Boundary keys that cut the printable-ASCII key space into `shards` equal-width pieces, reading a
 * key's first two characters as a number. This is the "even split" that real keys defeat: on npm
 * names, every `@scope/…` name falls into the few pieces around `@`.
 */
export function evenSplitKeys(shards: number): string[] {
  const space = SPAN * SPAN;
  const keys: string[] = [];
  for (let i = 1; i < shards; i++) {
    const v = Math.floor((i * space) / shards);
    const hi = Math.floor(v / SPAN);
    const lo = v % SPAN;
    keys.push(String.fromCharCode(LOW + hi) + (lo ? String.fromCharCode(LOW + lo) : ""));
  }
  return [...new Set(keys)];
}

/**
 * The even split's cuts for `shards` pieces with their ranks (one listing request each, a few at a
 * time): the picture a plan is compared with.
 */
export async function evenSplitRanks(
  source: Listing,
  shards: number,
): Promise<{ key: string; rank: number }[]> {
  const keys = evenSplitKeys(shards);
  const ranks = await mapPool(keys, (k) => rank(source, k), { concurrency: 8 });
  return keys.map((key, i) => ({ key, rank: ranks[i] }));
}

/**
 * Items in each piece of an even split, from its cuts' ranks (as {@linkcode evenSplitRanks} gives
 * them): `even.length + 1` counts that add up to `total`.
 */
export function evenSplitPieces(total: number, even: { rank: number }[]): number[] {
  const ranks = [0, ...even.map((e) => e.rank), total];
  return ranks.slice(1).map((r, i) => Math.max(0, r - ranks[i]));
}

/** Shards between boundary keys, with item counts from the source's ranks (one request each). */
export async function shardsAt(
  source: Listing,
  keys: string[],
  total: number,
): Promise<ShardSpec[]> {
  const ranks: number[] = [];
  for (const k of keys) ranks.push(await rank(source, k));
  const rs = [0, ...ranks, total];
  return [null, ...keys].map((start, i) => ({
    start,
    end: i < keys.length ? keys[i] : null,
    items: rs[i + 1] - rs[i],
  }));
}

/** The plain code-point midpoint of two strings, digit by digit over UTF-16 units (the seed's). */
export function plainMidpoint(a: string, b: string): string {
  const n = Math.max(a.length, b.length) + 1;
  const num = (s: string) => {
    let x = 0n;
    for (let i = 0; i < n; i++) x = x * 65536n + BigInt(i < s.length ? s.charCodeAt(i) : 0);
    return x;
  };
  let m = (num(a) + num(b)) / 2n;
  const units: number[] = [];
  for (let i = 0; i < n; i++) {
    units.unshift(Number(m % 65536n));
    m /= 65536n;
  }
  while (units.length && units.at(-1) === 0) units.pop();
  return String.fromCharCode(...units);
}

/**
 * The seed's planner: for each boundary, 40 bisection steps between `""` and `"\uffff"` using
 * {@linkcode plainMidpoint} and the rank oracle. Returns the boundaries found and their error.
 */
export async function seedBisection(
  source: Listing,
  total: number,
  shards: number,
  options: { steps?: number } = {},
): Promise<{ keys: string[]; ranks: number[]; maxError: number }> {
  const steps = options.steps ?? 40;
  const keys: string[] = [];
  const ranks: number[] = [];
  let maxError = 0;
  for (const t of targetRanks(total, shards)) {
    let lo = "";
    let hi = "\uffff";
    let loRank = 0;
    for (let s = 0; s < steps; s++) {
      const mid = plainMidpoint(lo, hi);
      const r = await rank(source, mid);
      if (r <= t) [lo, loRank] = [mid, r];
      else hi = mid;
    }
    keys.push(lo);
    ranks.push(loRank);
    maxError = Math.max(maxError, Math.abs(loRank - t));
  }
  return { keys, ranks, maxError };
}

/** The largest shard's share of all items, 0..1. */
export function maxShare(shards: ShardSpec[], total: number): number {
  return Math.max(...shards.map((s) => s.items)) / total;
}
