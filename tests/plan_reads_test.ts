import assert from "node:assert/strict";
import { PlanReads, segmentAnswer, segmentOf } from "../lib/engine/page/_plan_reads.ts";
import { EarlyPages } from "../lib/engine/page/early_pages.ts";
import { checkCompletion } from "../lib/engine/verify/completion.ts";
import { openCrawl } from "../lib/engine/crawl/lifecycle.ts";
import { crawlStatus } from "../lib/engine/crawl/status.ts";
import { finishAll, RecordingDispatcher, spec } from "./engine_helpers.ts";
import { MemorySource } from "../lib/sources/memory_source.ts";
import type { ListOptions, Page } from "../lib/plan/source.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "./helpers.ts";
import { FakeClock } from "./fake_clock.ts";

const ASCII = "abcdefghijklmnop-".split("");

/** The registry's answer to `request` with its limit cut to the page's own, when it has one. */
async function expected(source: MemorySource, request: ListOptions, got: Page): Promise<Page> {
  return await source.list(got.limit === undefined ? request : { ...request, limit: got.limit });
}

Deno.test("plan reads: an answer from a read, up or down, is the registry's own answer", async () => {
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
    const segment = segmentOf(read, await source.list(read), 0)!;
    assert.equal(segment.rows[0].id, keys[first]);
    assert.equal(segment.offset, first);
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
  // Reads that cannot speak for a span are not kept.
  const page = await source.list({ start: keys[5], limit: 3 });
  assert.equal(segmentOf({ start: keys[5], limit: 3, includeDocs: true }, page, 0), null);
  assert.equal(segmentOf({ start: keys[5], limit: 3, skip: 2 }, page, 0), null);
  assert.equal(segmentOf({ start: keys[5], limit: 3, updateSeq: true }, page, 0), null);
  assert.equal(
    segmentOf({ start: "~", limit: 3 }, await source.list({ start: "~", limit: 3 }), 0),
    null,
  );
});

Deno.test("plan reads: a request below a read is asked up to it and the read follows, while the ranks agree", async () => {
  const data = dataOf(randomKeys(2000, ASCII, 12, 6));
  const inner = new MemorySource(data, { maxPage: 10_000 });
  const asked: ListOptions[] = [];
  const source = wrapSource(inner, { list: (o) => (asked.push(o), inner.list(o)) });
  const keys = data.keys;
  const reads = new PlanReads();
  const recorder = reads.recording(source, "c");
  await recorder.list({ start: keys[500], limit: 100 });
  assert.equal(reads.heldRows, 100);
  asked.length = 0;
  // 40 rows to the read, 60 from it.
  const page = (await reads.answer("c", { start: keys[460], end: keys[1500], limit: 100 }, {
    source,
  }))!;
  assert.deepEqual(asked, [{ start: keys[460], end: keys[500], limit: 100 }]);
  assert.deepEqual(page.rows.map((r) => r.id), keys.slice(460, 560));
  assert.equal(page.limit, undefined);
  assert.equal(page.offset, 460);
  // The read ends before the limit: a full answer to a request for 140 rows.
  const cut = (await reads.answer("c", { start: keys[460], end: null, limit: 400 }, { source }))!;
  assert.deepEqual(cut.rows.map((r) => r.id), keys.slice(460, 600));
  assert.equal(cut.limit, 140);
  // The end falls inside the read: ended.
  const ended = (await reads.answer("c", { start: keys[450], end: keys[530], limit: 400 }, {
    source,
  }))!;
  assert.deepEqual(ended.rows.map((r) => r.id), keys.slice(450, 530));
  assert.equal(ended.ended, true);
  // Far below the read, the registry's full answer is the answer.
  asked.length = 0;
  const far = (await reads.answer("c", { start: keys[10], end: null, limit: 50 }, { source }))!;
  assert.deepEqual(far.rows.map((r) => r.id), keys.slice(10, 60));
  assert.deepEqual(asked, [{ start: keys[10], end: keys[500], limit: 50 }]);
  // No read ahead within the range: nothing asked, no answer.
  asked.length = 0;
  assert.equal(
    await reads.answer("c", { start: keys[700], end: null, limit: 50 }, { source }),
    undefined,
  );
  assert.equal(
    await reads.answer("c", { start: keys[10], end: keys[400], limit: 50 }, { source }),
    undefined,
  );
  assert.equal(
    await reads.answer("other", { start: keys[10], end: null, limit: 50 }, { source }),
    undefined,
  );
  assert.deepEqual(asked, []);
  // A key inserted below the read since it was read: the ranks disagree, the read is dropped and
  // the registry's rows up to it are a full answer to a request for as many rows.
  const added = keys[480] + "a";
  data.put(added);
  const after = (await reads.answer("c", { start: keys[460], end: null, limit: 100 }, { source }))!;
  assert.deepEqual(after.rows.map((r) => r.id), data.keys.slice(460, 501));
  assert.ok(after.rows.some((r) => r.id === added));
  assert.equal(after.limit, 41);
  assert.equal(reads.heldRows, 0);
});

Deno.test("plan reads: only reads sent after the start sequence, within the budget, for their time", async () => {
  const data = dataOf(randomKeys(1000, ASCII, 13, 6));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const keys = data.keys;
  const clock = new FakeClock(0);
  const reads = new PlanReads({ maxRows: 250, ttlMs: 1000, clock });
  let settle!: () => void;
  const after = new Promise<void>((r) => settle = r);
  const recorder = reads.recording(source, "c", { after });
  const before = recorder.list({ start: keys[0], limit: 100 });
  settle();
  await after;
  await before;
  assert.equal(reads.heldRows, 0, "sent before the start sequence was read");
  await recorder.list({ start: keys[100], limit: 100 });
  await recorder.list({ start: keys[300], limit: 100, descending: true });
  await recorder.list({ start: keys[600], limit: 100 }); // over the budget
  assert.equal(reads.heldRows, 200);
  assert.equal(reads.covering("c", keys[150])?.rows[0].id, keys[100]);
  assert.equal(reads.covering("c", keys[250])?.rows[0].id, keys[201]);
  assert.equal(reads.covering("c", keys[650]), undefined);
  assert.equal(recorder.requests, source.requests);
  assert.equal(recorder.capabilities, source.capabilities);
  await clock.advance(1001);
  assert.equal(reads.covering("c", keys[150]), undefined, "dropped once stale");
  assert.equal(reads.heldRows, 0);
  await recorder.list({ start: keys[100], limit: 100 });
  reads.drop("c");
  assert.equal(reads.heldRows, 0);
});

Deno.test("plan reads: a registry changing after planning is crawled exactly from reads kept before", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(6000, ASCII, 14, 7));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const early = new EarlyPages();
  const { crawl } = await openCrawl(
    { kv, source, dispatcher: new RecordingDispatcher(), earlyPages: early },
    spec({ shards: 6, maxPage: 10_000 }),
    { id: "e", maxPlanAttempts: 1 },
  );
  const held = early.reads.heldRows;
  assert.ok(held > 1000, `${held} rows kept`);
  // Changes inside and around what the planner read, before any shard lists a row.
  const keys = [...data.keys];
  for (let i = 5; i < keys.length; i += 97) {
    if (i % 3 === 0) data.delete(keys[i]);
    else if (i % 3 === 1) data.put(keys[i] + "x");
    else data.put(keys[i]);
  }
  await finishAll(kv, source, crawl.id, { deps: { earlyPages: early } });
  assert.equal(await checkCompletion(kv, crawl.id, { openSource: () => source }), true);
  await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
  assert.equal((await crawlStatus(kv, crawl.id)).verification?.status, "exact");
});
