/** Listing ahead while a crawl is planned, and the planner's reads kept: the listing cache in use. */
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { ListingCache } from "../../../lib/sources/cache/mod.ts";
import { listAheadOf } from "../../../lib/engine/crawl/_prefetch.ts";
import { rowsPerPage } from "../../../lib/engine/page/page_listing.ts";
import { checkCompletion } from "../../../lib/engine/verify/completion.ts";
import { openCrawl } from "../../../lib/engine/crawl/lifecycle.ts";
import { crawlStatus } from "../../../lib/engine/crawl/reads/status.ts";
import { createRuntime } from "../../../lib/engine/dispatch/runtime.ts";
import { getCrawl, listShards } from "../../../lib/engine/store/mod.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import type { ListOptions, Page } from "../../../lib/plan/source.ts";
import { ctxOf, finishAll, RecordingDispatcher, spec } from "../../engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys, wrapSource } from "../../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");

Deno.test("prefetch: pages a chain listed past a start found later are the next shard's first pages", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(500, ASCII, 12, 5));
  const inner = new MemorySource(data);
  let listed = 0;
  const source = wrapSource(inner, { list: (o) => (listed++, inner.list(o)) });
  const { crawl } = await openCrawl(
    ctxOf(kv, source, { dispatcher: new RecordingDispatcher(), maxPlanAttempts: 1 }),
    spec({ shards: 4, maxPage: 50 }),
    { id: "p" },
  );
  const cache = new ListingCache();
  const tell = listAheadOf(cache, source, { crawl });
  const limit = rowsPerPage(crawl, source) + 1;
  listed = 0;
  tell(null); // the first shard's start: its chain lists on while the next start is unknown
  await cache.settled();
  assert.equal(listed, 4);
  assert.equal(cache.heldRows, 4 * limit);
  const page = limit - 1;
  // The next shard starts inside the chain's second page: the first shard's second page ends
  // there, and the next shard's pages start there and go on with the chain's third page.
  const next = data.keys[2 * page - 5];
  tell(next);
  await cache.settled();
  assert.equal(cache.heldRows, 4 * limit, "nothing dropped, nothing listed again");
  const ranks = { source, ranks: true };
  const asks: [ListOptions, number[]][] = [
    [{ start: data.keys[page], end: next, limit }, [page, 2 * page - 5]],
    [{ start: next, end: data.keys[400], limit }, [2 * page - 5, 2 * page + 1]],
    [{ start: data.keys[2 * page], end: data.keys[400], limit }, [2 * page, 3 * page + 1]],
  ];
  for (const [request, [from, to]] of asks) {
    const told = (await cache.take("p", request, ranks))!;
    assert.deepEqual(told.rows.map((r) => r.id), data.keys.slice(from, to));
    const real = await inner.list({ ...request, limit: told.limit ?? request.limit });
    assert.deepEqual(told.rows.map((r) => r.id), real.rows.map((r) => r.id));
    assert.equal(told.offset, real.offset);
  }
  assert.equal(listed, 4, "every answer told from the chain");
});

/** A crawl of `data` planned with `cache`: the requests and the rows the registry served. */
async function plannedCrawl(data: ReturnType<typeof dataOf>, cache?: ListingCache) {
  using kv = await Deno.openKv(":memory:");
  const inner = new MemorySource(data, { maxPage: 10_000 });
  const requests: [ListOptions, Page][] = [];
  let served = 0;
  const source = wrapSource(inner, {
    list: async (o): Promise<Page> => {
      const page = await inner.list(o);
      requests.push([o, page]);
      served += page.rows.length;
      return page;
    },
  });
  const s = spec({ shards: 6, maxPage: 10_000 });
  const { crawl } = await openCrawl(
    ctxOf(kv, source, {
      dispatcher: new RecordingDispatcher(),
      listings: cache,
      maxPlanAttempts: 1,
    }),
    s,
    { id: "e" },
  );
  assert.equal(crawl.status, "running");
  await cache?.settled();
  const planned = requests.length;
  await finishAll(kv, source, crawl.id, { deps: { listings: cache } });
  assert.equal(
    await checkCompletion(ctxOf(kv, source), crawl.id),
    true,
  );
  await assertCrawledExactly(kv, crawl.id, data.keys, { partition: true });
  const limit = rowsPerPage((await getCrawl(kv, crawl.id)).value!, inner) + 1;
  const shards = (await listShards(kv, crawl.id)).map((e) => e.value);
  return { requests, planned, served, limit, shards };
}

Deno.test("prefetch: a crawl planned with the cache lists each shard's first rows once, exact", async () => {
  const data = dataOf(randomKeys(6000, ASCII, 7, 7));
  const { requests, planned, served, limit, shards } = await plannedCrawl(
    data,
    new ListingCache(),
  );
  const ahead = requests.filter(([r]) => r.limit === limit && r.end == null && !r.descending);
  for (const shard of shards) {
    const fromStart = requests.filter(([r]) => (r.start ?? null) === shard.start && !r.descending);
    // Listed ahead (no end, the shard's page size) at most once (not where a read of the planner
    // holds its start), and not asked again by the shard itself.
    assert.ok(fromStart.filter(([r]) => r.limit === limit && r.end == null).length <= 1);
    assert.equal(fromStart.filter(([r]) => r.end !== undefined).length, 0, `shard ${shard.id}`);
  }
  // No row listed ahead was listed again: every listing of rows after planning (not a rank probe
  // of the checks) starts outside the pages listed ahead (at most at a page's last row, where the
  // next one starts).
  for (const [r] of requests.slice(planned)) {
    if (ahead.some(([a]) => a === r) || r.descending || r.start == null || r.limit < 2) continue;
    for (const [a, page] of ahead) {
      const first = a.start ?? "";
      const last = page.rows.at(-1)!.id;
      assert.ok(!(r.start >= first && r.start < last), `${r.start} inside a page from ${first}`);
    }
  }
  // The planner's reads were not listed again: fewer rows served than with no cache.
  const without = await plannedCrawl(data);
  assert.ok(served < without.served, `${served} rows against ${without.served}`);
});

Deno.test("prefetch: with documents only where the listing carries them", async () => {
  for (const docMode of ["include_docs", "get"] as const) {
    using kv = await Deno.openKv(":memory:");
    const data = dataOf(randomKeys(3000, ASCII, 10, 7));
    const inner = new MemorySource(data, { maxPage: 10_000, docMode });
    const requests: ListOptions[] = [];
    const source = wrapSource(inner, {
      list: (o): Promise<Page> => (requests.push(o), inner.list(o)),
    });
    const cache = new ListingCache();
    const { crawl } = await openCrawl(
      ctxOf(kv, source, {
        dispatcher: new RecordingDispatcher(),
        listings: cache,
        maxPlanAttempts: 1,
      }),
      spec({ shards: 4, maxPage: 10_000, docs: true }),
      { id: "d" },
    );
    await finishAll(kv, source, crawl.id, { deps: { listings: cache } });
    assert.equal(
      await checkCompletion(ctxOf(kv, source), crawl.id),
      true,
    );
    await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
    const earlyDocs = requests.filter((r) => r.includeDocs && r.end == null && !r.descending);
    if (docMode === "get") assert.equal(earlyDocs.length, 0, "no pages listed ahead by id");
    else {
      // Each shard's first page came with its documents, listed ahead and not asked again.
      for (const { value: shard } of await listShards(kv, crawl.id)) {
        const fromStart = requests.filter((r) =>
          (r.start ?? null) === shard.start && r.includeDocs
        );
        assert.equal(fromStart.length, 1, `shard ${shard.id}: ${JSON.stringify(fromStart)}`);
        assert.equal(fromStart[0].end ?? null, null);
      }
    }
    // What the cache holds of documents is what a request could still be told with.
    cache.drop(crawl.id);
    assert.equal(cache.heldDocBytes, 0);
    assert.equal(cache.heldRows, 0);
  }
});

Deno.test("prefetch: a registry changing after planning is crawled exactly from reads kept before", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(6000, ASCII, 14, 7));
  const source = new MemorySource(data, { maxPage: 10_000 });
  const cache = new ListingCache();
  const { crawl } = await openCrawl(
    ctxOf(kv, source, {
      dispatcher: new RecordingDispatcher(),
      listings: cache,
      maxPlanAttempts: 1,
    }),
    spec({ shards: 6, maxPage: 10_000 }),
    { id: "e" },
  );
  await cache.settled();
  const held = cache.heldRows;
  assert.ok(held > 1000, `${held} rows kept`);
  // Changes inside and around what the planner read, before any shard lists a row.
  const keys = [...data.keys];
  for (let i = 5; i < keys.length; i += 97) {
    if (i % 3 === 0) data.delete(keys[i]);
    else if (i % 3 === 1) data.put(keys[i] + "x");
    else data.put(keys[i]);
  }
  await finishAll(kv, source, crawl.id, { deps: { listings: cache } });
  assert.equal(
    await checkCompletion(ctxOf(kv, source), crawl.id),
    true,
  );
  await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
  assert.equal(
    (await crawlStatus(kv, crawl.id, { clock: SYSTEM_CLOCK })).verification?.status,
    "exact",
  );
});

Deno.test("prefetch: a plan whose offsets are not ranks keeps none of its reads", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(2000, ASCII, 16, 6));
  const inner = new MemorySource(data, { brokenOffsets: true, maxPage: 1000 });
  let listed = 0;
  const source = wrapSource(inner, { list: (o) => (listed++, inner.list(o)) });
  const cache = new ListingCache();
  const { crawl } = await openCrawl(
    ctxOf(kv, source, {
      dispatcher: new RecordingDispatcher(),
      listings: cache,
      maxPlanAttempts: 1,
    }),
    spec({ shards: 4, maxPage: 1000 }),
    { id: "b" },
  );
  // Cut by the prior of npm's names (no rank, no skip): the few reads that found that out are not
  // kept for shards whose ranges they may not cover.
  assert.equal(crawl.planMethod, "prior");
  assert.ok(listed >= 2);
  await cache.settled();
  assert.equal(cache.heldRows, 0);
});

Deno.test("prefetch: a runtime lets go of what its cache holds of a crawl once the crawl is done", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(6000, ASCII, 17, 7));
  const source = new MemorySource(data, { maxPage: 10_000 });
  let finished!: () => void;
  const done = new Promise<void>((r) => finished = r);
  const runtime = createRuntime({
    kv,
    openSource: () => source,
    dispatch: "lease",
    workers: 4,
    onEvent: (e) => e.kind === "crawl-done" && finished(),
  });
  const cache = runtime.deps.listings!;
  const { crawl } = await openCrawl(
    ctxOf(kv, source, { dispatcher: runtime.dispatcher, listings: cache, maxPlanAttempts: 1 }),
    spec({ shards: 6, maxPage: 10_000 }),
    { id: "r" },
  );
  await cache.settled();
  assert.ok(cache.heldRows > 0, "the planner's reads and pages listed ahead are held");
  await done;
  await runtime.close();
  await assertCrawledExactly(kv, crawl.id, data.keys, { partition: true });
  assert.equal(cache.heldRows, 0);
  assert.equal(cache.heldDocBytes, 0);
});
