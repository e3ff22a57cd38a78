/**
 * Ranges proven a part at a time (`range_parts.ts`): when a range is cut, how undecided parts are
 * cut again, what a part that disagrees makes of its range, and the bounds. The store and the
 * registry here are sorted key lists (`cutStored` and `checkRanges` have their own tests).
 */
import assert from "node:assert/strict";
import { type PartsCheck, RangeParts } from "../../../lib/engine/verify/_range_parts.ts";
import type { RangeToCheck, RangeVerdict } from "../../../lib/engine/verify/_verdicts.ts";
import type { StoredPart } from "../../../lib/engine/items/stored_parts.ts";
import type { ShardRecord } from "../../../lib/engine/store/mod.ts";
import { compareKeys, lowerBound } from "../../../lib/plan/keys.ts";

const KEYS = Array.from({ length: 1000 }, (_, i) => `k${String(i).padStart(4, "0")}`);

function shard(id: number, start: string | null, end: string | null, items: number): ShardRecord {
  return {
    id,
    start,
    end,
    cursor: end,
    after: false,
    done: true,
    items,
    pages: 1,
    docs: 0,
    docErrors: 0,
    tooLarge: 0,
    expected: items,
    startedAt: 0,
    updatedAt: 0,
    lease: null,
  } as ShardRecord;
}

/** The keys of sorted `keys` in `[start, end)`. */
function within(keys: readonly string[], r: { start: string | null; end: string | null }) {
  const from = r.start === null ? 0 : lowerBound(keys, r.start);
  return keys.slice(from, r.end === null ? keys.length : lowerBound(keys, r.end));
}

/** Cuts over `stored` keys, as `cutStored` does (cuts at every k·n/parts-th key). */
function cutOver(stored: readonly string[]): PartsCheck["cut"] {
  return (range, o) => {
    const keys = within(stored, range);
    const parts = Math.max(1, Math.min(o.parts ?? 1, keys.length || 1));
    const out: StoredPart[] = [];
    let from = 0;
    for (let k = 1; k <= parts; k++) {
      const to = k === parts ? keys.length : Math.round(keys.length * k / parts);
      out.push({
        start: k === 1 ? range.start : keys[from],
        end: k === parts ? range.end : keys[to],
        stored: to - from,
      });
      from = to;
    }
    return Promise.resolve(out);
  };
}

/** A registry holding `listed`, where every check sees a change at each key of `busy`. */
function registry(listed: readonly string[], busy: () => Set<string>): PartsCheck["check"] {
  return (ranges: RangeToCheck[]) => {
    const changed = [...busy()].sort(compareKeys);
    return Promise.resolve(ranges.map((r): RangeVerdict => {
      const span = within(listed, r).length;
      const margin = within(changed, r).length;
      const base = { id: r.id, span, stored: r.stored, margin };
      if (Math.abs(span - r.stored) > margin) return { ...base, verdict: "mismatch", why: "off" };
      if (margin > 0) return { ...base, verdict: "undecided" };
      return { ...base, verdict: span === r.stored ? "equal" : "mismatch", why: "off" };
    }));
  };
}

Deno.test("range parts: a range undecided twice is cut; busy parts are cut again until each is proven", async () => {
  const parts = new RangeParts();
  const s = shard(0, null, null, KEYS.length);
  parts.noteUndecided(s, 5, KEYS.length);
  assert.equal(parts.has(0), false, "once is not enough");
  parts.noteUndecided(s, 5, KEYS.length);
  assert.equal(parts.has(0), true);
  // A change lands at k0500 in every check, and at k0123 in the first two.
  let round = 0;
  const busy = () => new Set(round < 2 ? ["k0500", "k0123"] : ["k0500"]);
  const deps = { cut: cutOver(KEYS), check: registry(KEYS, busy), stored: () => KEYS.length };
  const sizes: number[] = [];
  let v: RangeVerdict | undefined;
  for (; round < 12; round++) {
    [v] = await parts.check([s], deps);
    sizes.push(parts.size);
    if (v.verdict !== "undecided") break;
  }
  // 4 x 5 changes = 20 parts, 18 proven; the two busy ones cut in 8 (4 x 2 changes), ...
  assert.deepEqual(sizes.slice(0, 3), [2, 2, 1]);
  // The part holding k0500 ends as one key that keeps changing: it cannot be cut further.
  assert.equal(v!.verdict, "undecided");
  assert.ok(sizes.at(-1)! === 1);
  // Once k0500 holds still, the range is proven.
  const still = { ...deps, check: registry(KEYS, () => new Set()) };
  assert.deepEqual((await parts.check([s], still))[0].verdict, "equal");
  assert.equal(parts.has(0), false);
  assert.ok(parts.provenParts >= 19);
});

Deno.test("range parts: a part that disagrees makes its range a mismatch, with the part named", async () => {
  const parts = new RangeParts();
  const s = shard(3, "k0100", "k0900", 800);
  const stored = KEYS.slice(100, 900);
  const listed = stored.filter((k) => k !== "k0700" && k !== "k0701"); // two rows lost
  parts.noteUndecided(s, 3, 800);
  parts.noteUndecided(s, 3, 800);
  const busy = () => new Set(["k0150"]);
  const [v] = await parts.check([s], {
    cut: cutOver(stored),
    check: registry(listed, busy),
    stored: () => 800,
  });
  assert.equal(v.verdict, "mismatch");
  assert.equal(v.stored, 800);
  assert.equal(v.span, 798, "the range's count, from the part's");
  assert.match(v.why!, /"k0\d+" → "k0\d+", checked as a part, holds \d+ and the registry lists/);
  assert.equal(parts.has(3), false, "listed again as a whole");
});

Deno.test("range parts: items that disagree with the counters are a mismatch; a range that cannot be cut stays whole", async () => {
  const parts = new RangeParts();
  const a = shard(0, null, "k0500", 501); // the counters say one more than the store holds
  const b = shard(1, "k0500", null, 500);
  for (const s of [a, b]) parts.noteUndecided(s, 2, 500), parts.noteUndecided(s, 2, 500);
  const deps: PartsCheck = {
    cut: (range, o) => range.start === "k0500" ? Promise.resolve(null) : cutOver(KEYS)(range, o),
    check: registry(KEYS, () => new Set()),
    stored: (s) => s.items,
  };
  const [va, vb] = await parts.check([a, b], deps);
  assert.equal(va.verdict, "mismatch");
  assert.match(va.why!, /counted one by one are 500, not 501/);
  assert.equal(vb.verdict, "undecided");
  assert.equal(parts.has(1), false);
  parts.noteUndecided(b, 2, 500);
  parts.noteUndecided(b, 2, 500);
  assert.equal(parts.has(1), false, "not cut again in this pass");
});

Deno.test("range parts: parts stay within 256 a range and 4,096 a pass", async () => {
  const many = Array.from({ length: 40_000 }, (_, i) => `m${String(i).padStart(6, "0")}`);
  const parts = new RangeParts();
  const shards = Array.from(
    { length: 20 },
    (_, i) =>
      shard(i, i === 0 ? null : many[i * 2000], i === 19 ? null : many[(i + 1) * 2000], 2000),
  );
  // A change at every third key in every check: no part ever holds still.
  const busy = new Set(many.filter((_, i) => i % 3 === 0));
  let largest = 0;
  const deps: PartsCheck = {
    cut: cutOver(many),
    check: (ranges) => {
      largest = Math.max(largest, ranges.length);
      return registry(many, () => busy)(ranges);
    },
    stored: () => 2000,
  };
  for (const s of shards) parts.noteUndecided(s, 1000, 2000), parts.noteUndecided(s, 1000, 2000);
  for (let round = 0; round < 6; round++) {
    // One range at a time: each call checks that range's parts only.
    for (const s of shards.filter((s) => parts.has(s.id))) {
      const [v] = await parts.check([s], deps);
      assert.equal(v.verdict, "undecided");
      assert.ok(parts.size <= 4096, `${parts.size} parts`);
    }
  }
  assert.ok(largest <= 256, `${largest} parts in one range`);
  assert.ok(largest >= 200, "ranges were cut up to their bound");
  assert.ok(parts.size >= 4000, `the pass's bound is reached (${parts.size})`);
});
