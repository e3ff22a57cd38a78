/**
 * "Done" proven against a registry that behaves as live ones do: it changes while it is crawled,
 * caps its change feed, loses rows from listings, is replaced behind the same URL, answers error
 * bodies, documents of other ids or over-size listings. Every crawl here ends either done with
 * the registry's exact state, or failed with one line naming the gap; never done with rows
 * missing, stale or unreadable.
 */
import { SYSTEM_CLOCK } from "../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { buildSpec } from "../../lib/base/spec.ts";
import { FatalError } from "../../lib/base/errors.ts";
import { exportNdjson } from "../../lib/cli/export.ts";
import { runLocalCrawl } from "../../lib/cli/local_crawl.ts";
import { catchUp } from "../../lib/engine/crawl/feed/catch_up.ts";
import { checkCompletion } from "../../lib/engine/verify/completion.ts";
import { watchdog } from "../../lib/engine/dispatch/_watchdog.ts";
import { iterateItems } from "../../lib/engine/items/item_read.ts";
import { deleteCrawl } from "../../lib/engine/crawl/lifecycle.ts";
import { crawlStatus } from "../../lib/engine/crawl/reads/status.ts";
import { crawlItemsPage } from "../../lib/engine/crawl/reads/crawl_reads.ts";
import { getCrawl, getFeed, listCrawls } from "../../lib/engine/store/mod.ts";
import { MAX_STORED_ID_UNITS, writeItems } from "../../lib/engine/items/item_store.ts";
import { LONG_KEY_UNITS, sortKeys } from "../../lib/plan/keys.ts";
import { bundledNames, prng, syntheticNames } from "../../lib/sim/names.ts";
import { type ChurnKind, RegistryData } from "../../lib/sim/registry/registry_data.ts";
import {
  isHidden,
  type RegistryOptions,
  startRegistry,
} from "../../lib/sim/registry/registry_server.ts";
import { CouchSource, type CouchSourceOptions } from "../../lib/sources/couch/couch_source.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import {
  begin,
  ctxOf,
  finishAll,
  RecordingDispatcher,
  runOne,
  spec,
  watchdogCtx,
} from "../engine_helpers.ts";
import { assertCrawledExactly, exportText, wrapSource } from "../helpers.ts";
import { JumpingClock } from "../fake_clock.ts";

const names = async (n: number, seed = 11) => syntheticNames(await bundledNames(), n, { seed });

/**
 * Changes `data` `perSecond` times a second (one change at a time) until stopped, or until
 * `maxChanges` were made; `stop` returns how many were made.
 */
function churn(data: RegistryData, perSecond: number, kinds?: ChurnKind[], maxChanges = Infinity) {
  const rand = prng(99);
  let n = 0;
  const t = setInterval(() => {
    data.churn(1, rand, kinds);
    if (++n >= maxChanges) clearInterval(t);
  }, 1000 / perSecond);
  return { stop: () => (clearInterval(t), n) };
}

/** Crawls `data` served with `options` into a temp KV while `during` runs; returns the KV path. */
async function crawlLive(
  data: RegistryData,
  options: RegistryOptions,
  run: {
    docs?: boolean;
    shards?: number;
    maxPage?: number;
    view?: string;
    source?: CouchSourceOptions;
    during?: () => { stop: () => number };
  } = {},
) {
  const reg = await startRegistry(data, options);
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/c.kv`;
  const moving = run.during?.();
  try {
    const res = await runLocalCrawl({
      kvPath,
      spec: buildSpec({
        source: reg.url,
        shards: run.shards ?? 4,
        docs: run.docs,
        maxPage: run.maxPage,
        view: run.view,
      }),
      sourceUrl: reg.url,
      sourceOptions: run.source,
    }).finally(() => moving?.stop());
    return { res, kvPath, url: reg.url, dir, close: () => reg.close() };
  } catch (err) {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
    throw err;
  }
}

async function cleanup(run: { dir: string; close: () => Promise<void> }) {
  await run.close();
  await Deno.remove(run.dir, { recursive: true });
}

Deno.test("live: a registry inserting, updating and deleting 20 times a second ends done, exact", async () => {
  for (const docs of [false, true]) {
    const data = new RegistryData(await names(20_000));
    const run = await crawlLive(data, { latencyMs: 15 }, {
      docs,
      maxPage: 200,
      during: () => churn(data, 20),
    });
    try {
      assert.equal(run.res.report.status, "done");
      const v = run.res.report.verification!;
      assert.equal(v.status, "exact", v.detail);
      using kv = await Deno.openKv(run.kvPath);
      const [crawl] = await listCrawls(kv);
      const feed = (await getFeed(kv, crawl.id)).value!;
      assert.ok(feed.inserted + feed.deleted > 0, "it did change");
      // What --follow does next: the store stays the registry's state.
      await catchUp(ctxOf(kv, new CouchSource(run.url)), crawl.id);
      await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
    } finally {
      await cleanup(run);
    }
  }
});

Deno.test("live: one range over a registry changing 200 times a second is proven while it still changes", async () => {
  // Every check of the whole range sees a change inside it: only parts of it can hold still.
  const data = new RegistryData(await names(20_000));
  const maxChanges = 200 * 90;
  let made = 0;
  const run = await crawlLive(data, { latencyMs: 15 }, {
    shards: 1,
    maxPage: 500,
    during: () => {
      const c = churn(data, 200, undefined, maxChanges);
      return { stop: () => made = c.stop() };
    },
  });
  try {
    assert.equal(run.res.report.status, "done");
    const v = run.res.report.verification!;
    assert.equal(v.status, "exact", v.detail);
    assert.ok(made < maxChanges, `proven while the registry still changed (${made} changes)`);
    using kv = await Deno.openKv(run.kvPath);
    const [crawl] = await listCrawls(kv);
    const feed = (await getFeed(kv, crawl.id)).value!;
    assert.ok(feed.inserted + feed.deleted > 100, "changes were applied");
    await catchUp(ctxOf(kv, new CouchSource(run.url)), crawl.id);
    await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
  } finally {
    await cleanup(run);
  }
});

Deno.test("live: a view that changes while it is crawled fails saying so; never done", async () => {
  // Inserts, updates and deletions: a range's count can come back to the stored one while its rows
  // moved, so counts alone would end such a crawl done. The view's update_seq tells instead.
  for (let run = 0; run < 3; run++) {
    const data = new RegistryData(await names(5_000, 30 + run));
    await assert.rejects(
      () =>
        crawlLive(data, { latencyMs: 5 }, {
          view: "pkg/by_shape",
          shards: 2,
          maxPage: 200,
          during: () => churn(data, 200),
        }),
      (err: Error) => {
        assert.ok(err instanceof FatalError);
        assert.match(err.message, /the registry changed while this view was crawled \(update_seq/);
        assert.match(err.message, /views have no catch-up/);
        assert.ok(!err.message.includes("\n"), "one line");
        return true;
      },
    );
  }
  // Held still, the same view crawl is done and exact.
  const data = new RegistryData(await names(5_000, 30));
  const run = await crawlLive(data, { latencyMs: 5 }, { view: "pkg/by_shape", shards: 2 });
  try {
    assert.equal(run.res.report.status, "done");
    assert.equal(run.res.report.verification?.status, "exact");
  } finally {
    await cleanup(run);
  }
});

Deno.test("live: rows a listing loses are found while the registry keeps changing, and the crawl fails saying where", async () => {
  const keys = await names(20_000);
  const hidden = keys.filter((k) => isHidden(k, 0.001)).length;
  assert.ok(hidden > 5, `the registry hides ${hidden} rows`);
  const data = new RegistryData(keys);
  await assert.rejects(
    () =>
      crawlLive(data, { hideRate: 0.001, latencyMs: 5 }, {
        maxPage: 500,
        during: () => churn(data, 20, ["update"]),
      }),
    (err: Error) => {
      assert.ok(err instanceof FatalError);
      assert.match(err.message, /shard \d+ .* holds \d+ items but the registry lists \d+ there/);
      assert.match(err.message, /also after listing it again 2 time\(s\)/);
      assert.ok(!err.message.includes("\n"), "one line");
      return true;
    },
  );
});

Deno.test("live: a change feed capped at 50 rows a request is read to its proven end", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = new RegistryData(await names(3_000, 12));
  const mem = new MemorySource(data, { maxPage: 100 });
  let reads = 0;
  const source = wrapSource(mem, {
    changes: (since, limit) => {
      // The registry keeps moving while the feed is read.
      if (reads++ % 2 === 0) data.churn(1, prng(reads));
      return mem.changes(since, Math.min(limit, 50));
    },
  });
  const { id } = await begin(kv, source, spec({ shards: 4 }));
  data.churn(400, prng(5));
  await finishAll(kv, source, id);
  for (
    let i = 0;
    i < 20 && !await checkCompletion(ctxOf(kv, source), id);
    i++
  );
  const st = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
  assert.equal(st.status, "done");
  assert.equal(st.verification?.status, "exact", st.verification?.detail);
  // Nothing moved after the last read of the feed but what its last reads applied.
  await catchUp(ctxOf(kv, mem), id);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
  assert.ok(reads >= 400 / 50, `the feed was read in ${reads} requests`);
});

Deno.test("live: a database replaced behind the same URL is never merged into the crawl", async () => {
  // Replaced by a smaller one (a restore from a backup): update_seq goes back; the crawl fails.
  {
    using kv = await Deno.openKv(":memory:");
    const data = new RegistryData(await names(4_000, 13));
    const source = new MemorySource(data, { maxPage: 200 });
    const { id } = await begin(kv, source, spec({ shards: 4 }));
    for (const shard of [0, 1]) assert.equal((await runOne(kv, source, id, shard)).kind, "done");
    data.replace(await names(2_000, 14));
    await finishAll(kv, source, id);
    assert.equal(
      await checkCompletion(ctxOf(kv, source), id),
      false,
    );
    const crawl = (await getCrawl(kv, id)).value!;
    assert.equal(crawl.status, "failed");
    assert.match(crawl.error!, /was replaced or rolled back .*update_seq 2000 is below 4000/);
  }
  // Replaced by a larger one: update_seq does not go back, but no range adds up, and every range
  // is listed again; what the old database left is gone.
  {
    using kv = await Deno.openKv(":memory:");
    const data = new RegistryData(await names(4_000, 15));
    const source = new MemorySource(data, { maxPage: 200 });
    const dispatcher = new RecordingDispatcher();
    const { id } = await begin(kv, source, spec({ shards: 4 }));
    for (const shard of [0, 1]) assert.equal((await runOne(kv, source, id, shard)).kind, "done");
    data.replace(await names(6_000, 16));
    for (let round = 0; round < 6; round++) {
      await finishAll(kv, source, id);
      if (
        await checkCompletion(ctxOf(kv, source, { dispatcher }), id)
      ) break;
    }
    const st = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
    assert.equal(st.status, "done", st.error ?? st.verification?.detail);
    assert.equal(st.verification?.status, "exact");
    await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
  }
});

Deno.test("live: resuming the same command on a replaced registry fails with one line", async () => {
  const data = new RegistryData(await names(6_000, 17));
  const reg = await startRegistry(data, {});
  const dir = await Deno.makeTempDir();
  try {
    const spec = buildSpec({ source: reg.url, shards: 4 });
    // A crawl stopped half-way: planned, two shards done (what a killed run leaves).
    {
      using kv = await Deno.openKv(`${dir}/c.kv`);
      const source = new CouchSource(reg.url);
      const { id } = await begin(kv, source, spec, "c");
      for (const shard of [0, 1]) assert.equal((await runOne(kv, source, id, shard)).kind, "done");
    }
    data.replace(await names(3_000, 18));
    await assert.rejects(
      () => runLocalCrawl({ kvPath: `${dir}/c.kv`, spec, sourceUrl: reg.url, id: "c" }),
      /replaced or rolled back since this crawl read it/,
    );
    using kv = await Deno.openKv(`${dir}/c.kv`);
    assert.equal((await getCrawl(kv, "c")).value!.status, "failed");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("live: a document over any answer's size keeps its row; no other page gets smaller", async () => {
  const keys = await names(8_000, 19);
  const data = new RegistryData(keys);
  const run = await crawlLive(data, { oversizeDocRate: 0.001, hugeDocBytes: 40 * 1024 * 1024 }, {
    docs: true,
    during: () => churn(data, 20),
  });
  try {
    const r = run.res.report;
    assert.equal(r.status, "done");
    assert.equal(r.verification?.status, "exact", r.verification?.detail);
    assert.equal(r.pageCap, null, "no cap was learned from an over-size answer");
    assert.ok(r.pages < 60, `${r.pages} pages for ${r.itemsStored} items`);
    using kv = await Deno.openKv(run.kvPath);
    const [crawl] = await listCrawls(kv);
    await catchUp(ctxOf(kv, new CouchSource(run.url)), crawl.id);
    await assertCrawledExactly(kv, crawl.id, data.keys, { revs: (k) => data.rev(k) });
    let tooLarge = 0;
    for await (const it of iterateItems(kv, crawl.id)) if (it.tooLarge) tooLarge++;
    assert.ok(tooLarge >= 3, `${tooLarge} documents recorded as too large`);
  } finally {
    await cleanup(run);
  }
});

Deno.test("live: documents ending in a newline or pretty-printed export as one JSON value a line", async () => {
  for (const docFormat of ["newline", "pretty"] as const) {
    const data = new RegistryData(await names(1_500, 20));
    const run = await crawlLive(data, { docFormat, includeDocs: false, bulkGet: false }, {
      docs: true,
    });
    try {
      using kv = await Deno.openKv(run.kvPath);
      const [crawl] = await listCrawls(kv);
      const { text, lines: n } = await exportText(kv, crawl.id);
      const lines = text.split("\n").filter((l) => l !== "");
      assert.equal(n, 1_500);
      assert.equal(lines.length, 1_500, `${docFormat}: one line an item`);
      for (const line of lines) {
        const item = JSON.parse(line);
        assert.deepEqual(item.doc, data.doc(item.id));
      }
    } finally {
      await cleanup(run);
    }
  }
});

Deno.test("live: a document answering for another id is that item's error, never its document", async () => {
  for (
    const [label, options] of [
      ["GET", { includeDocs: false, bulkGet: false, wrongIdRate: 0.1 }],
      ["_bulk_get", { includeDocs: false, wrongBulkGet: true }],
    ] as const
  ) {
    const data = new RegistryData(await names(1_000, 21));
    const run = await crawlLive(data, options, { docs: true });
    try {
      using kv = await Deno.openKv(run.kvPath);
      const [crawl] = await listCrawls(kv);
      let errors = 0;
      for await (const it of iterateItems(kv, crawl.id)) {
        if (it.doc) assert.equal(JSON.parse(it.doc)._id, it.id, `${label}: ${it.id}`);
        else {
          errors++;
          assert.match(it.error!.reason, /the answer is the document of/);
        }
      }
      assert.ok(errors > 0, `${label}: ${errors} errors`);
      assert.equal(run.res.report.docErrors, errors);
    } finally {
      await cleanup(run);
    }
  }
});

Deno.test("live: error bodies and over-size answers are asked again like a 5xx", async () => {
  const keys = await names(6_000, 22);
  // A tenth of all requests answer 200 {"error": ...}.
  const run = await crawlLive(new RegistryData(keys), {
    faultRate: 0.1,
    faults: ["error-body"],
  }, { source: { clock: new JumpingClock() } });
  try {
    assert.equal(run.res.report.status, "done");
    assert.equal(run.res.report.itemsStored, 6_000);
  } finally {
    await cleanup(run);
  }
  // The first probe of one row answers gigabytes (a gzip bomb): asked again, not fatal.
  let bombed = false;
  const bomb: typeof fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (!bombed && url.includes("limit=1&") || !bombed && url.endsWith("limit=1")) {
      bombed = true;
      const body = new ReadableStream({
        pull: (c) => c.enqueue(new Uint8Array(65_536).fill(0x20)),
      });
      return Promise.resolve(
        new Response(body, { headers: { "content-type": "application/json" } }),
      );
    }
    return fetch(input, init);
  };
  const again = await crawlLive(new RegistryData(keys), {}, {
    source: { fetch: bomb, clock: new JumpingClock() },
  });
  try {
    assert.ok(bombed);
    assert.equal(again.res.report.status, "done");
    assert.equal(again.res.report.itemsStored, 6_000);
  } finally {
    await cleanup(again);
  }
});

Deno.test("live: a delete killed half-way never leaves a crawl that says done", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = new RegistryData(await names(3_000, 23));
  const source = new MemorySource(data, { maxPage: 500 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 2 }));
  await finishAll(kv, source, id);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  // Records, not only blocks: more keys than one delete batch.
  await writeItems(kv, id, data.keys.slice(0, 900).map((k) => ({ id: `${k}~rec`, rev: "1-a" })));
  // The process dies after two delete batches.
  let commits = 0;
  const dying = new Proxy(kv, {
    get(target, prop) {
      if (prop !== "atomic") return Reflect.get(target, prop, target).bind?.(target);
      return () => {
        const op = target.atomic();
        const commit = op.commit.bind(op);
        op.commit = () => {
          if (++commits > 3) return Promise.reject(new Error("killed"));
          return commit();
        };
        return op;
      };
    },
  }) as Deno.Kv;
  await assert.rejects(() => deleteCrawl(dying, id, { clock: SYSTEM_CLOCK }), /killed/);
  const st = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
  assert.equal(st.status, "deleting", "nothing says done");
  await assert.rejects(() => crawlItemsPage(kv, id, { limit: 10 }), /being deleted/);
  await assert.rejects(
    () => exportNdjson(kv, id, new WritableStream()),
    /being deleted; its items cannot be read/,
  );
  // Any process finishes it: the watchdog here.
  await watchdog(watchdogCtx(kv, dispatcher));
  assert.equal((await getCrawl(kv, id)).value, null);
  assert.equal((await Array.fromAsync(kv.list({ prefix: [] }))).length, 0, "nothing left");
});

Deno.test("live: ids of any length are crawled; one too long to keep is its item's error, cut and flagged", async () => {
  const short = await names(600, 24);
  // Long ids spread through the key space, up to 70,000 characters (a 140 KB JSON row).
  const long = [5_000, 12_000, 20_000, 30_000, 70_000].flatMap((n, i) => [
    `${"bdfhk"[i]}${"x".repeat(n)}`,
    `${"mpsvz"[i]}-${"é".repeat(n >> 1)}`,
  ]);
  const keys = sortKeys([...short, ...long]);
  for (
    const [label, options] of [["full pages", {}], ["pages cut to 3 rows", {
      silentCap: 3,
    }]] as const
  ) {
    for (const docs of [false, true]) {
      const data = new RegistryData([...keys]);
      const run = await crawlLive(data, options, { docs, maxPage: 7, shards: 5 });
      try {
        assert.equal(run.res.report.status, "done", label);
        assert.equal(run.res.report.verification?.status, "exact");
        using kv = await Deno.openKv(run.kvPath);
        const [crawl] = await listCrawls(kv);
        const seen: string[] = [];
        for await (const it of iterateItems(kv, crawl.id)) {
          if (it.idLength === undefined) {
            seen.push(it.id);
            if (docs) assert.equal(JSON.parse(it.doc!)._id, it.id);
            continue;
          }
          assert.equal(it.id.length, MAX_STORED_ID_UNITS);
          assert.match(it.error!.reason, /longer than the 16000 an item keeps/);
          const whole = long.filter((k) => k.length === it.idLength && k.startsWith(it.id));
          assert.equal(whole.length, 1, "the cut id names one id");
          seen.push(whole[0]);
        }
        assert.deepEqual(sortKeys(seen), keys, `${label}, docs ${docs}: every id once`);
        for (const s of (await crawlStatus(kv, crawl.id, { clock: SYSTEM_CLOCK })).shards) {
          assert.ok((s.start?.length ?? 0) <= LONG_KEY_UNITS, "no long id is a shard bound");
        }
      } finally {
        await cleanup(run);
      }
    }
  }
});
