import assert from "node:assert/strict";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { planShards, targetRanks } from "../../lib/plan/planner.ts";
import { priorCuts } from "../../lib/plan/npm_prior.ts";
import { spreadOrder } from "../../lib/plan/search/search_order.ts";
import { InputError } from "../../lib/base/errors.ts";
import { bundledNames, syntheticNames } from "../../lib/sim/names.ts";
import { assertExactPlan, dataOf, randomKeys, wrapSource } from "../helpers.ts";

const ASCII = "abcdefghijklmnopqrstuvwxyz0123456789-._".split("");
const UNICODE = [
  "a",
  "b",
  "é",
  "ж",
  "中",
  "\uffff",
  "\ue000",
  "\u{10000}",
  "\u{1f600}",
  "-",
  "@",
  "/",
];

Deno.test("targetRanks and spreadOrder", () => {
  assert.deepEqual(targetRanks(10, 3), [3, 6]);
  assert.deepEqual(targetRanks(5, 5), [1, 2, 3, 4]);
  for (const n of [0, 1, 2, 7, 55, 255]) {
    assert.deepEqual([...spreadOrder(n)].sort((a, b) => a - b), [...Array(n).keys()]);
  }
});

Deno.test("planner: exact balance on random key sets (property)", async (t) => {
  const sets: [string, string[]][] = [
    ["ascii", randomKeys(5000, ASCII, 1)],
    ["unicode with astral", randomKeys(4000, UNICODE, 2, 6)],
    [
      "one dense prefix",
      [
        ...randomKeys(3000, ASCII, 3).map((k) => `@types/${k}`),
        ...randomKeys(200, ASCII, 4),
      ].sort(),
    ],
    ["tiny", ["a", "b", "c"]],
    ["single key", ["only"]],
    ["long shared prefixes", randomKeys(2000, ["a", "b"], 5, 20)],
  ];
  for (const [name, keys] of sets) {
    await t.step(name, async () => {
      const data = dataOf(keys);
      for (const n of [1, 2, 3, 7, 16, 56].filter((n) => n <= keys.length)) {
        for (const maxPage of [2, 10, 1000]) {
          const plan = await planShards(new MemorySource(data, { maxPage }), n);
          assertExactPlan(plan, data, n);
          assert.equal(plan.method, "rank");
        }
      }
      const all = await planShards(new MemorySource(data), keys.length);
      assertExactPlan(all, data, keys.length);
    });
  }
});

Deno.test("planner: N > total, N < 1 and an empty registry are input errors", async () => {
  const data = dataOf(["a", "b", "c"]);
  await assert.rejects(() => planShards(new MemorySource(data), 4), InputError);
  await assert.rejects(() => planShards(new MemorySource(data), 0), InputError);
  await assert.rejects(() => planShards(new MemorySource(data), 1.5), InputError);
  await assert.rejects(() => planShards(new MemorySource(dataOf([])), 1), /no items/);
});

Deno.test("planner: real npm names, N=56, limit 1000: at most 4 requests per boundary", async () => {
  const data = dataOf(await bundledNames());
  const source = new MemorySource(data, { maxPage: 1000 });
  const plan = await planShards(source, 56);
  assertExactPlan(plan, data, 56);
  assert.ok(plan.requests <= 4 * 55, `${plan.requests} requests`);
});

Deno.test("planner: synthetic 300k names stay exact at N = 16, 56, 256", async () => {
  const data = dataOf(syntheticNames(await bundledNames(), 300_000));
  for (const n of [16, 56, 256]) {
    const plan = await planShards(new MemorySource(data), n);
    assertExactPlan(plan, data, n);
  }
});

Deno.test("planner: a source refusing descending listings is still planned exactly", async () => {
  for (const keys of [randomKeys(5000, UNICODE, 14, 6), randomKeys(3000, ASCII, 15)]) {
    const data = dataOf(keys);
    for (const n of [2, 16, 56]) {
      const plan = await planShards(
        new MemorySource(data, { noDescending: true, maxPage: 100 }),
        n,
      );
      assert.equal(plan.method, "rank");
      assertExactPlan(plan, data, n);
    }
  }
  const broken = dataOf(randomKeys(500, ASCII, 16));
  const p = await planShards(
    new MemorySource(broken, { noDescending: true, brokenOffsets: true }),
    5,
    { withoutRanks: "listing" },
  );
  assert.equal(p.method, "listing");
  assertExactPlan(p, broken, 5);
});

Deno.test("planner: offsets that are not ranks are detected; skip or listing plans stay exact", async () => {
  const data = dataOf(randomKeys(3000, UNICODE, 9, 5));
  const bySkip = await planShards(new MemorySource(data, { brokenOffsets: true, skip: true }), 7);
  assert.equal(bySkip.method, "skip");
  assertExactPlan(bySkip, data, 7);
  const byListing = await planShards(
    new MemorySource(data, { brokenOffsets: true, maxPage: 100 }),
    7,
    { withoutRanks: "listing" },
  );
  assert.equal(byListing.method, "listing");
  assertExactPlan(byListing, data, 7);
});

Deno.test("planner: no rank and no skip: cut at once where a prior of npm's names falls, no row listed first", async () => {
  const data = dataOf(syntheticNames(await bundledNames(), 20_000));
  const source = new MemorySource(data, { brokenOffsets: true, maxPage: 100 });
  const plan = await planShards(source, 16);
  assert.equal(plan.method, "prior");
  assert.equal(plan.total, 20_000);
  assert.deepEqual(plan.shards.slice(1).map((s) => s.start), priorCuts(16));
  assert.equal(plan.shards[0].start, null);
  assert.equal(plan.shards.at(-1)!.end, null);
  assert.ok(plan.shards.every((s, i) => i === 0 || s.start === plan.shards[i - 1].end));
  assert.equal(plan.shards.reduce((n, s) => n + s.items, 0), 20_000, "estimates sum to the total");
  // The first page, the last key, the check of offsets and the probes sent beside it: no pass.
  assert.ok(plan.requests < 40, `${plan.requests} requests, not a pass over 200 pages`);
  // On names with npm's skew, the prior's shares are near equal (what a crawl's speed rests on).
  const held = plan.shards.map((s) =>
    data.keys.filter((k) => (s.start === null || k >= s.start) && (s.end === null || k < s.end))
      .length
  );
  assert.ok(Math.max(...held) < 1.3 * (20_000 / 16), `shares ${held.join(", ")}`);
});

Deno.test("planner: an error from the source propagates (no wrong plan)", async () => {
  const data = dataOf(randomKeys(500, ASCII, 12));
  const source = new MemorySource(data, { maxPage: 10 });
  let calls = 0;
  const flaky = wrapSource(source, {
    list: (o) => ++calls === 5 ? Promise.reject(new InputError("boom")) : source.list(o),
  });
  await assert.rejects(() => planShards(flaky, 16), /boom/);
});

Deno.test("planner: a registry that changes while it is planned still gets a partition", async () => {
  const data = dataOf(randomKeys(20_000, ASCII, 13, 7));
  const inner = new MemorySource(data, { maxPage: 200 });
  let n = 0;
  // Every listing request lands after a few inserts and deletions, like the live npm replica.
  const moving = wrapSource(inner, {
    list: (o) => {
      n++;
      data.put(`zz-new-${n}`);
      data.put(`aa-new-${n}`);
      data.delete(data.keys[Math.floor(data.size / 2)]);
      return inner.list(o);
    },
  });
  const plan = await planShards(moving, 16);
  assert.equal(plan.shards.length, 16);
  for (let i = 1; i < 16; i++) assert.equal(plan.shards[i].start, plan.shards[i - 1].end);
  assert.equal(plan.shards[0].start, null);
  assert.equal(plan.shards[15].end, null);
  // Balanced up to the drift that happened meanwhile.
  const sizes = plan.shards.map((s) => {
    const a = s.start === null ? 0 : data.rank(s.start);
    const b = s.end === null ? data.size : data.rank(s.end);
    return b - a;
  });
  const ideal = data.size / 16;
  assert.ok(sizes.every((x) => Math.abs(x - ideal) < 0.1 * ideal), sizes.join(","));
});

Deno.test("planner: the search starts beside the check that offsets are ranks, and tells nothing it fails", async () => {
  const data = dataOf(randomKeys(5000, ASCII, 21));
  const last = data.keys[data.keys.length - 1];
  for (const broken of [false, true]) {
    const inner = new MemorySource(data, { brokenOffsets: broken, skip: true, maxPage: 100 });
    const events: string[] = [];
    const source = wrapSource(inner, {
      list: async (o) => {
        const what = o.start === last && o.limit === 3 ? "check" : o.start ? "search" : "other";
        events.push(`send ${what}`);
        await new Promise((r) => setTimeout(r, 5));
        const page = await inner.list(o);
        events.push(`answer ${what}`);
        return page;
      },
    });
    const starts: (string | null)[] = [];
    const plan = await planShards(source, 9, { onShardStart: (s) => starts.push(s) });
    assertExactPlan(plan, data, 9);
    const checked = events.indexOf("answer check");
    assert.ok(checked > 0);
    assert.ok(
      events.indexOf("send search") < checked,
      "a probe went out before the check's answer",
    );
    if (broken) {
      assert.equal(plan.method, "skip");
      assert.deepEqual(starts, [], "nothing told from a search on offsets that are not ranks");
    } else {
      assert.equal(plan.method, "rank");
      assert.deepEqual(starts.toSorted(), plan.shards.map((s) => s.start).toSorted());
    }
  }
});
