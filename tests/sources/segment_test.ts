import assert from "node:assert/strict";
import { MIN_PARTIAL_ROWS, segmentAnswer, segmentOf } from "../../lib/sources/cache/mod.ts";
import { remainsOf } from "../../lib/sources/cache/segment.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import type { ListOptions, Page } from "../../lib/plan/source.ts";
import { dataOf, randomKeys } from "../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");

/** The registry's answer to `request` with its limit cut to the page's own, when it has one. */
async function expected(source: MemorySource, request: ListOptions, got: Page): Promise<Page> {
  return await source.list(got.limit === undefined ? request : { ...request, limit: got.limit });
}

Deno.test("segments: an answer from a listing without an end is the registry's own, capped or not", async () => {
  const data = dataOf(randomKeys(3000, ASCII, 5, 6));
  const keys = data.keys;
  const counts = { told: 0, ended: 0, short: 0, cut: 0, untold: 0 };
  for (const silentCap of [undefined, 60]) {
    const source = new MemorySource(data, { maxPage: 10_000, silentCap });
    for (const [s, limit] of [[0, 50], [700, 200], [2950, 80], [1234, 1]] as const) {
      const start = keys[s];
      const early = await source.list({ start, limit });
      const segment = segmentOf({ start, limit }, early, { atMs: 0 })!;
      for (let e = s; e <= Math.min(keys.length, s + limit + 30); e += 3) {
        for (const asked of [1, 10, limit - 1, limit, limit + 40]) {
          if (asked < 1) continue;
          const end = e < keys.length ? keys[e] : null;
          const request: ListOptions = { start, end, limit: asked };
          const answer = segmentAnswer(segment, request);
          if (!answer) {
            counts.untold++;
            // Untold only when the listing ran out below both the end and the limit, full, with
            // too few rows to be a smaller answer.
            assert.equal(early.rows.length, limit);
            assert.ok(limit < MIN_PARTIAL_ROWS);
            assert.ok(asked > limit && (end === null || early.rows.every((r) => r.id < end)));
            continue;
          }
          counts.told++;
          const real = await expected(source, request, answer);
          assert.deepEqual(answer.rows.map((r) => r.id), real.rows.map((r) => r.id));
          assert.equal(answer.offset, real.offset);
          assert.equal(answer.total, real.total);
          if (answer.ended) {
            counts.ended++;
            // Nothing of the range lies beyond what was told.
            const all = await new MemorySource(data, { maxPage: 10_000 }).list({
              start,
              end,
              limit: 10_000,
            });
            assert.equal(all.rows.length, answer.rows.length);
          } else if (answer.limit !== undefined) {
            counts.cut++;
            assert.ok(answer.limit < asked && answer.rows.length === answer.limit);
          } else if (answer.rows.length < asked) {
            // Short as the registry's own answer is: its end, or its cap.
            counts.short++;
            assert.equal(real.rows.length, answer.rows.length);
          }
        }
      }
    }
  }
  const { told, ended, untold, short, cut } = counts;
  assert.ok(told > 100 && ended > 20 && untold > 5, JSON.stringify(counts));
  assert.ok(short > 5 && cut > 5, JSON.stringify(counts));
});

Deno.test("segments: an answer from a read, up or down, is the registry's own answer", async () => {
  const data = dataOf(randomKeys(3000, ASCII, 11, 6));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const keys = data.keys;
  const counts = { full: 0, ended: 0, cut: 0, toEnd: 0, none: 0 };
  const reads: [ListOptions, number][] = [
    [{ start: keys[100], limit: 300 }, 100],
    [{ start: keys[900] + "-", limit: 200 }, 901],
    [{ start: keys[2000], limit: 400, descending: true }, 1601],
    [{ start: keys[2900], limit: 500 }, 2900], // to the registry's end
    [{ start: null, limit: 50 }, 0],
  ];
  for (const [read, first] of reads) {
    const segment = segmentOf(read, await source.list(read), { atMs: 0 })!;
    assert.equal(segment.rows[0].id, keys[first]);
    assert.equal(segment.offset, first);
    assert.equal(segment.short, segment.rows.length < (read.limit ?? 0) && !read.descending);
    const last = first + segment.rows.length - 1;
    assert.equal(segment.toEnd, last === keys.length - 1);
    for (let s = Math.max(0, first - 2); s <= Math.min(keys.length - 1, last + 2); s += 7) {
      for (const e of [s + 1, s + 5, s + 60, s + 700, null]) {
        for (const limit of [1, 4, 50, 1000]) {
          const end = e === null || e >= keys.length ? null : keys[e];
          const request = { start: keys[s], end, limit };
          const told = segmentAnswer(segment, request);
          if (!told) {
            counts.none++;
            // Untold only outside the read, or with fewer than three rows left in it.
            const inside = s >= first && s <= last;
            assert.ok(!inside || last - s + 1 < 3, `${s} in ${first}..${last}`);
            continue;
          }
          const real = await expected(source, request, told);
          assert.deepEqual(told.rows.map((r) => r.id), real.rows.map((r) => r.id));
          assert.deepEqual(told.rows.map((r) => r.rev), real.rows.map((r) => r.rev));
          assert.equal(told.offset, real.offset);
          assert.equal(told.total, real.total);
          if (told.ended) {
            counts.ended++;
            const all = await source.list({ ...request, limit: 10_000 });
            assert.equal(all.rows.length, told.rows.length);
          } else if (told.limit !== undefined) {
            counts.cut++;
            assert.ok(told.limit < limit && told.rows.length === told.limit);
          } else if (told.rows.length < limit) {
            counts.toEnd++;
            assert.equal(told.offset + told.rows.length, told.total);
          } else counts.full++;
        }
      }
    }
  }
  for (const [k, n] of Object.entries(counts)) assert.ok(n > 10, `${k}: ${n}`);
  // Answers that cannot speak for a span make no segment.
  const page = await source.list({ start: keys[5], limit: 3 });
  assert.equal(segmentOf({ start: keys[5], limit: 3, skip: 2 }, page, { atMs: 0 }), null);
  assert.equal(segmentOf({ start: keys[5], limit: 3, updateSeq: true }, page, { atMs: 0 }), null);
  assert.equal(
    segmentOf({ start: "~", limit: 3 }, await source.list({ start: "~", limit: 3 }), { atMs: 0 }),
    null,
  );
});

Deno.test("segments: what is left once rows were handed out still tells the registry's answers", async () => {
  const data = dataOf(randomKeys(500, ASCII, 15, 6));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const keys = data.keys;
  const read = { start: keys[100], limit: 100 };
  const segment = segmentOf(read, await source.list(read), { atMs: 0 })!;
  // Rows 120-159 handed out: 100-119 stay (a lower range's), and 159 on (the taker's next start).
  const [below, above] = remainsOf(segment, { from: 20, to: 59 });
  assert.deepEqual(below.rows.map((r) => r.id), keys.slice(100, 120));
  assert.equal(below.from, keys[100]);
  assert.deepEqual(above.rows.map((r) => r.id), keys.slice(159, 200));
  assert.deepEqual([above.from, above.offset], [keys[159], 159]);
  for (const part of [below, above]) {
    for (const [s, limit] of [[part.offset, 5], [part.offset + 3, 1000]]) {
      const request = { start: keys[s], limit };
      const told = segmentAnswer(part, request)!;
      const real = await expected(source, request, told);
      assert.deepEqual(told.rows.map((r) => r.id), real.rows.map((r) => r.id));
      assert.equal(told.offset, real.offset);
    }
  }
  // Too few rows left to tell anything: nothing is kept of that side.
  assert.deepEqual(remainsOf(segment, { from: 2, to: 98 }).map((s) => s.rows.length), []);
  assert.deepEqual(remainsOf(segment, { from: 0, to: 50 }).map((s) => s.offset), [150]);
});
