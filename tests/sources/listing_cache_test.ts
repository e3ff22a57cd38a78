import assert from "node:assert/strict";
import { ListingCache } from "../../lib/sources/cache/mod.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { heldDocBytes, type ListOptions } from "../../lib/plan/source.ts";
import { dataOf, randomKeys, wrapSource } from "../helpers.ts";
import { FakeClock } from "../fake_clock.ts";

const ASCII = "abcdefghijklmnop-".split("");

Deno.test("listing cache: pages listed ahead are bounded in rows and in flight, chained, handed out once, dropped when stale; a failure asks again", async () => {
  const data = dataOf(randomKeys(500, ASCII, 6, 5));
  let listed = 0;
  const source = wrapSource(new MemorySource(data), {
    list: (o) => (listed++, new MemorySource(data).list(o)),
  });
  const clock = new FakeClock();
  const cache = new ListingCache({ maxRows: 25, ttlMs: 1000, clock });
  cache.prefetch(source, "c", { start: null, limit: 10, pages: 4 });
  await cache.settled();
  // Two pages of 10 fit in 25 rows; the third would not.
  assert.equal(listed, 2);
  assert.equal(cache.heldRows, 20);
  const first = await cache.take("c", { start: null, end: data.keys[5], limit: 3 });
  assert.deepEqual(first?.rows.map((r) => r.id), data.keys.slice(0, 3));
  assert.equal(await cache.take("c", { start: null, limit: 3 }), undefined, "handed out once");
  // The rows handed out leave the cache, but the last one, where the taker's next request starts.
  assert.equal(cache.heldRows, 18);
  // The chain's second page starts at the first page's last row, as the shard's next page does.
  const second = await cache.take("c", { start: data.keys[9], end: null, limit: 10 });
  assert.deepEqual(second?.rows.map((r) => r.id), data.keys.slice(9, 19));
  // Left: the first page's rows from its third on (a request from there is still told).
  assert.equal(cache.heldRows, 8);
  const rest = await cache.take("c", { start: data.keys[2], end: data.keys[8], limit: 10 });
  assert.deepEqual(rest?.rows.map((r) => r.id), data.keys.slice(2, 8));
  assert.equal(rest?.ended, true);
  assert.equal(cache.heldRows, 3, "rows past the end stay, for the range above it");
  // A chain stops where `stop` says the shard's end was passed.
  listed = 0;
  cache.prefetch(source, "d", { start: null, limit: 10, pages: 2, stop: () => true });
  await cache.settled();
  assert.equal(listed, 1);
  // Stale entries are dropped at the next use, and their rows count no more.
  await clock.advance(1001);
  assert.equal(await cache.take("d", { start: null, limit: 5 }), undefined);
  assert.equal(cache.heldRows, 0);
  // Documents, descending listings and other scopes are never answered from keys.
  cache.prefetch(source, "e", { start: null, limit: 10, pages: 1 });
  assert.equal(await cache.take("e", { start: null, limit: 5, includeDocs: true }), undefined);
  assert.equal(await cache.take("e", { start: null, limit: 5, descending: true }), undefined);
  assert.equal(await cache.take("f", { start: null, limit: 5 }), undefined);
  cache.drop("e");
  assert.equal(cache.heldRows, 0);
  await cache.settled();
  assert.equal(cache.heldRows, 0, "a page dropped in flight is not kept when it lands");
  // At most `maxInFlight` listings at once; one still waiting for a slot when its taker asks is
  // withdrawn, never sent.
  let release = () => {};
  const held = new Promise<void>((r) => release = r);
  let sent = 0;
  const gated = wrapSource(source, {
    list: async (o) => (sent++, await held, new MemorySource(data).list(o)),
  });
  const one = new ListingCache({ maxInFlight: 1 });
  one.prefetch(gated, "h", { start: null, limit: 10, pages: 1 });
  one.prefetch(gated, "h", { start: data.keys[100], limit: 10, pages: 1 });
  assert.equal(sent, 1);
  assert.equal(await one.take("h", { start: data.keys[100], limit: 5 }), undefined);
  release();
  assert.equal((await one.take("h", { start: null, limit: 5 }))?.rows.length, 5);
  await one.settled();
  assert.equal(sent, 1, "the withdrawn listing was never sent");
  assert.equal(one.heldRows, 6);
  // A listing that failed leaves the taker to ask for itself.
  const broken = wrapSource(source, { list: () => Promise.reject(new Error("down")) });
  cache.prefetch(broken, "g", { start: null, limit: 10, pages: 1 });
  assert.equal(await cache.take("g", { start: null, limit: 5 }), undefined);
  assert.equal(cache.heldRows, 0);
  // Options known later (a crawl's document mode, its start sequence) list once they are.
  let known!: (o: { start: null; limit: number; pages: number } | null) => void;
  listed = 0;
  cache.prefetch(source, "k", new Promise((r) => known = r));
  known({ start: null, limit: 10, pages: 1 });
  await cache.settled();
  assert.equal(listed, 1);
  assert.equal(cache.heldRows, 10);
});

Deno.test("listing cache: a request below a read is asked up to it and the read follows, while the ranks agree", async () => {
  const data = dataOf(randomKeys(2000, ASCII, 12, 6));
  const inner = new MemorySource(data, { maxPage: 10_000 });
  const asked: ListOptions[] = [];
  const source = wrapSource(inner, { list: (o) => (asked.push(o), inner.list(o)) });
  const keys = data.keys;
  const cache = new ListingCache();
  const recorder = cache.recording(source, "c");
  /** A fresh read of 100 rows from `keys[500]`, the only thing the cache holds. */
  const read = async () => {
    cache.drop("c");
    await recorder.list({ start: keys[500], limit: 100 });
    assert.equal(cache.heldRows, 100);
    asked.length = 0;
  };
  const answer = (request: ListOptions) => cache.take("c", request, { source, ranks: true });
  await read();
  // 40 rows to the read, 60 from it.
  const page = (await answer({ start: keys[460], end: keys[1500], limit: 100 }))!;
  assert.deepEqual(asked, [{ start: keys[460], end: keys[500], limit: 100 }]);
  assert.deepEqual(page.rows.map((r) => r.id), keys.slice(460, 560));
  assert.equal(page.limit, undefined);
  assert.equal(page.offset, 460);
  assert.equal(cache.heldRows, 41, "the read's rows handed out left, but the last");
  // The read ends before the limit: a full answer to a request for 140 rows.
  await read();
  const cut = (await answer({ start: keys[460], end: null, limit: 400 }))!;
  assert.deepEqual(cut.rows.map((r) => r.id), keys.slice(460, 600));
  assert.equal(cut.limit, 140);
  // The end falls inside the read: ended.
  await read();
  const ended = (await answer({ start: keys[450], end: keys[530], limit: 400 }))!;
  assert.deepEqual(ended.rows.map((r) => r.id), keys.slice(450, 530));
  assert.equal(ended.ended, true);
  // Far below the read, the registry's full answer is the answer.
  await read();
  const far = (await answer({ start: keys[10], end: null, limit: 50 }))!;
  assert.deepEqual(far.rows.map((r) => r.id), keys.slice(10, 60));
  assert.deepEqual(asked, [{ start: keys[10], end: keys[500], limit: 50 }]);
  // No read ahead within the range, or no ranks to bridge with: nothing asked, no answer.
  asked.length = 0;
  assert.equal(await answer({ start: keys[700], end: null, limit: 50 }), undefined);
  assert.equal(await answer({ start: keys[10], end: keys[400], limit: 50 }), undefined);
  assert.equal(
    await cache.take("other", { start: keys[10], end: null, limit: 50 }, { source }),
    undefined,
  );
  assert.equal(
    await cache.take("c", { start: keys[10], end: null, limit: 50 }, { source }),
    undefined,
  );
  assert.deepEqual(asked, []);
  // A key inserted below the read since it was read: the ranks disagree, the read is dropped and
  // the registry's rows up to it are a full answer to a request for as many rows.
  await read();
  const added = keys[480] + "a";
  data.put(added);
  const after = (await answer({ start: keys[460], end: null, limit: 100 }))!;
  assert.deepEqual(after.rows.map((r) => r.id), data.keys.slice(460, 501));
  assert.ok(after.rows.some((r) => r.id === added));
  assert.equal(after.limit, 41);
  assert.equal(cache.heldRows, 0);
});

Deno.test("listing cache: only answers sent after the start sequence, within the budget, for their time", async () => {
  const data = dataOf(randomKeys(1000, ASCII, 13, 6));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const keys = data.keys;
  const clock = new FakeClock(0);
  const cache = new ListingCache({ maxRows: 250, ttlMs: 1000, clock });
  let settle!: () => void;
  const after = new Promise<void>((r) => settle = r);
  const recorder = cache.recording(source, "c", { after });
  const before = recorder.list({ start: keys[0], limit: 100 });
  settle();
  await after;
  await before;
  assert.equal(cache.heldRows, 0, "sent before the start sequence was read");
  await recorder.list({ start: keys[100], limit: 100 });
  await recorder.list({ start: keys[300], limit: 100, descending: true });
  await recorder.list({ start: keys[600], limit: 100 }); // over the budget
  await recorder.list({ start: keys[700], limit: 10, includeDocs: true }); // documents: not kept
  assert.equal(cache.heldRows, 200);
  assert.equal(cache.covering("c", keys[150])?.rows[0].id, keys[100]);
  assert.equal(cache.covering("c", keys[250])?.rows[0].id, keys[201]);
  assert.equal(cache.covering("c", keys[650]), undefined);
  assert.equal(cache.covering("c", keys[705]), undefined);
  assert.equal(recorder.requests, source.requests);
  assert.equal(recorder.capabilities, source.capabilities);
  // One budget: a page listed ahead finds the room the reads left, and no more.
  cache.prefetch(source, "d", { start: keys[900], limit: 60, pages: 1 });
  cache.prefetch(source, "d", { start: keys[800], limit: 50, pages: 1 });
  await cache.settled();
  assert.equal(cache.heldRows, 250);
  assert.equal(cache.covering("d", keys[910]), undefined);
  assert.equal(cache.covering("d", keys[810])?.rows[0].id, keys[800]);
  await clock.advance(1001);
  assert.equal(cache.covering("c", keys[150]), undefined, "dropped once stale");
  assert.equal(cache.heldRows, 0);
  await recorder.list({ start: keys[100], limit: 100 });
  cache.drop("c");
  assert.equal(cache.heldRows, 0);
});

Deno.test("listing cache: documents listed ahead only within their bytes, never held beyond them", async () => {
  const data = dataOf(randomKeys(200, ASCII, 11, 5));
  const source = new MemorySource(data, { docMode: "include_docs" });
  const five = await source.list({ start: data.keys[100], limit: 5, includeDocs: true });
  const budget = five.rows.reduce((n, r) => n + heldDocBytes(r.doc), 0);
  assert.ok(budget > 0);
  const small = new ListingCache({ maxDocBytes: budget });
  small.prefetch(source, "x", { start: null, limit: 50, pages: 1, includeDocs: true });
  small.prefetch(source, "x", { start: data.keys[100], limit: 5, pages: 1, includeDocs: true });
  await small.settled();
  assert.equal(small.heldDocBytes, budget);
  assert.equal(await small.take("x", { start: null, limit: 10, includeDocs: true }), undefined);
  assert.equal(await small.take("x", { start: data.keys[100], limit: 3 }), undefined, "keys only");
  const kept = await small.take("x", { start: data.keys[100], limit: 3, includeDocs: true });
  assert.equal(kept?.rows.length, 3);
  assert.ok(kept?.rows.every((r) => r.doc?.kind === "doc"));
  // The last row handed out stays (the next request starts there), with its document's bytes.
  const last = five.rows.slice(2).reduce((n, r) => n + heldDocBytes(r.doc), 0);
  assert.equal(small.heldDocBytes, last);
  small.drop("x");
  assert.equal(small.heldDocBytes, 0);
});
