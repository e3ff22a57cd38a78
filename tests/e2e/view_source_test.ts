/**
 * Views as sources, over the project's registry and its `pkg/by_shape` view (keys of every JSON
 * type, long runs of equal keys): listings cut inside runs of equal keys, exact plans, locate, and
 * whole crawls (rows, and documents) that hold every row once.
 */
import assert from "node:assert/strict";
import { runLocalCrawl } from "../../lib/cli/local_crawl.ts";
import { buildSpec } from "../../lib/base/spec.ts";
import { keysAtRanks, percentileRank } from "../../lib/plan/locate.ts";
import { compareKeys } from "../../lib/plan/keys.ts";
import { planShards } from "../../lib/plan/planner.ts";
import { compareJson, decodeViewRow, encodeViewRow } from "../../lib/plan/view/mod.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { emit, VIEW_NAME, viewRowsOf } from "../../lib/sim/registry/registry_view.ts";
import { bundledNames, prefixNear, syntheticNames } from "../../lib/sim/names.ts";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";
import { iterateItems } from "../../lib/engine/items/item_read.ts";
import { listCrawls } from "../../lib/engine/store/mod.ts";
import { exportText, taskArgs } from "../helpers.ts";
import { FatalError } from "../../lib/base/errors.ts";

async function registry(size: number, options: Parameters<typeof startRegistry>[1] = {}) {
  const data = new RegistryData(syntheticNames(await bundledNames(), size, { seed: 9 }));
  const reg = await startRegistry(data, options);
  const truth = viewRowsOf(data, options.viewCollation).map((r) =>
    encodeViewRow(r, options.viewCollation)
  );
  return { reg, data, truth };
}

Deno.test("view: the registry's view mixes every JSON type with long runs of equal keys", async () => {
  const { reg, truth } = await registry(5000);
  try {
    const sorted = [...truth].sort(compareKeys);
    assert.deepEqual(sorted, truth, "collation order = encoded order");
    const keys = truth.map((t) => decodeViewRow(t).key);
    const types = new Set(
      keys.map((k) => Array.isArray(k) ? "array" : k === null ? "null" : typeof k),
    );
    assert.deepEqual([...types].sort(), ["array", "boolean", "null", "number", "object", "string"]);
    let longest = 1;
    for (let i = 1, run = 1; i < keys.length; i++) {
      run = compareJson(keys[i - 1], keys[i]) === 0 ? run + 1 : 1;
      longest = Math.max(longest, run);
    }
    assert.ok(longest > 500, `a run of ${longest} equal keys`);
    assert.ok(truth.length > 5000, `${truth.length} rows from 5000 documents`);
    // Documents emitting one key twice: two rows of one pair, told apart by their ordinal.
    assert.ok(truth.some((t) => decodeViewRow(t).dup === 1));
    assert.equal(new Set(truth).size, truth.length);
  } finally {
    await reg.close();
  }
});

for (const ignoresDocid of [false, true]) {
  const like = ignoresDocid ? " (docids ignored, like pouchdb-server)" : "";
  Deno.test(`view: listings start, end and turn inside runs of equal keys${like}`, async () => {
    const { reg, truth } = await registry(3000, { viewIgnoresDocid: ignoresDocid });
    try {
      const src = new CouchSource(reg.url, { view: VIEW_NAME, maxPage: 50 });
      const dup = truth.findIndex((t) => decodeViewRow(t).dup === 1);
      for (const k of [0, 1, 777, 1500, dup - 1, dup, dup + 1, truth.length - 3]) {
        const up = await src.list({ start: truth[k], limit: 5 });
        if (!ignoresDocid) assert.equal(up.offset, k);
        assert.deepEqual(up.rows.map((r) => r.id), truth.slice(k, k + 5));
        const bounded = await src.list({ start: truth[k], end: truth[k + 2], limit: 5 });
        assert.deepEqual(bounded.rows.map((r) => r.id), truth.slice(k, k + 2));
        const down = await src.list({ start: truth[k], descending: true, limit: 3 });
        assert.deepEqual(
          down.rows.map((r) => r.id),
          truth.slice(Math.max(0, k - 2), k + 1).reverse(),
        );
        // A string between two rows (what a search makes up): its rank is the rows before it.
        const between = truth[k] + "\u0000";
        const after = await src.list({ start: between, limit: 1 });
        if (!ignoresDocid) assert.equal(after.offset, k + 1);
        assert.deepEqual(after.rows.map((r) => r.id), truth.slice(k + 1, k + 2));
        const downFrom = await src.list({ start: between, descending: true, limit: 2 });
        assert.equal(downFrom.rows[0].id, truth[k]);
      }
      // Pages of 50 through the whole view, each from the row after the last: every row once.
      const paged: string[] = [];
      for (let from: string | null = null;;) {
        const page = await src.list({ start: from, limit: 50 });
        const rows = page.rows.map((r) => r.id);
        paged.push(...(from === null ? rows : rows.slice(1)));
        if (rows.length < 50) break;
        from = rows.at(-1)!;
      }
      assert.deepEqual(paged, truth);
      const total = (await src.list({ limit: 1 })).total;
      assert.equal(total, truth.length);
      const past = await src.list({ start: "H", limit: 3 });
      assert.deepEqual([past.offset, past.rows.length], [total, 0]);
    } finally {
      await reg.close();
    }
  });
}

Deno.test("view: plans are exactly balanced and locate finds the exact median row", async () => {
  const { reg, truth } = await registry(20_000);
  try {
    const src = new CouchSource(reg.url, { view: VIEW_NAME, maxPage: 1000 });
    const plan = await planShards(src, 13);
    assert.equal(plan.method, "rank");
    assert.equal(plan.total, truth.length);
    plan.shards.forEach((s, i) => {
      const lo = Math.floor((i * truth.length) / 13);
      const hi = Math.floor(((i + 1) * truth.length) / 13);
      assert.equal(s.items, hi - lo, `shard ${i}`);
      assert.equal(s.start, i === 0 ? null : truth[lo]);
    });
    const cutsInRuns = plan.shards.slice(1).filter((sh) => {
      const at = truth.indexOf(sh.start!);
      return compareJson(decodeViewRow(truth[at - 1]).key, decodeViewRow(truth[at]).key) === 0;
    }).length;
    assert.ok(cutsInRuns > 0, "some cuts fall inside a run of equal keys (cut by docid)");
    const found = await keysAtRanks(src, (t) => [percentileRank(50, t)]);
    assert.equal(found.keys[0], truth[percentileRank(50, truth.length)]);
  } finally {
    await reg.close();
  }
});

Deno.test("view: a run that changes while it is listed by skip is asked again, never listed wrong", async () => {
  const data = new RegistryData(syntheticNames(await bundledNames(), 3000, { seed: 9 }));
  const reg = await startRegistry(data, { viewIgnoresDocid: true });
  try {
    const rows = viewRowsOf(data);
    // The middle of the run of `null` keys (any document may emit it: a tenth of them do).
    const first = rows.findIndex((r) => r.key === null);
    const best = { at: first, len: rows.filter((r) => r.key === null).length };
    assert.ok(best.len > 300, `a run of ${best.len}`);
    const start = encodeViewRow(rows[best.at + 150]);
    // A document emitting that key, with a docid below the rows listed first: inserted while the
    // listing goes on by skip, it shifts every position after it.
    const key = rows[best.at].key;
    let newId = "";
    for (let n = 0; !newId && n < 100_000; n++) {
      const id = `!${n.toString(36)}`;
      if (data.rev(id) === undefined && emit(id).some((r) => compareJson(r.key, key) === 0)) {
        newId = id;
      }
    }
    assert.ok(newId, "a document emitting null");
    let inserted = false;
    const hook: typeof fetch = (input, init) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      if (!inserted && url.pathname.includes("/_view/") && url.searchParams.has("skip")) {
        inserted = true;
        data.put(newId);
      }
      return fetch(input, init);
    };
    const src = new CouchSource(reg.url, { view: VIEW_NAME, maxPage: 100, fetch: hook });
    await assert.rejects(
      () => src.list({ start, limit: 100 }),
      /the view changed while it was listed/,
    );
    assert.ok(inserted);
    // Asked again, the page is exact for the view as it is now.
    const now = viewRowsOf(data).map((r) => encodeViewRow(r));
    const at = now.indexOf(start);
    const page = await src.list({ start, limit: 100 });
    assert.deepEqual(page.rows.map((r) => r.id), now.slice(at, at + 100));
  } finally {
    await reg.close();
  }
});

Deno.test("view: on a server that ignores docids, plans, locate and crawls stay exact", async () => {
  const { reg, truth } = await registry(6000, { viewIgnoresDocid: true, latencyMs: 0 });
  const dir = await Deno.makeTempDir();
  try {
    const src = new CouchSource(reg.url, { view: VIEW_NAME, maxPage: 200 });
    for (const n of [7, 13]) {
      const plan = await planShards(src, n);
      assert.notEqual(plan.method, "rank", "offset is the skip there, not a rank");
      assert.equal(plan.total, truth.length);
      plan.shards.forEach((sh, i) => {
        const lo = Math.floor((i * truth.length) / n);
        assert.equal(sh.items, Math.floor(((i + 1) * truth.length) / n) - lo, `shard ${i}/${n}`);
        assert.equal(sh.start, i === 0 ? null : truth[lo]);
      });
    }
    const ranks = [0, 1, 999, percentileRank(50, truth.length), truth.length - 1];
    const found = await keysAtRanks(src, () => ranks);
    assert.deepEqual(found.keys, ranks.map((r) => truth[r]));
    for (const docs of [false, true]) {
      const kvPath = `${dir}/i${docs}.kv`;
      const res = await runLocalCrawl({
        kvPath,
        spec: buildSpec({ source: reg.url, shards: 7, docs, view: VIEW_NAME, maxPage: 200 }),
        sourceUrl: reg.url,
        log: () => {},
      });
      assert.equal(res.report.status, "done");
      using kv = await Deno.openKv(kvPath);
      const [crawl] = await listCrawls(kv);
      const ids: string[] = [];
      for await (const it of iterateItems(kv, crawl.id)) {
        ids.push(it.id);
        if (docs) assert.equal(JSON.parse(it.doc!)._id, decodeViewRow(it.id).docid);
      }
      assert.deepEqual(ids, truth, "every row once, in view order");
    }
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("view: a view in raw collation (Erlang term order) is planned and crawled exactly", async () => {
  const { reg, truth } = await registry(6000, { viewCollation: "raw", latencyMs: 0 });
  const dir = await Deno.makeTempDir();
  try {
    // Raw order: numbers first, strings last (the typed order has null first, objects last).
    assert.equal(typeof decodeViewRow(truth[0]).key, "number");
    assert.equal(typeof decodeViewRow(truth.at(-1)!).key, "string");
    const src = new CouchSource(reg.url, { view: VIEW_NAME, maxPage: 200 });
    const plan = await planShards(src, 7);
    assert.equal(plan.method, "rank");
    plan.shards.forEach((sh, i) => {
      const lo = Math.floor((i * truth.length) / 7);
      assert.equal(sh.start, i === 0 ? null : truth[lo], `shard ${i}`);
      assert.equal(sh.items, Math.floor(((i + 1) * truth.length) / 7) - lo, `shard ${i}`);
    });
    const kvPath = `${dir}/raw.kv`;
    const res = await runLocalCrawl({
      kvPath,
      spec: buildSpec({ source: reg.url, shards: 7, view: VIEW_NAME, maxPage: 200 }),
      sourceUrl: reg.url,
      log: () => {},
    });
    assert.equal(res.report.status, "done");
    using kv = await Deno.openKv(kvPath);
    const [crawl] = await listCrawls(kv);
    const ids: string[] = [];
    for await (const it of iterateItems(kv, crawl.id)) ids.push(it.id);
    assert.deepEqual(ids, truth, "every row once, in raw order");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("view: CouchDB's default (ICU) collation is refused, saying how to declare raw", async () => {
  const { reg } = await registry(500, { asCouchdb: true });
  try {
    const src = new CouchSource(reg.url, { view: VIEW_NAME });
    await assert.rejects(
      () => src.list({ limit: 1 }),
      (err: Error) =>
        err instanceof FatalError && /ICU/.test(err.message) &&
        err.message.includes(`"options": {"collation": "raw"}`),
    );
    const missing = new CouchSource(reg.url, { view: "nope/v" });
    await assert.rejects(() => missing.list({ limit: 1 }), /no design document _design\/nope/);
  } finally {
    await reg.close();
  }
  // Declared raw, the same server is crawled in raw order.
  const raw = await registry(500, {
    asCouchdb: true,
    viewCollation: "raw",
  });
  try {
    const page = await new CouchSource(raw.reg.url, { view: VIEW_NAME }).list({ limit: 3 });
    assert.deepEqual(page.rows.map((r) => r.id), raw.truth.slice(0, 3));
  } finally {
    await raw.reg.close();
  }
});

Deno.test("view: crawls hold every row once, with documents; export writes rows", async () => {
  const { reg, data, truth } = await registry(6000, { latencyMs: 0 });
  const dir = await Deno.makeTempDir();
  try {
    for (const docs of [false, true]) {
      const kvPath = `${dir}/v${docs}.kv`;
      const res = await runLocalCrawl({
        kvPath,
        spec: buildSpec({ source: reg.url, shards: 7, docs, view: VIEW_NAME, maxPage: 200 }),
        sourceUrl: reg.url,
        log: () => {},
      });
      assert.equal(res.report.status, "done");
      assert.equal(res.report.itemsStored, truth.length);
      const kv = await Deno.openKv(kvPath);
      try {
        const [crawl] = await listCrawls(kv);
        assert.equal(crawl.view, VIEW_NAME);
        const ids: string[] = [];
        for await (const it of iterateItems(kv, crawl.id)) {
          ids.push(it.id);
          if (docs) {
            const doc = JSON.parse(it.doc!);
            assert.equal(doc._id, decodeViewRow(it.id).docid);
          }
        }
        assert.deepEqual(ids, truth, "every row once, in view order");
        const { text } = await exportText(kv, crawl.id);
        const lines = text.trim().split("\n");
        const first = JSON.parse(lines[0]);
        const row = decodeViewRow(truth[0]);
        assert.deepEqual([first.key, first.id, first.value], [
          row.key,
          row.docid,
          row.docid.length,
        ]);
        assert.equal(lines.length, truth.length);
      } finally {
        kv.close();
      }
    }
    assert.ok(data.size === 6000);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("view: a straggling shard of a view is split inside a run of equal keys, rows still once", async () => {
  const names = syntheticNames(await bundledNames(), 4000, { seed: 9 });
  const hot = prefixNear(names, 300);
  const { reg, truth } = await registry(4000, {
    includeDocs: false,
    bulkGet: false,
    docLatencyMs: 1,
    hotPrefix: hot.prefix,
    hotMs: 60,
  });
  const dir = await Deno.makeTempDir();
  try {
    const kvPath = `${dir}/split.kv`;
    const res = await runLocalCrawl({
      kvPath,
      spec: buildSpec({ source: reg.url, shards: 6, docs: true, concurrency: 4, view: VIEW_NAME }),
      sourceUrl: reg.url,
      log: () => {},
    });
    assert.equal(res.report.status, "done");
    assert.ok(res.report.splits.length > 0, "the straggler was split");
    const inRun = res.report.splits.filter((sp) => {
      const i = truth.indexOf(sp.at);
      return i > 0 && compareJson(decodeViewRow(truth[i - 1]).key, decodeViewRow(sp.at).key) === 0;
    });
    assert.ok(inRun.length > 0, "a split cut between two rows of one key (by docid)");
    assert.equal(res.report.itemsStored, truth.length);
    const kv = await Deno.openKv(kvPath);
    try {
      const [crawl] = await listCrawls(kv);
      const ids: string[] = [];
      for await (const it of iterateItems(kv, crawl.id)) ids.push(it.id);
      assert.deepEqual(ids, truth);
    } finally {
      kv.close();
    }
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

async function cli(args: string[]) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...taskArgs(args[0].replace(/^tasks\/|\.ts$/g, "")), ...args.slice(1)],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr).trim() };
}

Deno.test("view: `plan --view` and `locate --view` from the command line", async () => {
  const { reg, truth } = await registry(8000);
  try {
    const plan = await cli([
      "tasks/plan.ts",
      "--source",
      reg.url,
      "--view",
      VIEW_NAME,
      "--shards",
      "9",
      "--json",
    ]);
    assert.equal(plan.code, 0, plan.stderr);
    const p = JSON.parse(plan.stdout);
    assert.equal(p.total, truth.length);
    assert.equal(
      p.shards.reduce((a: number, s: { items: number }) => a + s.items, 0),
      truth.length,
    );
    assert.ok(p.shards.every((s: { items: number }) => Math.abs(s.items - truth.length / 9) < 1));
    assert.deepEqual(p.rows[1].start, {
      key: decodeViewRow(p.shards[1].start).key,
      docid: decodeViewRow(p.shards[1].start).docid,
    });
    const median = await cli([
      "tasks/locate.ts",
      "--source",
      reg.url,
      "--view",
      VIEW_NAME,
      "--percentile",
      "50",
      "--json",
    ]);
    assert.equal(median.code, 0, median.stderr);
    const m = JSON.parse(median.stdout);
    assert.deepEqual(m.located[0].key, decodeViewRow(truth[percentileRank(50, truth.length)]));
    const key = await cli([
      "tasks/locate.ts",
      "--source",
      reg.url,
      "--view",
      VIEW_NAME,
      "--key",
      "true",
      "--json",
    ]);
    const k = JSON.parse(key.stdout);
    assert.equal(k.rank, truth.findIndex((t) => decodeViewRow(t).key === true));
    assert.equal(k.present, true);
    const bad = await cli([
      "tasks/plan.ts",
      "--source",
      reg.url,
      "--view",
      "no slash",
      "--shards",
      "2",
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^error: --view must be ddoc\/view/);
    const missing = await cli([
      "tasks/plan.ts",
      "--source",
      reg.url,
      "--view",
      "pkg/nope",
      "--shards",
      "2",
    ]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /^error: .*_design\/pkg has no view "nope"/);
  } finally {
    await reg.close();
  }
});

Deno.test("view: the README's demo view crawl ends done, every row exported once", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const kv = `${dir}/view.kv`;
    const crawl = await cli(["crawl", "--view", VIEW_NAME, "--kv", kv]);
    assert.equal(crawl.code, 0, crawl.stderr);
    const data = new RegistryData(await bundledNames());
    const truth = viewRowsOf(data);
    assert.match(
      crawl.stdout + crawl.stderr,
      new RegExp(`done: ${truth.length.toLocaleString("en-US")} items`),
    );
    const out = await cli(["export", "--kv", kv]);
    assert.equal(out.code, 0, out.stderr);
    const lines = out.stdout.trimEnd().split("\n");
    assert.equal(lines.length, truth.length);
    for (const i of [0, 1, 1000, truth.length >> 1, truth.length - 1]) {
      const l = JSON.parse(lines[i]);
      assert.deepEqual([l.key, l.id], [truth[i].key, truth[i].docid], `row ${i}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
