import assert from "node:assert/strict";
import { BoundarySearch } from "../../lib/plan/search/boundary_search.ts";
import { nextStep, type ProbeMemory } from "../../lib/plan/search/next_step.ts";
import { Alphabet, compareKeys, sortKeys } from "../../lib/plan/keys.ts";
import { PointSet } from "../../lib/plan/search/points.ts";
import { listingWith } from "../../lib/plan/source.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { prng } from "../../lib/sim/names.ts";
import { dataOf, randomKeys } from "../helpers.ts";

const tuning = { maxPage: 100, readPage: 100, widePageSpan: 10, finishRows: 100, descending: true };
const fresh = (): ProbeMemory => ({ high: 0, low: 0 });

function pointsOf(...ps: [string, number, boolean][]): PointSet {
  const set = new PointSet({ maxConflicts: 0 });
  for (const [key, rank, real] of ps) set.add({ key, rank, real });
  return set;
}

Deno.test("points: a contradicting newer answer replaces the older ones; too many throw", () => {
  const set = new PointSet({ maxConflicts: 2 });
  set.add({ key: "b", rank: 10, real: true });
  set.add({ key: "d", rank: 30, real: true });
  set.add({ key: "c", rank: 40, real: false }); // drift: "d" moved
  assert.deepEqual(set.all.map((p) => p.key), ["b", "c"]);
  assert.deepEqual(set.bracket(20), { a: set.all[0], b: set.all[1] });
  set.add({ key: "a", rank: 5, real: true }); // consistent: no conflict
  assert.deepEqual(set.all.map((p) => p.key), ["a", "b", "c"]);
  // Below both b and c by key, above them by rank: two more conflicts, one too many.
  assert.throws(() => set.add({ key: "e", rank: 6, real: false }), /contradict/);
});

Deno.test("nextStep: found, forward read, descending read, wide and narrow probes", () => {
  const o = { ...tuning, alphabet: new Alphabet(["apple", "zebra"]) };
  const p = pointsOf(["apple", 1000, true], ["zebra", 100_000, true]);
  assert.deepEqual(nextStep(1000, p, fresh(), o), { kind: "found", key: "apple" });
  assert.deepEqual(nextStep(1050, p, fresh(), o), { kind: "read", start: "apple", limit: 51 });
  // 60 below the real upper point: one descending read of 61 rows holds it.
  const down = nextStep(99_940, p, fresh(), o);
  assert.equal(down.kind, "read-down");
  if (down.kind === "read-down") assert.equal(down.limit, 61);
  const far = nextStep(50_000, p, fresh(), o);
  assert.equal(far.kind, "probe");
  if (far.kind === "probe") {
    assert.equal(far.limit, 1, "a bracket over 10 pages wide gets a rank probe");
    assert.ok(compareKeys("apple", far.key) < 0 && compareKeys(far.key, "zebra") < 0);
  }
  const near = pointsOf(["apple", 1000, true], ["apricot", 1900, true]);
  const wide = nextStep(1500, near, fresh(), o);
  assert.equal(wide.kind, "probe");
  if (wide.kind === "probe") assert.equal(wide.limit, 100, "a narrow bracket gets a page probe");
  assert.deepEqual(nextStep(5, pointsOf(["m", 10, true]), fresh(), o), { kind: "anchor-start" });
  assert.deepEqual(nextStep(20, pointsOf(["m", 10, true]), fresh(), o), { kind: "relearn-end" });
  // Where reads may be larger than probes, a target a few pages from a real point is one read.
  const reach = { ...o, readPage: 1000, finishRows: 500 };
  assert.deepEqual(nextStep(1400, p, fresh(), reach), { kind: "read", start: "apple", limit: 401 });
  assert.equal(nextStep(1600, p, fresh(), reach).kind, "probe", "beyond finishRows: a probe");
});

Deno.test("nextStep: after missed probes, pages are read from the nearer end once within reach", () => {
  const o = { ...tuning, alphabet: new Alphabet(["apple", "zebra"]) };
  const p = pointsOf(["apple", 1000, true], ["zebra", 100_000, false]);
  // 250 rows above the lower point, 9,750 below the upper one (pages of 100).
  assert.equal(nextStep(1250, p, fresh(), o).kind, "probe", "no misses yet: probe");
  assert.deepEqual(nextStep(1250, p, { high: 1, low: 1 }, o), {
    kind: "read",
    start: "apple",
    limit: 100,
  });
  // 250 rows below the upper point: read down from it.
  assert.deepEqual(nextStep(99_750, p, { high: 2, low: 0 }, o), {
    kind: "read-down",
    from: { key: "zebra", rank: 100_000, real: false },
    limit: 100,
  });
  // 2,000 rows away: beyond 3 pages after 2 misses, within reach after 20.
  assert.equal(nextStep(98_000, p, { high: 2, low: 0 }, o).kind, "probe");
  assert.equal(nextStep(98_000, p, { high: 20, low: 0 }, o).kind, "read-down");
  assert.equal(nextStep(2900, p, { high: 20, low: 0 }, o).kind, "read");
  // Refused descending listings: only the lower end reads.
  assert.equal(nextStep(99_750, p, { high: 2, low: 0 }, { ...o, descending: false }).kind, "probe");
  // Where the registry allows bigger pages, one read covers the whole distance.
  const big = { ...o, readPage: 10_000 };
  assert.deepEqual(nextStep(1250, p, { high: 1, low: 1 }, big), {
    kind: "read",
    start: "apple",
    limit: 251,
  });
  assert.deepEqual(nextStep(98_000, p, { high: 20, low: 0 }, big), {
    kind: "read-down",
    from: { key: "zebra", rank: 100_000, real: false },
    limit: 2000,
  });
  // ... but never more than readPage rows: 12,000 away after 200 misses reads 10,000.
  assert.deepEqual(nextStep(88_000, p, { high: 200, low: 0 }, big), {
    kind: "read-down",
    from: { key: "zebra", rank: 100_000, real: false },
    limit: 10_000,
  });
});

Deno.test("nextStep: after a probe that barely moved the top, one page is read down from it", () => {
  const o = { ...tuning, alphabet: new Alphabet(["apple", "zebra"]) };
  const p = pointsOf(["apple", 1000, true], ["zebra", 100_000, false]);
  assert.equal(nextStep(50_000, p, fresh(), o).kind, "probe");
  const stalled = { high: 1, low: 0, stalled: true };
  assert.deepEqual(nextStep(50_000, p, stalled, o), {
    kind: "read-down",
    from: { key: "zebra", rank: 100_000, real: false },
    limit: 100,
  });
  // As far as readPage allows; never past the target; only where descending listings work.
  const big = { ...o, readPage: 10_000 };
  assert.equal((nextStep(50_000, p, stalled, big) as { limit: number }).limit, 10_000);
  assert.equal(nextStep(50_000, p, stalled, { ...o, descending: false }).kind, "probe");
});

Deno.test("boundary search: probes that stall above a crowd read down past the stretch the model overrates", async () => {
  // npm's `@s…`/`@t-…` shape: a crowd of 20,000 names under `@s`, 40 under `@t-`, then names
  // the model takes to be spread evenly over the key space.
  const rand = prng(5);
  const word = (n: number) =>
    Array.from({ length: n }, () => "abcdefghijklmnopqrstuvwxyz"[Math.floor(rand() * 26)]).join("");
  const keys = sortKeys([
    ...new Set([
      ...Array.from({ length: 3_000 }, () => `@q${word(6)}`),
      ...Array.from({ length: 20_000 }, () => `@s${word(2)}/${word(8)}`),
      ...Array.from({ length: 40 }, () => `@t-${word(8)}`),
      ...Array.from({ length: 300 }, () => `@t3${word(5)}`),
      ...Array.from({ length: 300 }, () => `${word(7)}`),
    ]),
  ]);
  const data = dataOf(keys);
  const t = keys.findIndex((k) => k.startsWith("@sx"));
  const source = new MemorySource(data, { maxPage: 200 });
  const asked: string[] = [];
  const recording = listingWith(source, {
    list: (o) => {
      asked.push(`${o.descending ? "down" : "up"} ${o.start} ${o.limit}`);
      return source.list(o);
    },
  });
  const found = await new BoundarySearch(recording, [t], {
    maxPage: 200,
    points: [
      { key: keys[0], rank: 0, real: true },
      { key: keys.at(-1)!, rank: keys.length - 1, real: true },
    ],
    concurrency: 1,
  }).run();
  assert.deepEqual(found, [keys[t]]);
  // Probes that land just below the top are each followed by a read down from there.
  const stalls = asked.filter((a, i) => a.startsWith("up") && asked[i + 1]?.startsWith("down"));
  assert.ok(stalls.length >= 1, asked.join("; "));
  // Probes alone took 17 requests here, stalling again and again above the crowd.
  assert.ok(asked.length <= 10, `${asked.length} requests: ${asked.join("; ")}`);
});

Deno.test("nextStep: the Illinois memory pulls probes towards the end that keeps surviving", () => {
  const o = { ...tuning, alphabet: new Alphabet("abcdefghijklmnopqrstuvwxyz".split("")) };
  const p = pointsOf(["a", 0, true], ["z", 1_000_000, true]);
  const key = (m: ProbeMemory) => {
    const s = nextStep(500_000, p, m, o);
    assert.equal(s.kind, "probe");
    return s.kind === "probe" ? s.key : "";
  };
  const plain = key(fresh());
  assert.ok(
    compareKeys(key({ high: 4, low: 0 }), plain) < 0,
    "probes kept landing high: aim lower",
  );
  assert.ok(compareKeys(key({ high: 0, low: 4 }), plain) > 0, "kept landing low: aim higher");
});

Deno.test("boundary search: exact keys for every target, each distinct request made once", async () => {
  const data = dataOf(randomKeys(20_000, "abcdefgh-".split(""), 9, 8));
  const source = new MemorySource(data, { maxPage: 100 });
  const targets = [1, 777, 5000, 5001, 19_998];
  const keys = await new BoundarySearch(source, targets, {
    maxPage: 100,
    points: [{ key: "", rank: 0, real: false }, {
      key: data.keys.at(-1)!,
      rank: data.size - 1,
      real: true,
    }],
    concurrency: 4,
  }).run();
  assert.deepEqual(keys, targets.map((t) => data.keys[t]));
  assert.ok(source.requests < 20 * targets.length, `${source.requests} requests`);
});

Deno.test("boundary search: the name-character prior finds a scoped half the first page never shows", async () => {
  // npm's shape: the first page is all digits, half of the names are `@` scopes.
  const names = randomKeys(20_000, "abcdefghij".split(""), 8, 6).map((k) => `${k}-x`);
  const keys = sortKeys([
    ...names.slice(0, 10_000).map((k) => `@${k.slice(0, 2)}/${k}`),
    ...names.slice(10_000, 19_000),
    ...names.slice(19_000).map((k, i) => `${i % 10}${k}`),
  ]);
  const data = dataOf(keys);
  const targets = Array.from({ length: 19 }, (_, i) => Math.floor((i + 1) * data.size / 20));
  const run = async (priorChars?: string) => {
    const source = new MemorySource(data, { maxPage: 100 });
    const first = await source.list({ limit: 100 });
    assert.ok(first.rows.every((r) => /^\d/.test(r.id)), "the first page shows no scope");
    const found = await new BoundarySearch(source, targets, {
      maxPage: 100,
      pages: [{ start: null, page: first }],
      points: [{ key: data.keys.at(-1)!, rank: data.size - 1, real: true }],
      concurrency: 1,
      priorChars,
    }).run();
    assert.deepEqual(found, targets.map((t) => data.keys[t]));
    return source.requests;
  };
  // Without the prior, probes cannot aim at `@…`: they stall above the scopes, and reads down
  // from there find them, a page at a time.
  const without = await run("");
  const withPrior = await run();
  assert.ok(withPrior < without, `with the prior ${withPrior} requests, without ${without}`);
});

Deno.test("boundary search: searches start level by level of the spread order, aimed from the coarser ones' answers", async () => {
  // Where brackets start wide (over 10 pages of 100): the middle target alone, then its next step
  // and the quarters' first (2), not all 7 first probes at once from the whole key space. Where
  // they do not, all start at once.
  assert.deepEqual((await waves(10)).slice(0, 2), [1, 3]);
  assert.equal((await waves(1000))[0], 7);
});

/** The requests of each round trip of a search for 7 targets among 20,000 keys. */
async function waves(wide: number): Promise<number[]> {
  const data = dataOf(randomKeys(20_000, "abcdefgh-".split(""), 11, 8));
  const source = new MemorySource(data, { maxPage: 100 });
  // Answers are held until the test lets the whole wave in flight through, as when a registry far
  // away answers every request of a round trip together.
  let held: (() => void)[] = [];
  const gated = listingWith(source, {
    list: async (o) => {
      await new Promise<void>((resolve) => held.push(resolve));
      return source.list(o);
    },
  });
  const targets = Array.from({ length: 7 }, (_, i) => (i + 1) * 2500);
  let done = false;
  const running = new BoundarySearch(gated, targets, {
    maxPage: 100,
    points: [{ key: "", rank: 0, real: false }, {
      key: data.keys.at(-1)!,
      rank: data.size - 1,
      real: true,
    }],
    concurrency: 8,
    widePageSpan: wide,
  }).run().finally(() => done = true);
  const sizes: number[] = [];
  while (!done) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    if (held.length) sizes.push(held.length);
    const wave = held;
    held = [];
    wave.forEach((release) => release());
  }
  assert.deepEqual(await running, targets.map((t) => data.keys[t]));
  return sizes;
}
