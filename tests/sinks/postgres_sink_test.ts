/**
 * A PostgreSQL table kept equal to a crawl (`lib/sinks/postgres_sink.ts`), against a real server
 * started here (`lib/sim/postgres_server.ts`, Debian's PostgreSQL): a batch is applied whole (a range's
 * other rows deleted, items upserted, deletions deleted), twice writes nothing, the state row says
 * what the table is current at; and a bad URL, a wrong password, no such database, a read-only
 * database and a table of another shape are one line each, none showing the password.
 */
import assert from "node:assert/strict";
import { openSink, postgresSink } from "../../lib/sinks/mod.ts";
import type { SinkBatch } from "../../lib/engine/mod.ts";
import { PermanentError, TransientError } from "../../lib/base/errors.ts";
import { havePostgres } from "../optional_tools.ts";
import { startPostgres } from "../../lib/sim/postgres_server.ts";

const batch = (b: Partial<SinkBatch>): SinkBatch => ({
  crawlId: "c",
  range: null,
  items: [],
  deleted: [],
  seq: "7",
  keys: "ids",
  ...b,
});

Deno.test({
  name:
    "postgres sink: a range's other rows deleted, items upserted, deletions deleted, each batch whole; twice writes nothing",
  ignore: !havePostgres,
  async fn() {
    const pg = await startPostgres();
    try {
      const sink = postgresSink(`${pg.url}#pkgs`);
      assert.match(sink.name, /^postgres:[0-9a-f]{8}:pkgs$/);
      assert.ok(!sink.name.includes(pg.password) && !sink.shown.includes(pg.password));
      await sink.probe();
      const page = batch({
        range: { from: null, to: "m" },
        items: [
          { id: "a", rev: "1-a", doc: '{"_id":"a","n":[1,2]}' },
          { id: "b", rev: "1-b", error: { status: 404, reason: "not_found" } },
          { id: "é", rev: "1-e", tooLarge: true },
          { id: "nul", rev: "1-n", doc: '{"_id":"nul","s":"a\\u0000b"}' },
        ],
      });
      await sink.apply(page);
      await sink.apply(batch({ range: { from: "m", to: null }, items: [{ id: "x", rev: "1-x" }] }));
      const stamp = await pg.psql("SELECT xmin FROM pkgs WHERE id = 'a'");
      await sink.apply(page); // again: nothing written
      assert.equal(await pg.psql("SELECT xmin FROM pkgs WHERE id = 'a'"), stamp);
      // [null, m) now holds only b at a new revision; é and nul are past m (byte order).
      await sink.apply(
        batch({ range: { from: null, to: "m" }, items: [{ id: "b", rev: "2-b" }], seq: "9" }),
      );
      await sink.apply(batch({ deleted: ["x"] }));
      await sink.state!({
        crawlId: "c",
        seq: "9",
        status: "done",
        verification: { status: "exact", detail: "every range counted" },
      });
      await sink.close();
      assert.equal(
        await pg.psql(
          "SELECT id, rev, coalesce(doc::text, '-'), coalesce(error->>'status', '-'), too_large, " +
            "seq FROM pkgs ORDER BY id",
        ),
        [
          "b|2-b|-|-|f|9",
          "nul|1-n|-|0|f|7",
          "é|1-e|-|-|t|7",
        ].join("\n") + "\n",
      );
      assert.equal(
        await pg.psql("SELECT table_name, crawl_id, seq, status, checked FROM rankcrawl_state"),
        "pkgs|c|9|done|exact\n",
      );
      // Without a table, each crawl's own, named after it.
      const own = openSink(pg.url);
      await own.probe();
      await own.apply(batch({ crawlId: "npm-names.2", items: [{ id: "z", rev: "1-z" }] }));
      await own.close();
      assert.equal(await pg.psql("SELECT id FROM npm_names_2"), "z\n");
    } finally {
      await pg.close();
    }
  },
});

Deno.test({
  name:
    "postgres sink: a bad URL, a wrong password, no such database, a read-only database, a table of another shape, a server not there: one line each, no password",
  ignore: !havePostgres,
  async fn() {
    const pg = await startPostgres();
    const refused = async (ref: string, re: RegExp, kind = PermanentError) => {
      let err: unknown = null;
      try {
        const sink = openSink(ref);
        try {
          await sink.probe();
        } finally {
          await sink.close();
        }
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof kind, `${ref}: ${err}`);
      const line = (err as Error).message;
      assert.match(line, re);
      assert.equal(line.split("\n").length, 1, line);
      assert.ok(!line.includes(pg.password) && !line.includes("sekret"), line);
    };
    try {
      const at = `127.0.0.1:${pg.port}`;
      await refused("postgres://rankcrawl:sekret@/nodb", /is not a URL|postgres:\/\/USER@HOST/);
      await refused(`postgres://rankcrawl:sekret@${at}`, /name the database/);
      await refused(`postgres://rankcrawl:sekret@${at}/rankcrawl#no-dash`, /letters, digits/);
      await refused(`mysql://rankcrawl:sekret@${at}/x`, /a sink is sqlite:PATH#table or postgres/);
      await refused(
        `postgres://rankcrawl:sekret@${at}/rankcrawl#t`,
        /password authentication failed for user "rankcrawl"/,
      );
      await refused(
        pg.url.replace(/\/rankcrawl$/, "/nosuch#t"),
        /database "nosuch" does not exist/,
      );
      await pg.psql("CREATE TABLE other (name text)");
      await refused(`${pg.url}#other`, /table other exists with other columns \(name\)/);
      await pg.psql("CREATE DATABASE ro", { db: "postgres" });
      await pg.psql("ALTER DATABASE ro SET default_transaction_read_only = on", { db: "postgres" });
      await refused(pg.url.replace(/\/rankcrawl$/, "/ro#t"), /the database is read-only/);
      await pg.stop();
      await refused(`${pg.url}#t`, /ECONNREFUSED|connect/, TransientError);
    } finally {
      await pg.close();
    }
  },
});

Deno.test({
  name:
    "postgres sink: a range bound holding U+0000 (a key just past another) is cut there; an id with one is left out, the rest applied",
  ignore: !havePostgres,
  async fn() {
    const pg = await startPostgres();
    try {
      const sink = postgresSink(`${pg.url}#nul`);
      const items = ["a", "b", "b0", "c"].map((id) => ({ id, rev: `1-${id}` }));
      await sink.apply(batch({ range: { from: null, to: null }, items }));
      // [b\0, c\0) holds only c now: b (before b\0) and b0 (inside) -> b0 goes; c stays.
      await sink.apply(batch({ range: { from: "b\0", to: "c\0" }, items: [items[3]] }));
      // An id with U+0000 cannot be held: left out, the batch's other items applied.
      await sink.apply(batch({ items: [{ id: "d\0x", rev: "1-d" }, { id: "e", rev: "1-e" }] }));
      await sink.apply(batch({ deleted: ["a", "z\0"] }));
      await sink.close();
      assert.equal(await pg.psql("SELECT string_agg(id, ',' ORDER BY id) FROM nul"), "b,c,e\n");
    } finally {
      await pg.close();
    }
  },
});

Deno.test({
  name:
    "postgres sink, tombstones: rows the store stopped holding are kept, marked with deleted_at; one that comes back loses its mark",
  ignore: !havePostgres,
  async fn() {
    const pg = await startPostgres();
    try {
      const sink = postgresSink(`${pg.url}#t`, { tombstones: true });
      assert.match(sink.name, /:t:tombstones$/);
      const all = ["a", "b", "c", "d"].map((id) => ({ id, rev: `1-${id}` }));
      await sink.apply(batch({ range: { from: null, to: null }, items: all }));
      await sink.apply(batch({ range: { from: "b", to: "d" }, items: [all[2]] })); // b goes
      await sink.apply(batch({ deleted: ["d"] }));
      const marked = () =>
        pg.psql(
          "SELECT string_agg(id || CASE WHEN deleted_at IS NULL THEN '+' ELSE '-' END, ' ' " +
            "ORDER BY id) FROM t",
        );
      assert.equal(await marked(), "a+ b- c+ d-\n");
      const stamp = await pg.psql("SELECT deleted_at FROM t WHERE id = 'b'");
      await sink.apply(batch({ range: { from: "b", to: "d" }, items: [all[2]] })); // again
      assert.equal(await pg.psql("SELECT deleted_at FROM t WHERE id = 'b'"), stamp);
      await sink.apply(batch({ items: [{ id: "b", rev: "2-b" }] }));
      await sink.close();
      assert.equal(await marked(), "a+ b+ c+ d-\n");
    } finally {
      await pg.close();
    }
  },
});
