/**
 * A prior of where npm's names fall, for planning a registry that gives no rank (its `_all_docs`
 * `offset` absent, or always 0) and refuses `skip`: the keys that cut the bundled sample of 226,995
 * real npm names (`fixtures/npm-names.txt.gz`, every 20th name of the registry in 2025) into 4,096
 * equal shares, in key order. A crawl cut there starts at once instead of listing every row first
 * (one sequential pass, then the crawl: twice the work of a pager); on npm's names the shares are
 * within a few percent of equal, on other registries they are only uneven, never wrong: each range
 * is listed to its end and the total is checked. The keys are in `npm_prior.json`;
 * `tests/plan/npm_prior_test.ts` recomputes them from the fixture.
 *
 * @module
 */

import prior from "./npm_prior.json" with { type: "json" };

/** 4,095 keys cutting npm's names into 4,096 equal shares (ascending, distinct). */
export const NPM_NAME_QUANTILES: readonly string[] = prior.keys;

/**
 * The keys that cut the key space into `n` shares the prior holds equally (ascending, distinct):
 * `n - 1` keys, fewer when `n` is over 4,096 (shares of one quantile each, at most). `n` <= 1: none.
 *
 * @example
 * ```ts
 * priorCuts(4); // three keys, each a quarter of npm's names further on
 * ```
 */
export function priorCuts(n: number): string[] {
  const q = NPM_NAME_QUANTILES.length + 1;
  const out: string[] = [];
  for (let i = 1; i < n; i++) {
    const key = NPM_NAME_QUANTILES[Math.round((i * q) / n) - 1];
    if (key !== undefined && key !== out.at(-1)) out.push(key);
  }
  return out;
}
