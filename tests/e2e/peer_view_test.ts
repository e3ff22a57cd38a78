/**
 * A view on a real CouchDB-compatible server no one here wrote: pouchdb-server (in memory),
 * installed from npm by .ci/run. Its views ignore `startkey_docid`/`endkey_docid` (a listing starts
 * at a key's first row), its `offset` is the `skip`, and its numbers come back through a lossy
 * encoding. The view has keys of every JSON type, runs of thousands of equal keys (longer than a
 * page), documents emitting no row, one, or several (the same key twice among them: two rows of one
 * pair), and a last key shared by several rows. Plans, locate and crawls (rows, and documents) must
 * be exact, and the export must hold every row once in the server's own order. Skipped locally
 * without the server, never in CI.
 */
import assert from "node:assert/strict";
import { keysAtRanks } from "../../lib/plan/locate.ts";
import { planShards } from "../../lib/plan/planner.ts";
import { compareJson, encodeViewRow, type Json } from "../../lib/plan/view/mod.ts";
import { prng } from "../../lib/sim/names.ts";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";
import { okJson, runTaskIn } from "../helpers.ts";
import { havePouchdb, startPouchdb } from "../optional_tools.ts";

const have = havePouchdb;

const VIEW = "t/v";
// Letters of the BMP below and above U+E000 and astral ones: pouchdb orders strings and docids by
// UTF-16 code unit, so astral characters sort before U+E000..U+FFFF (see docs/design.md, "Views").
const CHARS = ["a", "b", "k", "z", "-", "é", "ж", "中", "\u{1f600}", "\ue000", "\uff21", "0", "A"];

/** Documents whose `keys` the view emits, one row each (see the module comment). */
function documents(n: number): { _id: string; n: number; keys: Json[] }[] {
  const rand = prng(7);
  const pick = <T>(xs: T[]) => xs[Math.floor(rand() * xs.length)];
  const str = () => Array.from({ length: 1 + Math.floor(rand() * 3) }, () => pick(CHARS)).join("");
  const int = (m: number) => Math.floor(rand() * m);
  const key = (): Json => {
    const r = rand();
    if (r < 0.2) return "hot";
    if (r < 0.3) return 42;
    if (r < 0.39) return pick([null, false, true]);
    if (r < 0.54) return pick([int(1000) - 500, int(100) / 7, -398, 1e21, -0.5]);
    if (r < 0.74) return str();
    if (r < 0.87) return pick<Json>([[str(), int(3)], [], [int(5)]]);
    return pick<Json>([{ a: int(3) }, { b: str() }, {}]);
  };
  return Array.from({ length: n }, (_, i) => {
    const r = rand();
    const keys: Json[] = r < 0.08
      ? []
      : r < 0.63
      ? [key()]
      : Array.from({ length: 2 + int(3) }, key);
    if (keys.length > 0 && rand() < 0.05) keys.push(keys[0]); // one pair, two rows
    // The greatest key (objects sort last; "zz" after every other object key), several rows.
    return {
      _id: `${str()}${i.toString(36)}`,
      n: i,
      keys: i % 4000 === 1 ? [{ zz: "last" }] : keys,
    };
  });
}

/** A view row as the server lists it. */
interface Listed {
  key: Json;
  id: string;
  value: unknown;
}

/** The whole view in the server's own order (pages by `skip`, no start key), and its encodings. */
async function reference(view: string): Promise<{ rows: Listed[]; encoded: string[] }> {
  const rows: Listed[] = [];
  for (let skip = 0;; skip += 1000) {
    const page = await okJson(`${view}?limit=1000&skip=${skip}`);
    rows.push(...page.rows);
    if (page.rows.length < 1000) {
      assert.equal(rows.length, page.total_rows, "a listing by skip holds every row");
      break;
    }
  }
  const encoded: string[] = [];
  let dup = 0;
  rows.forEach((r, i) => {
    const p = rows[i - 1];
    dup = p && p.id === r.id && compareJson(p.key, r.key) === 0 ? dup + 1 : 0;
    encoded.push(encodeViewRow({ key: r.key, docid: r.id, dup }, "pouch"));
  });
  return { rows, encoded };
}

Deno.test({
  name: "peer: a view on pouchdb-server (docids ignored, every type, long runs) is exact",
  ignore: !have,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const { base, stop } = await startPouchdb(dir);
    const db = `${base}/pv`;
    try {
      await okJson(db, { method: "PUT" });
      const docs = documents(12_000);
      for (let i = 0; i < docs.length; i += 1000) {
        await okJson(`${db}/_bulk_docs`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ docs: docs.slice(i, i + 1000) }),
        });
      }
      const map =
        "function (doc) { if (doc.keys) doc.keys.forEach(function (k) { emit(k, doc.n); }); }";
      await okJson(`${db}/_design/t`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ views: { v: { map } } }),
      });
      const truth = await reference(`${db}/_design/t/_view/v`);
      const total = truth.rows.length;
      // What the view is made of: the test means nothing unless these hold.
      assert.ok(total > 20_000, `${total} rows`);
      let longest = 1;
      for (let i = 1, run = 1; i < total; i++) {
        run = compareJson(truth.rows[i - 1].key, truth.rows[i].key) === 0 ? run + 1 : 1;
        longest = Math.max(longest, run);
      }
      assert.ok(longest > 2000, `a run of ${longest} equal keys`);
      assert.ok(truth.encoded.some((e, i) => e.endsWith("\u000000000001") && i > 0));
      assert.equal(new Set(truth.encoded).size, total);
      const strings = truth.rows.map((r) => r.key).filter((k) => typeof k === "string");
      assert.ok(
        strings.some((k) => /^[\ue000-\uffff]/.test(k as string)),
        "keys in U+E000..U+FFFF",
      );
      assert.ok(strings.some((k) => /^[\ud800-\udbff]/.test(k as string)), "astral keys");
      assert.deepEqual(truth.rows.at(-1)!.key, { zz: "last" });
      assert.deepEqual(truth.rows.at(-2)!.key, { zz: "last" });

      // Plans and locate, in process.
      const source = new CouchSource(db, { view: VIEW, maxPage: 300 });
      for (const n of [7, 13, 56]) {
        const plan = await planShards(source, n);
        assert.equal(plan.total, total);
        plan.shards.forEach((s, i) => {
          const lo = Math.floor((i * total) / n);
          assert.equal(s.start, i === 0 ? null : truth.encoded[lo], `shard ${i} of ${n}`);
          assert.equal(s.items, Math.floor(((i + 1) * total) / n) - lo, `shard ${i} of ${n}`);
        });
      }
      const ranks = [0, 1, 4321, Math.floor(total / 2), total - 2, total - 1];
      const found = await keysAtRanks(source, () => ranks);
      assert.deepEqual(found.keys, ranks.map((r) => truth.encoded[r]));

      // Crawls from the command line, rows and documents; the export is the server's listing.
      for (const docs of [false, true]) {
        const kv = `${dir}/c${docs}.kv`;
        const crawl = await runTaskIn([
          "crawl",
          "--source",
          db,
          "--view",
          VIEW,
          "--shards",
          "13",
          "--max-page",
          "300",
          "--kv",
          kv,
          ...(docs ? ["--docs"] : []),
        ], dir);
        assert.equal(crawl.code, 0, crawl.stderr);
        const out = await runTaskIn(["export", "--kv", kv], dir);
        assert.equal(out.code, 0, out.stderr);
        const lines = out.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
        assert.equal(lines.length, total);
        lines.forEach((l, i) => {
          const want = truth.rows[i];
          assert.deepEqual([l.key, l.id, l.value], [want.key, want.id, want.value], `row ${i}`);
          if (docs) assert.equal(l.doc._id, want.id, `row ${i}`);
        });
      }
      // `_all_docs` of the same database: every id (the design document's too), in UTF-16 order.
      const kv = `${dir}/ids.kv`;
      const ids = await runTaskIn([
        "crawl",
        "--source",
        db,
        "--shards",
        "7",
        "--max-page",
        "300",
        "--kv",
        kv,
      ], dir);
      assert.equal(ids.code, 0, ids.stderr);
      const exported = await runTaskIn(["export", "--kv", kv], dir);
      const got = exported.stdout.trimEnd().split("\n").map((l) => JSON.parse(l).id);
      const want = [...docs.map((d) => d._id), "_design/t"].sort((a, b) =>
        a < b ? -1 : a > b ? 1 : 0
      );
      assert.deepEqual(got, want);
      assert.ok(
        want.some((id) => /^[\ue000-\uffff]/.test(id)) &&
          want.some((id) => /^[\ud800-\udbff]/.test(id)),
      );
    } finally {
      await stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
