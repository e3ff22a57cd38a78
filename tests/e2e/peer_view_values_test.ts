/**
 * A view whose rows carry large values (`emit(key, doc.value)`, common practice) on pouchdb-server:
 * 40 rows of 300 KB and one of 2 MB among small ones. Planned (a one-row probe takes a row of any
 * size), crawled with and without documents, and exported equal to the server's own listing: each
 * value too long to be a row's revision is stored like a document (`row_value.ts`). Skipped
 * locally without the server, never in CI.
 */
import assert from "node:assert/strict";
import { okJson, runTaskIn } from "../helpers.ts";
import { havePouchdb, startPouchdb } from "../optional_tools.ts";

Deno.test({
  name: "peer: a pouchdb-server view with 300 KB and 2 MB values is crawled and exported whole",
  ignore: !havePouchdb,
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const { base, stop } = await startPouchdb(dir);
    const db = `${base}/big`;
    try {
      await okJson(db, { method: "PUT" });
      const docs = Array.from({ length: 120 }, (_, i) => ({
        _id: `d${String(i).padStart(3, "0")}`,
        k: i % 7,
        value: i === 77
          ? { text: "m".repeat(2_000_000), i }
          : i % 3 === 0
          ? { text: `${i}`.repeat(100_000).slice(0, 300_000), i }
          : i,
      }));
      for (const d of docs) {
        await okJson(`${db}/${d._id}`, {
          method: "PUT",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(d),
        });
      }
      await okJson(`${db}/_design/t`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          views: { v: { map: "function (doc) { emit(doc.k, doc.value); }" } },
        }),
      });
      // The server's own listing, a few rows at a time (its rows are large).
      const want: { key: unknown; id: string; value: unknown }[] = [];
      for (let skip = 0;; skip += 10) {
        const page = await okJson(`${db}/_design/t/_view/v?limit=10&skip=${skip}`);
        want.push(...page.rows);
        if (page.rows.length < 10) break;
      }
      assert.equal(want.length, 120);
      assert.ok(want.filter((r) => JSON.stringify(r.value).length > 65_536).length >= 40);
      for (const withDocs of [false, true]) {
        const kv = `${dir}/v${withDocs}.kv`;
        const crawl = await runTaskIn([
          ...["crawl", "--source", db, "--view", "t/v", "--shards", "4", "--kv", kv],
          ...(withDocs ? ["--docs"] : []),
        ], dir);
        assert.equal(crawl.code, 0, crawl.stderr);
        const out = await runTaskIn(["export", "--kv", kv], dir);
        assert.equal(out.code, 0, out.stderr);
        const lines = out.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
        assert.equal(lines.length, want.length);
        lines.forEach((l, i) => {
          assert.deepEqual([l.key, l.id, l.value], [want[i].key, want[i].id, want[i].value]);
          if (withDocs) assert.deepEqual(l.doc.value, want[i].value, `row ${i}'s document`);
          else assert.equal(l.doc, undefined);
        });
      }
    } finally {
      await stop();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
