/** The rank oracle as a tool: keys at ranks and percentiles, exactly; a key's rank. */
import assert from "node:assert/strict";
import { InputError } from "../../lib/base/errors.ts";
import { keysAtRanks, locateKeys, percentileRank } from "../../lib/plan/locate.ts";
import { loadKeys } from "../../lib/sim/load_keys.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { dataOf, randomKeys, spawnRegistry, taskArgs } from "../helpers.ts";

const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "z"];

Deno.test("locate: keys at ranks are exact, first page, last key and everything between", async () => {
  const data = dataOf(randomKeys(20_001, UNI, 31, 8));
  const source = new MemorySource(data, { maxPage: 200 });
  const ranks = [0, 1, 199, 200, 10_000, 12_345, 19_999, 20_000, 10_000];
  const found = await keysAtRanks(source, ranks);
  assert.equal(found.total, 20_001);
  assert.equal(found.method, "rank");
  assert.deepEqual(found.keys, ranks.map((r) => data.keys[r]));
});

Deno.test("locate: counts its own requests, not others made on the same source meanwhile", async () => {
  const data = dataOf(randomKeys(20_000, UNI, 34, 8));
  const source = new MemorySource(data, { maxPage: 200 });
  const searching = keysAtRanks(source, [5000, 15_000]);
  // Made while the search waits for its first answers.
  const others = Promise.all(
    Array.from({ length: 30 }, (_, i) => source.list({ start: data.keys[i * 600], limit: 1 })),
  );
  const found = await searching;
  await others;
  assert.deepEqual(found.keys, [data.keys[5000], data.keys[15_000]]);
  assert.ok(found.requests > 2);
  assert.equal(found.requests, source.requests - 30);
});

Deno.test("locate: percentiles: 50 is the exact median of an odd count; 0 and 100 the ends", () => {
  assert.equal(percentileRank(50, 101), 50);
  assert.equal(percentileRank(50, 100), 50);
  assert.equal(percentileRank(0, 7), 0);
  assert.equal(percentileRank(100, 7), 6);
  assert.equal(percentileRank(99.9, 1000), 999);
  for (const bad of [-1, 100.01, NaN, Infinity]) {
    assert.throws(() => percentileRank(bad, 10), InputError);
  }
});

Deno.test("locate: several ranks share probes: fewer requests than one search each", async () => {
  const data = dataOf(randomKeys(50_000, UNI, 32, 8));
  const percentiles = [10, 20, 30, 40, 50, 60, 70, 80, 90];
  const together = new MemorySource(data, { maxPage: 100 });
  const all = await keysAtRanks(together, (t) => percentiles.map((p) => percentileRank(p, t)));
  let separately = 0;
  for (const p of percentiles) {
    const alone = new MemorySource(data, { maxPage: 100 });
    const one = await keysAtRanks(alone, (t) => [percentileRank(p, t)]);
    assert.equal(one.keys[0], all.keys[percentiles.indexOf(p)]);
    separately += one.requests;
  }
  assert.deepEqual(all.keys, percentiles.map((p) => data.keys[percentileRank(p, data.size)]));
  assert.ok(all.requests < separately, `${all.requests} together vs ${separately} separately`);
});

Deno.test("locate: a source without ranks (pouchdb-like) is searched by skip or one pass, still exact", async () => {
  const data = dataOf(randomKeys(3000, UNI, 33, 6));
  for (const skip of [true, false]) {
    const source = new MemorySource(data, { maxPage: 100, brokenOffsets: true, skip });
    const found = await keysAtRanks(source, [0, 1500, 2999]);
    assert.equal(found.method, skip ? "skip" : "listing");
    assert.deepEqual(found.keys, [data.keys[0], data.keys[1500], data.keys[2999]]);
    const [place] = await locateKeys(source, [data.keys[1234]]);
    assert.deepEqual([place.rank, place.present], [1234, true]);
  }
});

Deno.test("locate: a key's rank, present or not, and bad ranks", async () => {
  const data = dataOf(["b", "d", "f", "h"]);
  const source = new MemorySource(data, { maxPage: 10 });
  const places = await locateKeys(source, ["a", "d", "e", "z"]);
  assert.deepEqual(places.map((p) => [p.rank, p.present, p.percentile]), [
    [0, false, 0],
    [1, true, 25],
    [2, false, 50],
    [4, false, 100],
  ]);
  await assert.rejects(() => keysAtRanks(source, [4]), /rank 4 is outside 0..3/);
  await assert.rejects(() => keysAtRanks(source, [1.5]), InputError);
  await assert.rejects(() => keysAtRanks(new MemorySource(dataOf([])), [0]), /holds no items/);
});

Deno.test("locate: the CLI finds the exact median of a registry it has not seen", async () => {
  const seed = 1 + Math.floor(Math.random() * 1e6);
  const size = 60_001 + 2 * Math.floor(Math.random() * 1000);
  const reg = await spawnRegistry(["--synthetic", String(size), "--seed", String(seed)]);
  try {
    const truth = await loadKeys({ synthetic: size, seed });
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        ...taskArgs("locate"),
        "--source",
        reg.url,
        "--percentile",
        "50,99",
        "--json",
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const res = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(res.total, size);
    assert.equal(res.located[0].key, truth[(size - 1) / 2], `seed ${seed}: the median`);
    assert.equal(res.located[1].key, truth[Math.floor((99 * size) / 100)]);
    assert.equal(res.method, "rank");
    const byKey = await new Deno.Command(Deno.execPath(), {
      args: [...taskArgs("locate"), "--source", reg.url, "--key", truth[777], "--json"],
      stdout: "piped",
    }).output();
    const place = JSON.parse(new TextDecoder().decode(byKey.stdout));
    assert.deepEqual([place.rank, place.present, place.total], [777, true, size]);
  } finally {
    await reg.close();
  }
});
