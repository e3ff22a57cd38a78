import assert from "node:assert/strict";
import { clockWithNow, SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import { watchdog } from "../../../lib/engine/dispatch/_watchdog.ts";
import { remainingSeconds, splitStraggler } from "../../../lib/engine/crawl/rebalance.ts";
import { claimShard, runShard } from "../../../lib/engine/dispatch/_shard_runner.ts";
import { crawlStatus } from "../../../lib/engine/crawl/reads/status.ts";
import {
  getShard,
  keys,
  listShards,
  newShard,
  ShardNotices,
} from "../../../lib/engine/store/mod.ts";
import type { DocResult } from "../../../lib/plan/source.ts";
import { compareKeys } from "../../../lib/plan/keys.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import {
  begin,
  finishAll,
  RecordingDispatcher,
  runOne,
  spec,
  watchdogCtx,
  workDeps,
} from "../../engine_helpers.ts";
import { queueLook, workShard } from "../../../lib/engine/dispatch/work.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "../../helpers.ts";
import { FakeClock, nextTurn } from "../../fake_clock.ts";

const ASCII = "abcdefghijklmnopqrstuvwxyz0123456789-".split("");

Deno.test("rebalance: exact under repeated splits while shards run", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(6000, ASCII, 31, 7));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id, crawl } = await begin(kv, source, spec({ shards: 3, maxPage: 40, rebalance: true }));
  // All shards at once, the last one slower: when the others finish, their workers would be idle,
  // and the one still running is split (then its children, as they lag too).
  const slowFrom = (await listShards(kv, crawl.id)).at(-1)!.value.start!;
  const slow = wrapSource(source, {
    list: async (o) => {
      if (o.start && compareKeys(o.start, slowFrom) >= 0) {
        await new Promise((r) => setTimeout(r, 3));
      }
      return await source.list(o);
    },
  });
  await finishAll(kv, slow, id, { parallel: 8, deps: { rebalance: { minItems: 40 } } });
  const r = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
  assert.ok(r.splits.length >= 1, `${r.splits.length} splits happened`);
  assert.equal(r.shardCount, 3 + r.splits.length);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
});

Deno.test("rebalance: a split racing the victim's in-flight page trims that page", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(400, ASCII, 32, 6));
  const source = new MemorySource(data, { maxPage: 150 });
  const { id } = await begin(kv, source, spec({ shards: 2, maxPage: 150, rebalance: true }));
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  let listed!: () => void;
  const wasListed = new Promise<void>((r) => listed = r);
  let first = true;
  const gated = wrapSource(source, {
    list: async (o) => {
      const page = await source.list(o);
      if (first && o.limit > 1) {
        first = false;
        listed();
        await gate;
      }
      return page;
    },
  });
  // Shard 1 is done first: a worker is idle while shard 0's page is in flight.
  assert.equal((await runOne(kv, source, id, 1)).kind, "done");
  const run = runShard(workDeps(kv, gated), id, 0, { owner: "victim" });
  await wasListed;
  const split = await splitStraggler(
    { kv, source, dispatcher: new RecordingDispatcher(), clock: SYSTEM_CLOCK },
    id,
    { minItems: 5 },
  );
  assert.ok(split && split.parent === 0, "shard 0 was split while its page was in flight");
  release();
  assert.equal((await run).kind, "done");
  const victim = (await getShard(kv, id, 0)).value!;
  assert.equal(victim.end, split!.key);
  assert.equal(victim.items, data.rank(split!.key), "counted exactly the rows below the split");
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
});

Deno.test("rebalance: a page of slow documents is split inside; its unstarted rows go to the child", async () => {
  using kv = await Deno.openKv(":memory:");
  // 60 items, pages of 50 documents: the middle of what is left lies inside the first page.
  const data = dataOf(randomKeys(60, ASCII, 34, 6));
  const source = new MemorySource(data, { maxPage: 1000 });
  const { id } = await begin(
    kv,
    source,
    spec({ shards: 1, docs: true, concurrency: 2, maxPage: 1000, rebalance: true }),
  );
  const waiting: (() => void)[] = [];
  let fetched = 0;
  const slow = wrapSource(source, {
    doc: async (docId): Promise<DocResult> => {
      if (fetched++ >= 4) await new Promise<void>((r) => waiting.push(r));
      return await source.doc(docId);
    },
  });
  // The shard's heartbeat (every 50 ms of a lease of 150) beats only as the fake clock moves.
  const clock = new FakeClock();
  const run = runShard(workDeps(kv, slow, { clock, leaseMs: 150 }), id, 0, { owner: "w" });
  // A beat publishes the page in flight (four rows done, two stuck).
  let inflight = null;
  for (let i = 0; i < 1000 && !(inflight?.started && inflight.started >= 6); i++) {
    await nextTurn();
    await clock.advance(50);
    inflight = (await getShard(kv, id, 0)).value!.inflight;
  }
  assert.ok(inflight && inflight.started === 6 && inflight.rows === 50, JSON.stringify(inflight));
  const split = await splitStraggler(
    { kv, source, dispatcher: new RecordingDispatcher(), clock },
    id,
    { minItems: 2 },
  );
  assert.ok(split, "the shard was split inside its page");
  const at = data.rank(split!.key);
  assert.ok(
    at > 6 && at < 50,
    `the split key (rank ${at}) lies inside the page, past its started rows`,
  );
  // The next beat meets the split's commit: the victim reads its new end; then the stuck rows end.
  await clock.advance(50);
  assert.equal((await getShard(kv, id, 0)).value!.end, split!.key);
  fetched = -1_000_000;
  while (waiting.length) waiting.shift()!();
  assert.equal((await run).kind, "done");
  const victim = (await getShard(kv, id, 0)).value!;
  assert.equal(victim.items, data.rank(split!.key));
  assert.equal(fetched, -1_000_000 + at - 6, "the victim fetched up to the split key, no further");
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
});

Deno.test("rebalance: a split made in the victim's process stops its page at the split key before any heartbeat", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(60, ASCII, 35, 6));
  const source = new MemorySource(data, { maxPage: 1000 });
  const { id } = await begin(
    kv,
    source,
    spec({ shards: 1, docs: true, concurrency: 2, maxPage: 1000, rebalance: true }),
  );
  const waiting: (() => void)[] = [];
  let fetched = 0;
  const slow = wrapSource(source, {
    doc: async (docId): Promise<DocResult> => {
      if (fetched++ >= 4) await new Promise<void>((r) => waiting.push(r));
      return await source.doc(docId);
    },
  });
  const clock = new FakeClock();
  const notices = new ShardNotices();
  const deps = workDeps(kv, slow, { clock, notices, leaseMs: 150 });
  const run = runShard(deps, id, 0, { owner: "w" });
  let inflight = null;
  for (let i = 0; i < 1000 && !(inflight?.started && inflight.started >= 6); i++) {
    await nextTurn();
    await clock.advance(50);
    inflight = (await getShard(kv, id, 0)).value!.inflight;
  }
  assert.ok(inflight && inflight.started === 6, JSON.stringify(inflight));
  const dispatcher = new RecordingDispatcher();
  const split = await splitStraggler({ kv, source, dispatcher, notices, clock }, id, {
    minItems: 2,
  });
  assert.ok(split, "the shard was split inside its page");
  const at = data.rank(split!.key);
  // No beat after the split (the fake clock stands still): the notice alone stops the page.
  const beatsBefore = clock.pending;
  fetched = -1_000_000;
  while (waiting.length) waiting.shift()!();
  assert.equal((await run).kind, "done");
  assert.equal(clock.pending, beatsBefore - 1, "the page's heartbeat was stopped, never run");
  assert.equal(fetched, -1_000_000 + at - 6, "no document past the split key was asked for");
  const victim = (await getShard(kv, id, 0)).value!;
  assert.equal(victim.end, split!.key);
  assert.equal(victim.items, at);
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
});

Deno.test("shard notices: newer entries only, per shard, bounded", () => {
  const entry = (crawl: string, shard: number, versionstamp: string, end: string | null) => ({
    key: keys.shard(crawl, shard),
    value: newShard({ id: shard, start: null, end, cursor: null }, { expected: 10, nowMs: 0 }),
    versionstamp,
  });
  const notices = new ShardNotices({ maxNotices: 2 });
  const held = entry("c", 0, "00000000000000010000", null);
  assert.equal(notices.newer(held), undefined);
  notices.post(entry("c", 0, "00000000000000020000", "m"));
  assert.equal(notices.newer(held)?.value.end, "m");
  assert.equal(notices.newer(entry("c", 0, "00000000000000030000", null)), undefined, "older");
  notices.post(entry("c", 0, "00000000000000015000", "z"));
  assert.equal(notices.newer(held)?.value.end, "m", "an older notice never replaces a newer one");
  assert.equal(notices.newer(entry("c", 1, "00000000000000000001", null)), undefined, "per shard");
  assert.equal(notices.newer(entry("d", 0, "00000000000000000001", null)), undefined, "per crawl");
  notices.post(entry("c", 1, "00000000000000040000", "q"));
  notices.post(entry("c", 2, "00000000000000050000", "r"));
  assert.equal(notices.size, 2);
  assert.equal(notices.newer(held), undefined, "the oldest notice went first");
});

Deno.test("rebalance: remaining time counts the documents in flight", () => {
  const now = 1_000_000;
  const base = newShard({ id: 0, start: null, end: null, cursor: null }, {
    expected: 1000,
    nowMs: now - 60_000,
  });
  const fast = { ...base, items: 100, recentRate: 100 };
  // Few committed, a page of slow documents running for 10 s with 20 started: 2 a second.
  const stuck = {
    ...base,
    id: 1,
    items: 0,
    recentRate: 100,
    inflight: { nextKey: "k", started: 20, rows: 100, since: now - 10_000 },
  };
  assert.ok(remainingSeconds(stuck, 50, now) > 10 * remainingSeconds(fast, 50, now));
  assert.equal(remainingSeconds({ ...base, id: 2 }, 50, now), 1000 / 50, "fresh: the median");
});

Deno.test("rebalance: a shard whose worker died is split, and the watchdog revives the rest", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, ASCII, 33, 7));
  const source = new MemorySource(data, { maxPage: 30 });
  const { id } = await begin(kv, source, spec({ shards: 4, maxPage: 30, rebalance: true }));
  const t = Date.now();
  // Shard 2's worker died holding its lease.
  assert.ok(await claimShard(kv, id, 2, { owner: "gone", leaseMs: 60_000, nowMs: t }));
  for (const s of [0, 1, 3]) {
    const r = await runShard(workDeps(kv, source), id, s, { owner: "w" });
    assert.equal(r.kind, "done");
  }
  const dispatcher = new RecordingDispatcher();
  const split = await splitStraggler({ kv, source, dispatcher, clock: SYSTEM_CLOCK }, id, {
    minItems: 30,
  });
  assert.equal(split?.parent, 2, "the dead shard is the straggler");
  assert.deepEqual(dispatcher.shards.map((d) => d.shardId), [split!.child]);
  assert.equal(
    await watchdog(watchdogCtx(kv, dispatcher, { clock: clockWithNow(() => t + 1000) }), {
      stallMs: 0,
    }),
    1,
    "the child only: shard 2's lease is still live",
  );
  assert.equal(
    await watchdog(watchdogCtx(kv, dispatcher, { clock: clockWithNow(() => t + 61_000) }), {
      stallMs: 0,
    }),
    2,
    "once the lease expired, shard 2 too",
  );
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
  const splits = (await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).splits.length;
  assert.equal((await listShards(kv, id)).length, 4 + splits);
});

Deno.test("rebalance: ending shards of a process look for a straggler one after the other", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, ASCII, 34, 7));
  const source = new MemorySource(data, { maxPage: 30 });
  const { id } = await begin(kv, source, spec({ shards: 4, maxPage: 30, rebalance: true }));
  // Shard 2's worker died holding its lease: a straggler, when shard 3 ends.
  assert.ok(await claimShard(kv, id, 2, { owner: "gone", leaseMs: 60_000, nowMs: Date.now() }));
  for (const s of [0, 1]) assert.equal((await runOne(kv, source, id, s)).kind, "done");
  // Another shard of this process is looking: shard 3's end waits for that look, then looks.
  let release = () => {};
  const other = new Promise<void>((r) => release = r);
  const splitting = new Map([[id, { tail: other, waiting: null }]]);
  const deps = workDeps(kv, source, { splitting, rebalance: { minItems: 30 } });
  let ended = false;
  const run = workShard(deps, id, 3, { owner: "w" }).then((r) => (ended = true, r));
  // Shard 3 is done and its look is queued behind the other one's.
  for (let i = 0; i < 10_000 && !splitting.get(id)?.waiting; i++) await nextTurn();
  assert.ok(splitting.get(id)?.waiting, "shard 3's look waits its turn");
  assert.equal((await getShard(kv, id, 3)).value!.done, true);
  assert.equal(
    (await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).splits.length,
    0,
    "no look while the other one runs",
  );
  assert.equal(ended, false);
  release();
  assert.equal((await run).kind, "done");
  assert.equal((await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).splits.length, 1);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(splitting.size, 0, "the last look leaves no mark behind");
});

Deno.test("rebalance: a shard ending while a look waits its turn shares that look", async () => {
  const looks = new Map();
  const ran: string[] = [];
  let release = () => {};
  const held = new Promise<void>((r) => release = r);
  const first = queueLook(looks, "c", () => (ran.push("first"), held));
  const second = queueLook(looks, "c", () => (ran.push("second"), Promise.resolve()));
  const third = queueLook(looks, "c", () => (ran.push("third"), Promise.resolve()));
  assert.equal(third, second, "the look not yet begun is shared");
  const other = queueLook(looks, "d", () => (ran.push("other crawl"), Promise.resolve()));
  await other;
  assert.deepEqual(ran, ["first", "other crawl"], "one look at a time per crawl");
  release();
  await Promise.all([first, second, third]);
  assert.deepEqual(ran, ["first", "other crawl", "second"]);
  // Once begun, a look is no longer shared: the next one waits for it.
  let releaseAgain = () => {};
  const fourth = queueLook(
    looks,
    "c",
    () => (ran.push("fourth"), new Promise<void>((r) => releaseAgain = r)),
  );
  await new Promise((r) => setTimeout(r, 0));
  const fifth = queueLook(looks, "c", () => (ran.push("fifth"), Promise.reject(new Error("no"))));
  assert.notEqual(fifth, fourth);
  releaseAgain();
  await fourth;
  await assert.rejects(fifth, /no/, "a look's failure reaches its own caller");
  assert.deepEqual(ran, ["first", "other crawl", "second", "fourth", "fifth"]);
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(looks.size, 0, "the last look leaves no mark behind");
});

Deno.test("rebalance: a shard whose documents come with its pages is split only with two pages left", async () => {
  // Pages of 500 rows carry their documents: the page in flight is not seen until it commits, so
  // a shard with less than two pages left would be split behind its own listing.
  for (const [per, splits] of [[900, 0], [1100, 1]] as const) {
    using kv = await Deno.openKv(":memory:");
    const data = dataOf(randomKeys(2 * per, ASCII, 33, 7));
    const source = new MemorySource(data, { maxPage: 10_000, docMode: "include_docs" });
    const { id, crawl } = await begin(
      kv,
      source,
      spec({ shards: 2, maxPage: 10_000, docs: true, concurrency: 4, rebalance: true }),
    );
    assert.equal(crawl.docMode, "include_docs");
    assert.equal((await runOne(kv, source, id, 0)).kind, "done");
    // Shard 1 is being worked on (its worker holds the lease): the straggler.
    assert.ok(await claimShard(kv, id, 1, { owner: "w", leaseMs: 60_000, nowMs: Date.now() }));
    const split = await splitStraggler(
      { kv, source, dispatcher: new RecordingDispatcher(), clock: SYSTEM_CLOCK },
      id,
    );
    assert.equal(split === null ? 0 : 1, splits, `${per} items left`);
  }
});

Deno.test("watchdog: the tick that finishes a crawl says so, once", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(400, ASCII, 37, 6));
  const source = new MemorySource(data, { maxPage: 60 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 2, maxPage: 60 }));
  for (const s of [0, 1]) assert.equal((await runOne(kv, source, id, s)).kind, "done");
  const finished: string[] = [];
  const deps = watchdogCtx(kv, dispatcher, {
    openSource: () => source,
    onFinished: (c: string) => finished.push(c),
  });
  await watchdog(deps, { stallMs: 0 });
  assert.equal((await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).status, "done");
  await watchdog(deps, { stallMs: 0 });
  assert.deepEqual(finished, [id], "told by the tick that finished it, not by the next");
});

Deno.test("rebalance: no split while a shard waits out a failure (the registry is failing, not a range slow); after it, the split", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, ASCII, 33, 8));
  const source = new MemorySource(data, { maxPage: 30 });
  const { id } = await begin(kv, source, spec({ shards: 4, maxPage: 30, rebalance: true }));
  const t = Date.now();
  for (const s of [0, 1]) {
    assert.equal((await runShard(workDeps(kv, source), id, s, { owner: "w" })).kind, "done");
  }
  // Shards 2 and 3 are held by a worker (no idle one has work); shard 3's last page failed: it
  // waits until t + 5 s.
  for (const s of [2, 3]) {
    assert.ok(await claimShard(kv, id, s, { owner: "busy", leaseMs: 60_000, nowMs: t }));
  }
  const waiting = (await getShard(kv, id, 3)).value!;
  await kv.set(keys.shard(id, 3), { ...waiting, failures: 1, retryAt: t + 5_000 });
  const dispatcher = new RecordingDispatcher();
  const at = (ms: number) => ({ kv, source, dispatcher, clock: clockWithNow(() => ms) });
  assert.equal(await splitStraggler(at(t), id, { minItems: 30 }), null);
  assert.deepEqual(dispatcher.shards, [], "nothing dispatched");
  const split = await splitStraggler(at(t + 5_001), id, { minItems: 30 });
  assert.ok(split !== null, "once no shard waits, the straggler is split");
  await watchdog(watchdogCtx(kv, dispatcher, { clock: clockWithNow(() => t + 61_000) }), {
    stallMs: 0,
  });
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { partition: true });
});
