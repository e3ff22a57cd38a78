/**
 * A real CouchDB-compatible peer no one here wrote: pouchdb-server (in memory), installed from npm
 * by .ci/run. Its `offset` is not a rank and its unbounded listings drop ids whose first character is
 * above U+00FF; the planner must notice the first and fall back, the source must bound open ends,
 * and the crawl must still hold every document exactly once. Skipped locally without the server,
 * never in CI.
 */
import { SYSTEM_CLOCK } from "../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";
import { runLocalCrawl } from "../../lib/cli/local_crawl.ts";
import { planShards } from "../../lib/plan/planner.ts";
import { listCrawls } from "../../lib/engine/store/mod.ts";
import { exportText, randomKeys, runTask } from "../helpers.ts";
import { havePouchdb, startPouchdb } from "../optional_tools.ts";

const have = havePouchdb;

// BMP letters beyond U+00FF, U+E000..U+FFFF and astral ones: pouchdb collates ids by UTF-16 code
// unit, where astral characters sort before U+E000..U+FFFF (by code point, after).
const CHARS = [
  "a",
  "b",
  "k",
  "z",
  "-",
  "@",
  "/",
  "é",
  "ж",
  "中",
  "文",
  "\u{1f600}",
  "\u{10400}",
  "\ue000",
  "\uff21",
  "\ufffd",
  "0",
];

Deno.test({
  name: "peer: pouchdb-server is planned by fallback and crawled completely, docs included",
  ignore: !have,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const { base, stop } = await startPouchdb(dir);
    try {
      const db = `${base}/peer`;
      assert.equal(
        await fetch(db, { method: "PUT" }).then((r) => (r.body?.cancel(), r.status)),
        201,
      );
      const ids = randomKeys(3000, CHARS, 81, 6).concat([
        "@scope/name",
        "中文包",
        "\u{1f600}x",
        "\uffff\uffffz", // below the end key pouchdb is listed with (three U+FFFF)
      ]);
      const unique = [...new Set(ids)];
      for (let i = 0; i < unique.length; i += 500) {
        const docs = unique.slice(i, i + 500).map((id) => ({ _id: id, name: id, n: i }));
        const res = await fetch(`${db}/_bulk_docs`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ docs }),
        });
        assert.equal(res.status, 201);
        await res.body?.cancel();
      }
      // The quirk, seen directly: an unbounded listing misses ids above U+00FF.
      const raw = await (await fetch(`${db}/_all_docs`)).json();
      assert.equal(raw.total_rows, unique.length);
      assert.ok(raw.rows.length < unique.length, "unbounded listing drops some ids");
      // Planning falls back (offsets are not ranks) and stays exact.
      const source = new CouchSource(db, { maxPage: 200 });
      const plan = await planShards(source, 7);
      assert.notEqual(plan.method, "rank");
      assert.equal(plan.total, unique.length);
      const lo = Math.floor(unique.length / 7);
      assert.ok(plan.shards.every((s) => s.items === lo || s.items === lo + 1));
      // The crawl, documents included.
      const res = await runLocalCrawl({
        kvPath: `${dir}/p.kv`,
        spec: {
          source: db,
          docsUrl: null,
          shards: 7,
          docs: true,
          concurrency: 8,
          maxPage: 200,
          rebalance: true,
        },
        sourceUrl: db,
      });
      assert.equal(res.report.status, "done");
      assert.equal(res.report.itemsStored, unique.length);
      // The export holds every id once, in the server's own (UTF-16) order, each with its document.
      using kv = await Deno.openKv(`${dir}/p.kv`);
      const [crawl] = await listCrawls(kv);
      assert.equal(crawl.idOrder, "utf16");
      const { text } = await exportText(kv, crawl.id);
      const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l));
      const byUnits = [...unique].sort((a, b) => a < b ? -1 : a > b ? 1 : 0);
      assert.deepEqual(lines.map((l) => l.id), byUnits);
      for (const l of lines) assert.equal(l.doc._id, l.id);
      assert.ok(unique.some((id) => /^[\ue000-\uffff]/.test(id)), "ids starting in U+E000..U+FFFF");
      assert.ok(unique.some((id) => /^[\ud800-\udbff]/.test(id)), "ids starting astral");
    } finally {
      await stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "peer: every key shown is pouchdb-server's own id (plan JSON and table, locate, status)",
  ignore: !have,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const { base, stop } = await startPouchdb(dir);
    try {
      const db = `${base}/shown`;
      await fetch(db, { method: "PUT" }).then((r) => r.body?.cancel());
      // Astral ids and U+E000..U+FFFF ones in runs long enough to hold shard boundaries.
      const ids = [
        ...Array.from({ length: 400 }, (_, i) => `\u{1f600}${String(i).padStart(5, "0")}`),
        ...Array.from({ length: 400 }, (_, i) => `\uff21${String(i).padStart(5, "0")}`),
        ...Array.from({ length: 200 }, (_, i) => `pkg${String(i).padStart(4, "0")}`),
      ];
      const res = await fetch(`${db}/_bulk_docs`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ docs: ids.map((id) => ({ _id: id })) }),
      });
      assert.equal(res.status, 201);
      await res.body?.cancel();
      const known = new Set(ids);
      const byUnits = [...ids].sort((a, b) => a < b ? -1 : a > b ? 1 : 0);
      const plan = await runTask("plan", ["--source", db, "--shards", "5", "--json"]);
      assert.equal(plan.code, 0, plan.stdout);
      const out = JSON.parse(plan.stdout);
      const bounds: string[] = out.shards.slice(1).map((s: { start: string }) => s.start);
      for (const b of bounds) assert.ok(known.has(b), `${JSON.stringify(b)} is a registry id`);
      assert.ok(bounds.some((b) => b.startsWith("\u{1f600}")), "an astral boundary");
      assert.deepEqual(
        bounds,
        bounds.map((b) => byUnits.indexOf(b)).sort((a, b) => a - b)
          .map((i) => byUnits[i]),
        "in the registry's order",
      );
      assert.equal(out.idOrder, "utf16");
      // The table shows the same ids; a plan file read back cuts the same crawl.
      const table = await runTask("plan", [
        "--source",
        db,
        "--shards",
        "5",
        "--out",
        `${dir}/p.json`,
      ]);
      assert.equal(table.code, 0, table.stdout);
      assert.ok(table.stdout.includes(JSON.stringify(bounds[0]).slice(0, 20)), table.stdout);
      const crawl = await runTask("crawl", [
        "--source",
        db,
        "--plan",
        `${dir}/p.json`,
        "--kv",
        `${dir}/c.kv`,
        "--shards",
        "5",
      ]);
      assert.equal(crawl.code, 0, crawl.stdout + crawl.stderr);
      using kv = await Deno.openKv(`${dir}/c.kv`);
      const [record] = await listCrawls(kv);
      const { crawlStatus } = await import("../../lib/engine/crawl/reads/status.ts");
      const st = await crawlStatus(kv, record.id, { clock: SYSTEM_CLOCK });
      assert.deepEqual(
        st.shards.map((s) => s.start).filter((s) => s !== null).sort(),
        [...bounds].sort(),
      );
      assert.equal(st.itemsStored, ids.length);
      // locate: an astral id asked by the user is found as itself.
      const astral = ids[123];
      const located = await runTask("locate", ["--source", db, "--key", astral, "--json"]);
      assert.equal(located.code, 0, located.stderr);
      const place = JSON.parse(located.stdout);
      assert.equal(place.key, astral);
      assert.equal(place.present, true);
      assert.equal(place.next, astral);
      assert.equal(place.rank, byUnits.indexOf(astral));
      const ranked = await runTask("locate", ["--source", db, "--rank", "123", "--json"]);
      assert.equal(JSON.parse(ranked.stdout).located[0].key, byUnits[123]);
    } finally {
      await stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
