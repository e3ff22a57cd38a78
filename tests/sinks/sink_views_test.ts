/**
 * A view's rows in SQL: `deno task crawl --view` with an SQLite and a PostgreSQL sink keeps a table
 * of `row_key`, `key`, `id`, `value` (the export's `{"key","id","value"}` rows, each once), and a
 * sink refuses a registry that orders ids by UTF-16 unit in one line.
 */
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { DatabaseSync } from "node:sqlite";
import postgres from "postgres";
import { VIEW_NAME } from "../../lib/sim/registry/registry_view.ts";
import { startPostgres } from "../../lib/sim/postgres_server.ts";
import { sqliteSink } from "../../lib/sinks/mod.ts";
import { havePostgres } from "../optional_tools.ts";
import { runTask } from "../helpers.ts";

type Row = { key: unknown; id: string; value: unknown };

Deno.test({
  name:
    "sinks: a view crawl's rows in SQLite and PostgreSQL tables (row_key, key, id, value), equal to the export",
  ignore: !havePostgres,
  async fn() {
    const pg = await startPostgres();
    const dir = await Deno.makeTempDir();
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      const kv = `${dir}/view.kv`;
      const crawl = await runTask("crawl", [
        ...["--view", VIEW_NAME, "--kv", kv, "--sink", `sqlite:${dir}/v.db#rows`],
        ...["--sink", `${pg.url}#rows`, "--sink-required"],
      ]);
      assert.equal(crawl.code, 0, crawl.stderr);
      const out = await runTask("export", ["--kv", kv]);
      assert.equal(out.code, 0, out.stderr);
      const want: Row[] = out.stdout.trimEnd().split("\n").map((l) => JSON.parse(l))
        .map((r) => ({ key: r.key, id: r.id, value: r.value }));
      const db = new DatabaseSync(`${dir}/v.db`);
      const lite = (db.prepare("SELECT key, id, value FROM rows ORDER BY row_key").all() as {
        key: string;
        id: string;
        value: string;
      }[]).map((r) => ({ key: JSON.parse(r.key), id: r.id, value: JSON.parse(r.value) }));
      db.close();
      const inPg = (await sql<Row[]>`SELECT key, id, value FROM rows ORDER BY row_key`)
        .map((r) => ({ key: r.key, id: r.id, value: r.value }));
      // The same rows exported to an SQLite file; Parquet says which formats take a view's rows.
      const exported = await runTask("export", [
        ...["--kv", kv, "--format", "sqlite", "--out", `${dir}/e.db`, "--table", "rows"],
      ]);
      assert.equal(exported.code, 0, exported.stderr);
      const edb = new DatabaseSync(`${dir}/e.db`);
      const fromExport = (edb.prepare("SELECT key, id, value FROM rows ORDER BY row_key").all() as {
        key: string;
        id: string;
        value: string;
      }[]).map((r) => ({ key: JSON.parse(r.key), id: r.id, value: JSON.parse(r.value) }));
      edb.close();
      const pq = await runTask("export", [
        "--kv",
        kv,
        "--format",
        "parquet",
        "--out",
        `${dir}/v.pq`,
      ]);
      assert.match(pq.stderr, /holds a view's rows \(--format ndjson or sqlite writes them\)/);
      for (
        const [name, got] of [["sqlite", lite], ["postgres", inPg], ["export", fromExport]] as const
      ) {
        assert.equal(got.length, want.length, `${name}: every row once`);
        const differ = want.filter((w, i) => !isDeepStrictEqual(got[i], w));
        assert.deepEqual(differ.slice(0, 2), [], `${name}: ${differ.length} rows differ`);
      }
    } finally {
      await sql.end({ timeout: 1 });
      await pg.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("sinks: ids carried in UTF-16 order (pouchdb-server's) are refused in one line", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const sink = sqliteSink(`sqlite:${dir}/u.db#t`);
    await assert.rejects(
      sink.apply({
        crawlId: "c",
        range: null,
        items: [{ id: "a", rev: "1-a" }],
        deleted: [],
        seq: null,
        keys: "utf16-keys",
      }),
      /orders ids by UTF-16 unit \(pouchdb-server\); a sink's table keeps code-point order only/,
    );
    sink.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
