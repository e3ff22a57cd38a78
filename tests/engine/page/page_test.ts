/** Pages and shard runners: exactly once under races, crashes, caps and failing sources. */
import assert from "node:assert/strict";
import { clockWithNow, SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import { TransientError } from "../../../lib/base/errors.ts";
import { checkCompletion } from "../../../lib/engine/verify/completion.ts";
import { openCrawl, pauseCrawl, resumeCrawl } from "../../../lib/engine/crawl/lifecycle.ts";
import { DEFAULT_MAX_DOC_BYTES } from "../../../lib/engine/items/item_store.ts";
import { processPage } from "../../../lib/engine/page/page.ts";
import { checkShardEnd } from "../../../lib/engine/verify/shard_end.ts";
import { fetchDocs } from "../../../lib/engine/page/page_docs.ts";
import { cursorAt, listPage, pageLimit } from "../../../lib/engine/page/page_listing.ts";
import { keyHash, LONG_KEY_UNITS, sortKeys } from "../../../lib/plan/keys.ts";
import { AdaptiveLimit } from "../../../lib/base/adaptive_limit.ts";
import { claimShard, runShard } from "../../../lib/engine/dispatch/_shard_runner.ts";
import { crawlStatus } from "../../../lib/engine/crawl/reads/status.ts";
import { getCrawl, getShard, listShards, newShard } from "../../../lib/engine/store/mod.ts";
import type { CrawlRecord, ShardRecord } from "../../../lib/engine/store/mod.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import {
  begin,
  ctxOf,
  finishAll,
  RecordingDispatcher,
  runOne,
  spec,
  workDeps,
} from "../../engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "../../helpers.ts";
import { FakeClock, JumpingClock, nextTurn } from "../../fake_clock.ts";

const ASCII = "abcdefghijklmnop-".split("");
const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "\uffff", "z"];

Deno.test("page: every shard exactly once, unicode keys and documents", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, UNI, 21, 6));
  const source = new MemorySource(data, { maxPage: 50 });
  const { id } = await begin(kv, source, spec({ docs: true, shards: 7 }));
  await finishAll(kv, source, id);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k), partition: true });
  const report = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
  assert.equal(report.documents, 3000);
  assert.equal(report.status, "done");
  assert.equal(report.verification?.status, "exact");
  assert.ok(report.shards.every((s) => s.verified === "exact"));
});

Deno.test("page: pages cut short without a word are never read as the end; the cap is learned", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(2000, UNI, 22, 6));
  const source = new MemorySource(data, { maxPage: 1000, silentCap: 30 });
  const { id } = await begin(kv, source, spec({ shards: 3, maxPage: 1000 }));
  await finishAll(kv, source, id);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  await assertCrawledExactly(kv, id, data.keys);
  const crawl = (await getCrawl(kv, id)).value!;
  assert.equal(crawl.pageCap, 30, "the registry's cap is remembered with the crawl");
  assert.equal(pageLimit(crawl, source), 30, "and every later page asks for no more");
  assert.equal(source.capabilities.maxPage, 1000, "the source's own limit is its own");
});

Deno.test("page: one runner per shard; a worker whose lease was taken over cannot commit", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(500, UNI, 23, 6));
  const source = new MemorySource(data, { maxPage: 50 });
  const { id, crawl } = await begin(kv, source, spec({ shards: 2 }));
  let clock = 1_000_000;
  const a = await claimShard(kv, id, 0, { owner: "A", leaseMs: 5000, nowMs: clock });
  assert.ok(a, "A claims the free shard");
  const b = await runShard(
    workDeps(kv, source, { clock: clockWithNow(() => clock) }),
    id,
    0,
    {
      owner: "B",
    },
  );
  assert.deepEqual(b, { kind: "busy" }, "B finds the shard held");
  const ctx = {
    kv,
    source,
    leaseMs: 5000,
    clock: clockWithNow(() => clock),
    maxDocBytes: DEFAULT_MAX_DOC_BYTES,
    docMode: "get" as const,
    docLimit: new AdaptiveLimit(4),
    checkEnd: (shard: ShardRecord, end: { crawl: CrawlRecord; items: number }) =>
      checkShardEnd(source, shard, { clock: SYSTEM_CLOCK, ...end, kv }),
  };
  const p1 = await processPage({ ...ctx, owner: "A" }, a);
  assert.equal(p1.kind, "committed");
  assert.equal((await getShard(kv, id, 0)).value!.lease!.untilMs, clock + 5000, "renewed");
  // A stalls; its lease expires and B takes over.
  clock += 5001;
  const taken = await claimShard(kv, id, 0, { owner: "B", leaseMs: 5000, nowMs: clock });
  assert.ok(taken);
  if (p1.kind !== "committed") return;
  const late = await processPage({ ...ctx, owner: "A" }, { crawl, entry: p1.entry });
  assert.deepEqual(late, { kind: "lost", reason: "lease lost" });
  const items = (await getShard(kv, id, 0)).value!.items;
  assert.equal(items, p1.entry.value.items, "A's late page counted nothing");
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys);
});

/** A KV whose `n`-th atomic commit (counting from 1) throws `error`. */
function failingCommit(kv: Deno.Kv, n: number, error: Error): Deno.Kv {
  let commits = 0;
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "atomic") {
        return () => {
          const op = target.atomic();
          const commit = op.commit.bind(op);
          op.commit = () => (++commits === n ? Promise.reject(error) : commit());
          return op;
        };
      }
      const v = Reflect.get(target, prop);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}

Deno.test("page: a crash inside a page's last commit redoes that page, counted once", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(1000, UNI, 24, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id } = await begin(kv, source, spec({ shards: 3 }));
  // Commit 1 claims the lease; commit 3 is the second page's commit.
  const crashy = failingCommit(kv, 3, new Error("crash inside the commit"));
  const res = await runOne(crashy, source, id, 1);
  assert.equal(res.kind, "retry");
  const shard = (await getShard(kv, id, 1)).value!;
  assert.equal(shard.pages, 1, "the first page stands, the second does not");
  assert.equal(shard.failures, 1);
  assert.match(shard.lastError!, /crash inside the commit/);
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys);
});

Deno.test("page: a failing source is recorded on the shard and retried later; nothing counted twice", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(500, UNI, 25, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id } = await begin(kv, source, spec({ shards: 2, docs: true }));
  let fail = 2;
  const failing = wrapSource(source, {
    list: (o) =>
      fail-- > 0 ? Promise.reject(new TransientError("HTTP 503 at memory")) : source.list(o),
  });
  const first = await runOne(kv, failing, id, 0);
  assert.equal(first.kind, "retry");
  const s = (await getShard(kv, id, 0)).value!;
  assert.deepEqual([s.items, s.failures, s.retries, s.lease], [0, 1, 1, null]);
  assert.ok(s.retryAt! > Date.now(), "it waits out a backoff");
  await finishAll(kv, failing, id);
  await assertCrawledExactly(kv, id, data.keys);
  assert.equal((await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).retries, 2);
});

Deno.test("page: failures are bounded: the crawl fails with the error's message, never retried forever", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(300, UNI, 26, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id } = await begin(kv, source, spec({ shards: 2 }));
  const down = wrapSource(source, {
    list: () => Promise.reject(new TransientError("connection refused at http://x/db")),
  });
  const runs = await finishAll(kv, down, id, { deps: { maxShardFailures: 3 } }).catch(() => []);
  const crawl = (await getCrawl(kv, id)).value!;
  assert.equal(crawl.status, "failed");
  assert.match(crawl.error!, /connection refused at http:\/\/x\/db \(gave up after 3 attempts\)/);
  assert.ok(runs.length <= 6);
  // A KV limit error is a bug: the crawl fails at once, without retries.
  const { id: id2 } = await begin(kv, source, spec({ shards: 2 }), "t2");
  const limit = failingCommit(kv, 2, new TypeError("Total key size too large (max 81920 bytes)"));
  const res = await runOne(limit, source, id2, 0);
  assert.equal(res.kind, "failed");
  assert.equal((await getCrawl(kv, id2)).value!.status, "failed");
  assert.equal((await listShards(kv, id2))[0].value.failures ?? 0, 0);
});

Deno.test("page: pausing drops a page of slow documents at the next heartbeat, and lets the lease go", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(400, UNI, 27, 6));
  const source = new MemorySource(data, { maxPage: 400 });
  const { id } = await begin(kv, source, spec({ shards: 1, docs: true, concurrency: 2 }));
  let started = 0;
  const clock = new FakeClock(Date.now());
  const slow = wrapSource(source, {
    doc: async (docId) => {
      if (++started === 10) await pauseCrawl(kv, id, { clock: SYSTEM_CLOCK });
      await clock.sleep(20);
      return await source.doc(docId);
    },
  });
  // A page of 50 rows at 2 in flight and 20 ms each takes 500 ms of the fake clock; the 100 ms
  // heartbeat (a third of the lease) stops it.
  let settled = false;
  const run = runShard(workDeps(kv, slow, { clock, leaseMs: 300 }), id, 0, {
    owner: "w",
  }).finally(() => settled = true);
  for (let i = 0; i < 10_000 && !settled; i++) {
    await nextTurn();
    await clock.advance(10);
  }
  const res = await run;
  assert.deepEqual(res, { kind: "stopped", reason: "crawl paused" });
  assert.ok(started < 40, `${started} documents started of 200`);
  const s = (await getShard(kv, id, 0)).value!;
  assert.deepEqual([s.items, s.cursor, s.lease, s.inflight], [0, null, null, null]);
  // Resumed, the shard is redone from the same cursor and the crawl completes exactly.
  await resumeCrawl({ kv, dispatcher: new RecordingDispatcher() }, id, { clock: SYSTEM_CLOCK });
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys);
});

Deno.test("page: a document is recorded as failing only when it fails again in a second round", async () => {
  const data = dataOf(["a", "b", "c", "d"]);
  const inner = new MemorySource(data);
  const calls = new Map<string, number>();
  // "b" fails its first request (a round of attempts, as a source's retries would be) then
  // answers; "c" never answers.
  const source = wrapSource(inner, {
    doc: (id) => {
      const n = (calls.get(id) ?? 0) + 1;
      calls.set(id, n);
      if ((id === "b" && n === 1) || id === "c") {
        return Promise.reject(new TransientError("HTTP 503", { status: 503 }));
      }
      return inner.doc(id);
    },
  });
  const rows = (await inner.list({ start: null, limit: 10 })).rows;
  const fetch = (pageFailures: number) =>
    fetchDocs(source, rows, {
      mode: "get",
      limit: new AdaptiveLimit(4),
      currentEnd: () => null,
      pageFailures,
    });
  await assert.rejects(fetch(0), TransientError, "a first page attempt fails, nothing recorded");
  calls.clear();
  const items = await fetch(2);
  assert.equal(items[1].doc?.kind, "doc", "an unlucky document is fetched in the second round");
  assert.equal(calls.get("b"), 2);
  assert.deepEqual(items[2].doc && items[2].doc.kind, "error");
  assert.equal(calls.get("c"), 2, "one that keeps failing is recorded after its second round");
  assert.equal(calls.get("a"), 1);
});

Deno.test("page: a long id is never a cursor: a short key stands in, and the row it committed is skipped by hash", async () => {
  const long = "m" + "q".repeat(LONG_KEY_UNITS + 500);
  const data = dataOf(sortKeys(["a", "b", "ma", long, "n", "o"]));
  const source = new MemorySource(data, { maxPage: 100, silentCap: 2 });
  const crawl = { ...(await getCrawlRecord()), planMethod: "rank" };
  const shard = {
    ...newShard({ id: 0, start: null, end: null, cursor: "b" }, { expected: 6, nowMs: 0 }),
  };
  // Rows "b", "ma": full page of 2 asked as 2 (cap) -> short page; the cursor after "ma" is "ma".
  const first = await listPage(source, crawl, shard, { size: 10 });
  assert.deepEqual(first.next, { cursor: "ma", after: true, skip: null });
  // Next page: "ma" (dropped), the long id: a short page ending in a long id.
  const second = await listPage(source, crawl, { ...shard, ...first.next! }, { size: 10 });
  assert.deepEqual(second.rows.map((r) => r.id), [long]);
  assert.deepEqual(second.next, { cursor: "mq", after: false, skip: keyHash(long) });
  // From the short key, the long id's row is left out: nothing is listed twice.
  const third = await listPage(source, crawl, { ...shard, ...second.next! }, { size: 10 });
  assert.deepEqual(third.rows.map((r) => r.id), ["n"]);
  // A full page whose next row is long: the cursor is the shortest key between it and the row before.
  assert.deepEqual(cursorAt("ma", long), { cursor: "mq", after: false, skip: null });
  assert.deepEqual(cursorAt("n", "o"), { cursor: "o", after: false, skip: null });
});

async function getCrawlRecord() {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(["a", "b"]);
  const { crawl } = await begin(kv, new MemorySource(data), spec({ shards: 1 }));
  return crawl;
}

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
    ctxOf(kv, source, { dispatcher: new RecordingDispatcher(), maxPlanAttempts: 1 }),
    spec({ shards: 5, maxPage: 700 }),
    { id: "s" },
  );
  await finishAll(kv, source, crawl.id);
  assert.equal(empty, 0);
  for (const { value: shard } of await listShards(kv, crawl.id)) {
    // 800 items a shard, 698 a page: two pages each, the second proving the end.
    assert.equal(shard.pages, 2, `shard ${shard.id}: ${JSON.stringify(shard)}`);
  }
  assert.equal(
    await checkCompletion(ctxOf(kv, source), crawl.id),
    true,
  );
  await assertCrawledExactly(kv, crawl.id, data.keys);
});

Deno.test("final check: a registry that held still is proven in one round, without its window", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(3000, ASCII, 9, 7));
  const inner = new MemorySource(data, { maxPage: 1000 });
  const { crawl } = await openCrawl(
    ctxOf(kv, inner, { dispatcher: new RecordingDispatcher(), maxPlanAttempts: 1 }),
    spec({ shards: 4, maxPage: 1000 }),
    { id: "f" },
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
  const done = await checkCompletion(ctxOf(kv, source, { clock }), crawl.id);
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
