import assert from "node:assert/strict";
import { answerFrom, EarlyPages } from "../lib/engine/page/early_pages.ts";
import { docMemoryBytes } from "../lib/engine/page/doc_memory.ts";
import { rowsPerPage } from "../lib/engine/page/page_listing.ts";
import { checkCompletion } from "../lib/engine/verify/completion.ts";
import { openCrawl } from "../lib/engine/crawl/lifecycle.ts";
import { getCrawl, listShards } from "../lib/engine/store/mod.ts";
import { MemorySource } from "../lib/sources/memory_source.ts";
import type { ListOptions, Page } from "../lib/plan/source.ts";
import { finishAll, RecordingDispatcher, runOne, spec } from "./engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "./helpers.ts";
import { FakeClock, JumpingClock } from "./fake_clock.ts";

const ASCII = "abcdefghijklmnop-".split("");

Deno.test("early pages: an answer is told from an earlier listing only where it is exact", async () => {
  const data = dataOf(randomKeys(3000, ASCII, 5, 6));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const keys = data.keys;
  let told = 0;
  let ended = 0;
  let untold = 0;
  for (const [s, limit] of [[0, 50], [700, 200], [2950, 80], [1234, 1]] as const) {
    const start = keys[s];
    const early = await source.list({ start, limit });
    for (let e = s; e <= Math.min(keys.length, s + limit + 30); e += 3) {
      for (const asked of [1, 10, limit - 1, limit, limit + 40]) {
        if (asked < 1) continue;
        const end = e < keys.length ? keys[e] : null;
        const request: ListOptions = { start, end, limit: asked };
        const answer = answerFrom(early, limit, request);
        if (!answer) {
          untold++;
          // Untold only when the early page ran out below both the end and the limit.
          assert.equal(early.rows.length, limit);
          assert.ok(asked > limit && (end === null || early.rows.every((r) => r.id < end)));
          continue;
        }
        told++;
        const real = await source.list(request);
        assert.deepEqual(answer.rows.map((r) => r.id), real.rows.map((r) => r.id));
        assert.equal(answer.offset, real.offset);
        assert.equal(answer.total, real.total);
        if (answer.ended) {
          ended++;
          // Nothing of the range lies beyond what was told.
          const all = await source.list({ start, end, limit: 10_000 });
          assert.equal(all.rows.length, answer.rows.length);
        }
      }
    }
  }
  assert.ok(told > 100 && ended > 20 && untold > 5, `${told} told, ${ended} ended, ${untold}`);
});

Deno.test("early pages: bounded in rows and in flight, chained, used once, dropped when stale; a failure asks again", async () => {
  const data = dataOf(randomKeys(500, ASCII, 6, 5));
  let listed = 0;
  const source = wrapSource(new MemorySource(data), {
    list: (o) => (listed++, new MemorySource(data).list(o)),
  });
  const clock = new FakeClock();
  const early = new EarlyPages({ maxRows: 25, ttlMs: 1000, clock });
  early.list(source, "c", { start: null, limit: 10, pages: 4 });
  await early.settled();
  // Two pages of 10 fit in 25 rows; the third would not.
  assert.equal(listed, 2);
  assert.equal(early.heldRows, 20);
  const first = await early.take("c", { start: null, end: data.keys[5], limit: 3 });
  assert.deepEqual(first?.rows.map((r) => r.id), data.keys.slice(0, 3));
  assert.equal(await early.take("c", { start: null, limit: 3 }), undefined, "used once");
  // The chain's second page starts at the first page's last row, as the shard's next page does.
  const second = await early.take("c", { start: data.keys[9], end: null, limit: 10 });
  assert.deepEqual(second?.rows.map((r) => r.id), data.keys.slice(9, 19));
  assert.equal(early.heldRows, 0);
  // A chain stops where `stop` says the shard's end was passed.
  listed = 0;
  early.list(source, "d", { start: null, limit: 10, pages: 2, stop: () => true });
  await early.settled();
  assert.equal(listed, 1);
  // Stale entries are dropped at the next use, and their rows count no more.
  await clock.advance(1001);
  assert.equal(await early.take("d", { start: null, limit: 5 }), undefined);
  assert.equal(early.heldRows, 0);
  // Documents, descending listings and other crawls are never answered early.
  early.list(source, "e", { start: null, limit: 10, pages: 1 });
  assert.equal(await early.take("e", { start: null, limit: 5, includeDocs: true }), undefined);
  assert.equal(await early.take("f", { start: null, limit: 5 }), undefined);
  early.drop("e");
  assert.equal(early.heldRows, 0);
  // At most `maxInFlight` listings at once; one still waiting for a slot when its shard asks is
  // withdrawn, never sent.
  let release = () => {};
  const held = new Promise<void>((r) => release = r);
  let sent = 0;
  const gated = wrapSource(source, {
    list: async (o) => (sent++, await held, new MemorySource(data).list(o)),
  });
  const one = new EarlyPages({ maxInFlight: 1 });
  one.list(gated, "h", { start: null, limit: 10, pages: 1 });
  one.list(gated, "h", { start: data.keys[100], limit: 10, pages: 1 });
  assert.equal(sent, 1);
  assert.equal(await one.take("h", { start: data.keys[100], limit: 5 }), undefined);
  release();
  assert.equal((await one.take("h", { start: null, limit: 5 }))?.rows.length, 5);
  await one.settled();
  assert.equal(sent, 1, "the withdrawn listing was never sent");
  assert.equal(one.heldRows, 0);
  // A listing that failed leaves the shard to ask for itself.
  const broken = wrapSource(source, { list: () => Promise.reject(new Error("down")) });
  early.list(broken, "g", { start: null, limit: 10, pages: 1 });
  assert.equal(await early.take("g", { start: null, limit: 5 }), undefined);
  assert.equal(early.heldRows, 0);
});

Deno.test("early pages: pages a chain listed past a start found later are dropped when it is told", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(500, ASCII, 12, 5));
  const source = new MemorySource(data);
  const { crawl } = await openCrawl(
    { kv, source, dispatcher: new RecordingDispatcher() },
    spec({ shards: 4, maxPage: 50 }),
    { id: "p", maxPlanAttempts: 1 },
  );
  const early = new EarlyPages();
  const tell = early.starts(source, crawl);
  const limit = rowsPerPage(crawl, source) + 1;
  tell(null); // the first shard's start: its chain lists on while the next start is unknown
  await early.settled();
  assert.equal(early.heldRows, 4 * limit);
  const pageStarts = [1, 2, 3].map((i) => data.keys[i * (limit - 1)]);
  // The next shard starts inside the chain's third page: that page and the fourth begin where no
  // shard's request does. The second page is the first shard's own next page.
  tell(data.keys[2 * (limit - 1) - 5]);
  assert.equal(early.heldRows, 2 * limit);
  assert.equal(await early.take("p", { start: pageStarts[1], limit: 5 }), undefined);
  const second = await early.take("p", { start: pageStarts[0], end: data.keys[90], limit: 10 });
  assert.deepEqual(second?.rows.map((r) => r.id), data.keys.slice(limit - 1, limit + 9));
});

/** A crawl of `data` planned with `early`: the requests and the rows the registry served. */
async function plannedCrawl(data: ReturnType<typeof dataOf>, early: EarlyPages) {
  using kv = await Deno.openKv(":memory:");
  const inner = new MemorySource(data, { maxPage: 10_000 });
  const requests: ListOptions[] = [];
  let served = 0;
  const source = wrapSource(inner, {
    list: async (o): Promise<Page> => {
      requests.push(o);
      const page = await inner.list(o);
      served += page.rows.length;
      return page;
    },
  });
  const s = spec({ shards: 6, maxPage: 10_000 });
  const { crawl } = await openCrawl(
    { kv, source, dispatcher: new RecordingDispatcher(), earlyPages: early },
    s,
    { id: "e", maxPlanAttempts: 1 },
  );
  assert.equal(crawl.status, "running");
  await finishAll(kv, source, crawl.id, { deps: { earlyPages: early } });
  assert.equal(await checkCompletion(kv, crawl.id, { openSource: () => source }), true);
  await assertCrawledExactly(kv, crawl.id, data.keys, { partition: true });
  const limit = rowsPerPage((await getCrawl(kv, crawl.id)).value!, inner) + 1;
  const shards = (await listShards(kv, crawl.id)).map((e) => e.value);
  return { requests, served, limit, shards };
}

Deno.test("early pages: a crawl planned with them lists each shard's first rows once, exact", async () => {
  const data = dataOf(randomKeys(6000, ASCII, 7, 7));
  const early = new EarlyPages();
  const { requests, served, limit, shards } = await plannedCrawl(data, early);
  for (const shard of shards) {
    const fromStart = requests.filter((r) => (r.start ?? null) === shard.start && !r.descending);
    // Listed early (no end, the shard's page size) at most once (not where a read of the planner
    // holds its start), and not asked again by the shard itself.
    assert.ok(fromStart.filter((r) => r.limit === limit && r.end == null).length <= 1);
    assert.equal(fromStart.filter((r) => r.end !== undefined).length, 0, `shard ${shard.id}`);
  }
  assert.equal(early.heldRows, 0, "every early page was used");
  // The planner's reads were not listed again: fewer rows served than with none of them kept.
  const without = await plannedCrawl(data, new EarlyPages({ maxPlanRows: 0 }));
  assert.ok(served < without.served, `${served} rows against ${without.served}`);
});

Deno.test("sentinel: a shard ends with the page that reaches past its end, no empty answer", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(4000, ASCII, 8, 7));
  const inner = new MemorySource(data, { maxPage: 700 });
  let empty = 0;
  const source = wrapSource(inner, {
    list: async (o) => {
      const page = await inner.list(o);
      if (page.rows.length === 0) empty++;
      return page;
    },
  });
  const { crawl } = await openCrawl(
    { kv, source, dispatcher: new RecordingDispatcher() },
    spec({ shards: 5, maxPage: 700 }),
    { id: "s", maxPlanAttempts: 1 },
  );
  await finishAll(kv, source, crawl.id);
  assert.equal(empty, 0);
  for (const { value: shard } of await listShards(kv, crawl.id)) {
    // 800 items a shard, 698 a page: two pages each, the second proving the end.
    assert.equal(shard.pages, 2, `shard ${shard.id}: ${JSON.stringify(shard)}`);
  }
  assert.equal(await checkCompletion(kv, crawl.id, { openSource: () => source }), true);
  await assertCrawledExactly(kv, crawl.id, data.keys);
});

Deno.test("final check: a registry that held still is proven in one round, without its window", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, ASCII, 9, 7));
  const inner = new MemorySource(data, { maxPage: 1000 });
  const { crawl } = await openCrawl(
    { kv, source: inner, dispatcher: new RecordingDispatcher() },
    spec({ shards: 4, maxPage: 1000 }),
    { id: "f", maxPlanAttempts: 1 },
  );
  // Shards run by hand: the final check below is the crawl's first.
  for (const e of await listShards(kv, crawl.id)) {
    assert.equal((await runOne(kv, inner, crawl.id, e.value.id)).kind, "done");
  }
  // Each shard was held against the ranks at its end, but those that end the crawl (with at
  // most a quarter of the shards still running beside them): the final check follows.
  const verified = (await listShards(kv, crawl.id)).map((e) => e.value.verified ?? null);
  assert.deepEqual(verified, ["exact", "exact", null, null]);
  let seqReads = 0;
  let changeReads = 0;
  const clock = new JumpingClock(Date.now());
  const source = wrapSource(inner, {
    updateSeq: () => (seqReads++, inner.updateSeq()),
    changes: (since, limit) => (changeReads++, inner.changes(since, limit)),
  });
  const done = await checkCompletion(kv, crawl.id, {
    openSource: () => source,
    clock,
  });
  const sleeps = clock.slept.length;
  assert.equal(done, true);
  // Every rank computed at the store's sequence: neither the feed's end nor a window is read, no
  // change, no second round.
  assert.deepEqual({ seqReads, changeReads, sleeps }, { seqReads: 0, changeReads: 0, sleeps: 0 });
  // Every range is marked proven, the last shard's too.
  const after = (await listShards(kv, crawl.id)).map((e) => e.value.verified ?? null);
  assert.deepEqual(after, ["exact", "exact", "exact", "exact"]);
  await assertCrawledExactly(kv, crawl.id, data.keys);
});

Deno.test("early pages: with documents only where the listing carries them, within their bytes", async () => {
  for (const docMode of ["include_docs", "get"] as const) {
    using kv = await Deno.openKv(":memory:");
    const data = dataOf(randomKeys(3000, ASCII, 10, 7));
    const inner = new MemorySource(data, { maxPage: 10_000, docMode });
    const requests: ListOptions[] = [];
    const source = wrapSource(inner, {
      list: (o): Promise<Page> => (requests.push(o), inner.list(o)),
    });
    const early = new EarlyPages();
    const { crawl } = await openCrawl(
      { kv, source, dispatcher: new RecordingDispatcher(), earlyPages: early },
      spec({ shards: 4, maxPage: 10_000, docs: true }),
      { id: "d", maxPlanAttempts: 1 },
    );
    await finishAll(kv, source, crawl.id, { deps: { earlyPages: early } });
    assert.equal(await checkCompletion(kv, crawl.id, { openSource: () => source }), true);
    await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
    const earlyDocs = requests.filter((r) => r.includeDocs && r.end == null && !r.descending);
    if (docMode === "get") assert.equal(earlyDocs.length, 0, "no early pages by id");
    else {
      // Each shard's first page came with its documents, listed early and not asked again.
      for (const { value: shard } of await listShards(kv, crawl.id)) {
        const fromStart = requests.filter((r) =>
          (r.start ?? null) === shard.start && r.includeDocs
        );
        assert.equal(fromStart.length, 1, `shard ${shard.id}: ${JSON.stringify(fromStart)}`);
        assert.equal(fromStart[0].end ?? null, null);
      }
    }
    assert.equal(early.heldRows, 0);
    assert.equal(early.heldDocBytes, 0);
  }
  // Documents beyond the byte budget are dropped as they arrive: never held.
  const data = dataOf(randomKeys(200, ASCII, 11, 5));
  const source = new MemorySource(data, { docMode: "include_docs" });
  const five = await source.list({ start: data.keys[100], limit: 5, includeDocs: true });
  const budget = five.rows.reduce(
    (n, r) => n + (r.doc?.kind === "doc" ? docMemoryBytes(r.doc.json) : 0),
    0,
  );
  const small = new EarlyPages({ maxDocBytes: budget });
  small.list(source, "x", { start: null, limit: 50, pages: 1, includeDocs: true });
  small.list(source, "x", { start: data.keys[100], limit: 5, pages: 1, includeDocs: true });
  await small.settled();
  assert.ok(small.heldDocBytes <= budget, `${small.heldDocBytes} bytes held`);
  assert.equal(await small.take("x", { start: null, limit: 10, includeDocs: true }), undefined);
  const kept = await small.take("x", { start: data.keys[100], limit: 3, includeDocs: true });
  assert.equal(kept?.rows.length, 3);
  assert.ok(kept?.rows.every((r) => r.doc?.kind === "doc"));
  assert.equal(small.heldDocBytes, 0);
});
