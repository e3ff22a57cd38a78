/** The prior of npm's names (`lib/plan/npm_prior.ts`) is what the bundled fixture says. */
import assert from "node:assert/strict";
import { NPM_NAME_QUANTILES, priorCuts } from "../../lib/plan/npm_prior.ts";
import { compareKeys } from "../../lib/plan/keys.ts";
import { bundledNames } from "../../lib/sim/names.ts";

Deno.test("npm prior: its keys cut the bundled npm names into 4,096 equal shares", async () => {
  const names = [...await bundledNames()].sort(compareKeys);
  const keys: string[] = [];
  for (let i = 1; i < 4096; i++) {
    const k = names[Math.floor((i * names.length) / 4096)];
    if (k !== keys.at(-1)) keys.push(k);
  }
  assert.deepEqual(NPM_NAME_QUANTILES, keys);
});

Deno.test("npm prior: cuts for n shares are n - 1 ascending keys, fewer past 4,096", () => {
  assert.deepEqual(priorCuts(1), []);
  assert.deepEqual(priorCuts(0), []);
  for (const n of [2, 7, 56, 1000, 4096]) {
    const cuts = priorCuts(n);
    assert.equal(cuts.length, n - 1, `n = ${n}`);
    assert.ok(cuts.every((k, i) => i === 0 || compareKeys(cuts[i - 1], k) < 0), `n = ${n}`);
  }
  assert.equal(priorCuts(2)[0], NPM_NAME_QUANTILES[2047], "the median");
  assert.equal(priorCuts(10_000).length, NPM_NAME_QUANTILES.length);
});
