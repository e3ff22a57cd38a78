/**
 * `deno task export --format parquet|sqlite|ndjson --out FILE` (`lib/cli/export_table.ts`), as a
 * user runs it after a crawl of real npm names with documents: the Parquet file read back by
 * DuckDB and the SQLite file hold exactly the NDJSON export's rows (ids, revisions, documents),
 * with the crawl's provenance; a file that is there is never written over, and a format that
 * needs a file says so.
 */
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { DatabaseSync } from "node:sqlite";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { duckdb, haveDuckdb } from "../optional_tools.ts";
import { runTask } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";

type Row = { id: string; rev: string; doc: unknown; error: unknown };

Deno.test({
  name:
    "export: --format parquet (read back by DuckDB) and --format sqlite hold exactly the NDJSON export's rows; an existing --out is refused",
  ignore: !haveDuckdb,
  async fn() {
    const data = new RegistryData(await realNames(3_000));
    const reg = await startRegistry(data, npmReplicaProfile());
    const dir = await Deno.makeTempDir();
    const kv = `${dir}/c.kv`;
    try {
      const crawled = await runTask("crawl", [
        ...["--source", reg.url, "--kv", kv, "--shards", "4", "--docs"],
        ...["--docs-url", reg.docsUrl!],
      ]);
      assert.equal(crawled.code, 0, crawled.stderr);
      const ndjson = await runTask("export", ["--kv", kv, "--out", `${dir}/x.ndjson`]);
      assert.equal(ndjson.code, 0, ndjson.stderr);
      const want: Row[] = (await Deno.readTextFile(`${dir}/x.ndjson`)).trim().split("\n")
        .map((l) => JSON.parse(l)).map((it) => ({
          id: it.id,
          rev: it.rev,
          doc: it.doc ?? null,
          error: it.error ?? null,
        }));
      assert.equal(want.length, 3_000, `${ndjson.stderr}\n${crawled.stdout.slice(-1500)}`);
      assert.ok(want.every((r) => r.doc !== null), "documents fetched");

      const pq = await runTask("export", [
        "--kv",
        kv,
        "--format",
        "parquet",
        "--out",
        `${dir}/x.parquet`,
      ]);
      assert.equal(pq.code, 0, pq.stderr);
      assert.match(pq.stderr, /exported 3000 items of crawl \S+ .* to .*x\.parquet \(parquet\)/);
      const [count] = await duckdb(`SELECT count(*) AS n FROM '${dir}/x.parquet'`);
      assert.equal(Number(count.n), 3_000);
      const got = (await duckdb(
        `SELECT id, rev, doc::VARCHAR AS doc, error::VARCHAR AS error FROM '${dir}/x.parquet' ORDER BY id`,
      )).map((r) => ({
        id: r.id,
        rev: r.rev,
        doc: r.doc === null ? null : JSON.parse(r.doc as string),
        error: r.error === null ? null : JSON.parse(r.error as string),
      }));
      const differ = want.filter((w, i) => !isDeepStrictEqual(got[i], w));
      assert.deepEqual(differ.slice(0, 2), [], `${differ.length} Parquet rows differ`);
      // DuckDB's JSON functions read the document column as it is.
      const [one] = await duckdb(
        `SELECT doc->>'name' AS name FROM '${dir}/x.parquet' WHERE id = '${want[7].id}'`,
      );
      assert.equal(one.name, (want[7].doc as { name?: string }).name ?? want[7].id);
      const meta = Object.fromEntries(
        (await duckdb(
          `SELECT key::VARCHAR AS k, value::VARCHAR AS v FROM parquet_kv_metadata('${dir}/x.parquet')`,
        ))
          .map((r) => [r.k, r.v]),
      );
      assert.equal(meta["rankcrawl.checked"], "exact");
      assert.equal(meta["rankcrawl.status"], "done");

      const lite = await runTask("export", [
        ...["--kv", kv, "--format", "sqlite", "--out", `${dir}/x.db`, "--table", "packages"],
      ]);
      assert.equal(lite.code, 0, lite.stderr);
      const db = new DatabaseSync(`${dir}/x.db`);
      const rows = (db.prepare("SELECT id, rev, doc, error FROM packages ORDER BY id").all() as {
        id: string;
        rev: string;
        doc: string | null;
        error: string | null;
      }[]).map((r) => ({
        id: r.id,
        rev: r.rev,
        doc: r.doc === null ? null : JSON.parse(r.doc),
        error: r.error === null ? null : JSON.parse(r.error),
      }));
      const state = { ...db.prepare("SELECT table_name, checked FROM rankcrawl_state").get() };
      db.close();
      const differLite = want.filter((w, i) => !isDeepStrictEqual(rows[i], w));
      assert.deepEqual(differLite.slice(0, 2), [], `${differLite.length} SQLite rows differ`);
      assert.equal(rows.length, want.length);
      assert.deepEqual(state, { table_name: "packages", checked: "exact" });

      // Nothing is written over, and a table format needs a file.
      const before = await Deno.readFile(`${dir}/x.parquet`);
      for (const format of ["parquet", "sqlite", "ndjson"]) {
        const again = await runTask("export", [
          "--kv",
          kv,
          "--format",
          format,
          "--out",
          `${dir}/x.parquet`,
        ]);
        assert.notEqual(again.code, 0);
        assert.match(
          again.stderr,
          /--out .*x\.parquet is there already; remove it or name another/,
        );
      }
      assert.deepEqual(await Deno.readFile(`${dir}/x.parquet`), before);
      const noOut = await runTask("export", ["--kv", kv, "--format", "parquet"]);
      assert.notEqual(noOut.code, 0);
      assert.match(noOut.stderr, /--format parquet needs --out FILE/);
      const badTable = await runTask("export", ["--kv", kv, "--table", "t", "--out", `${dir}/y`]);
      assert.match(badTable.stderr, /--table names the table of --format sqlite/);
      // A table no sink takes, and a folder that is not there: one line, exit 2, nothing made.
      const sqlite = ["--kv", kv, "--format", "sqlite"];
      const digit = await runTask("export", [...sqlite, "--out", `${dir}/z.db`, "--table", "1t"]);
      assert.equal(digit.code, 2, digit.stderr);
      assert.equal(
        digit.stderr.trimEnd(),
        "error: --table: the table must be letters, digits and _ (up to 63, not a digit first), " +
          "got 1t",
      );
      for (const format of ["ndjson", "parquet", "sqlite"]) {
        const out = `${dir}/none/x.${format}`;
        const nowhere = await runTask("export", ["--kv", kv, "--format", format, "--out", out]);
        assert.equal(nowhere.code, 2, nowhere.stderr);
        assert.equal(
          nowhere.stderr.trimEnd(),
          `error: --out ${out}: no folder ${dir}/none to write in`,
        );
      }
      assert.ok(!await Deno.stat(`${dir}/z.db`).catch(() => null), "no file made");
    } finally {
      await reg.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
