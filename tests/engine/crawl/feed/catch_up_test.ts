import assert from "node:assert/strict";
import { SYSTEM_CLOCK } from "../../../../lib/base/clock.ts";
import { catchUp } from "../../../../lib/engine/crawl/feed/catch_up.ts";
import { FatalError, PermanentError, TransientError } from "../../../../lib/base/errors.ts";
import { checkCompletion } from "../../../../lib/engine/verify/completion.ts";
import { watchdog } from "../../../../lib/engine/dispatch/_watchdog.ts";
import { crawlStatus } from "../../../../lib/engine/crawl/reads/status.ts";
import { MemorySource } from "../../../../lib/sources/memory_source.ts";
import {
  type CrawlRecord,
  getCrawl,
  getFeed,
  updateCrawl,
} from "../../../../lib/engine/store/mod.ts";
import { begin, ctxOf, finishAll, runOne, spec, watchdogCtx } from "../../../engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "../../../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");

Deno.test("catch-up: inserts, updates and deletions during the crawl end up applied exactly", async () => {
  for (const docs of [false, true]) {
    using kv = await Deno.openKv(":memory:");
    const data = dataOf(randomKeys(2000, ASCII, 71, 6));
    const source = new MemorySource(data, { maxPage: 40 });
    const { id } = await begin(kv, source, spec({ shards: 4, docs }));
    assert.equal((await getCrawl(kv, id)).value!.startSeq, "2000");
    // Half of the shards, then the registry moves under the crawl.
    for (const shard of [0, 1]) assert.equal((await runOne(kv, source, id, shard)).kind, "done");
    const keys = [...data.keys];
    data.delete(keys[1]); // in an already-crawled range
    data.delete(keys[1990]); // in a range not yet crawled
    data.put(keys[5]); // updated after being crawled
    data.put("aaaa-new-early"); // inserted into a crawled range
    data.put("pppp-new-late"); // inserted into a range still to crawl
    data.put("aaaa-short-lived");
    data.delete("aaaa-short-lived");
    await finishAll(kv, source, id);
    assert.equal(
      await checkCompletion(ctxOf(kv, source), id),
      true,
    );
    await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
    const st = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
    assert.equal(st.verification?.status, "exact", st.verification?.detail);
    assert.match(st.verification!.detail, /after 6 changes applied/);
    const drift = st.drift!;
    assert.equal(drift.seq, String(data.updateSeq));
    // Following later changes (what --follow does) keeps KV equal to the registry.
    data.delete(keys[100]);
    data.put("zzzz-after");
    const res = await catchUp(ctxOf(kv, source), id);
    assert.equal(res.applied, 2);
    await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
  }
});

Deno.test("catch-up: a crash mid-feed resumes from the committed sequence, counting nothing twice", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, ASCII, 72, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 2 }));
  await finishAll(kv, source, id);
  for (let i = 0; i < 30; i++) data.put(`new-${i}`);
  for (const k of data.keys.slice(0, 10)) data.delete(k);
  let calls = 0;
  const flaky = wrapSource(source, {
    changes: (s, l) =>
      ++calls === 2 ? Promise.reject(new Error("feed broke")) : source.changes(s, l),
  });
  await assert.rejects(
    () => catchUp(ctxOf(kv, flaky, { owner: "me" }), id, { batch: 15 }),
    /feed broke/,
  );
  const mid = (await getFeed(kv, id)).value!;
  assert.equal(mid.inserted + mid.deleted + mid.updated, 15, "first batch committed");
  // The failed runner let its lease go: the next one carries on from the committed sequence.
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  let entered!: () => void;
  const holding = new Promise<void>((r) => entered = r);
  const slow = wrapSource(source, {
    changes: async (s, l) => {
      entered(); // the lease is taken before the feed is read
      await gate;
      return source.changes(s, l);
    },
  });
  const running = catchUp(ctxOf(kv, slow, { owner: "next" }), id, { batch: 15 });
  await holding;
  assert.equal(
    (await catchUp(ctxOf(kv, source, { owner: "other" }), id)).ran,
    false,
    "one runner at a time",
  );
  release();
  assert.ok((await running).ran);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
});

Deno.test("catch-up: a registry without a usable _changes feed still finishes its crawl", async () => {
  for (
    const failure of [
      new PermanentError("HTTP 404 at /_changes", { status: 404 }),
      new FatalError("garbage"),
    ]
  ) {
    using kv = await Deno.openKv(":memory:");
    const data = dataOf(randomKeys(300, ASCII, 73, 6));
    const source = new MemorySource(data, { maxPage: 100 });
    const { id } = await begin(kv, source, spec({ shards: 2 }));
    const noFeed = wrapSource(source, { changes: () => Promise.reject(failure) });
    data.put(data.keys[7]); // the registry moved: its feed is needed, and is found unusable
    await finishAll(kv, noFeed, id);
    assert.equal(
      await checkCompletion(ctxOf(kv, noFeed), id),
      true,
    );
    const st = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
    assert.equal(st.status, "done");
    assert.equal(st.itemsStored, 300);
    assert.match(st.driftError!, /change feed unavailable/);
  }
  // A transient failure leaves the crawl running, to be finished on a later check.
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(100, ASCII, 74, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 1 }));
  const down = wrapSource(source, { changes: () => Promise.reject(new TransientError("503")) });
  data.put("zz-moved");
  await finishAll(kv, down, id);
  await assert.rejects(
    () => checkCompletion(ctxOf(kv, down), id),
    TransientError,
  );
  assert.equal((await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).status, "running");
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
});

Deno.test("catch-up: the watchdog keeps a finished crawl created with follow equal to the registry", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(400, ASCII, 75, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 2, follow: true }));
  await finishAll(kv, source, id);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  data.put("zzzz-later");
  data.delete(data.keys[3]);
  await watchdog(watchdogCtx(kv, dispatcher, { openSource: () => source }));
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
});

Deno.test("catch-up: another write to the crawl record mid-feed neither stops it nor leaves its lease behind", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(300, ASCII, 73, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 2 }));
  await finishAll(kv, source, id);
  for (let i = 0; i < 20; i++) data.put(`later-${i}`);
  let touched = 0;
  // While a batch is read, something else updates the crawl record (its feed has its own now).
  const busy = wrapSource(source, {
    changes: async (s, l) => {
      if (touched++ < 2) {
        const e = await getCrawl(kv, id);
        assert.ok(
          await updateCrawl(kv, e as Deno.KvEntry<CrawlRecord>, { ...e.value!, updatedAt: 1 }),
        );
      }
      return source.changes(s, l);
    },
  });
  const res = await catchUp(ctxOf(kv, busy, { owner: "me" }), id, { batch: 8 });
  assert.equal(res.ran, true);
  const drift = (await getFeed(kv, id)).value!;
  assert.equal(drift.inserted, 20, "every change applied once");
  assert.equal(drift.lease, null, "the lease is not left behind");
  assert.equal(
    (await catchUp(ctxOf(kv, source, { owner: "next" }), id)).ran,
    true,
  );
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
});
