/**
 * An SQLite table kept equal to a crawl (`lib/sinks/sqlite_sink.ts`): a batch is applied whole (a
 * range's rows replaced, items upserted, deletions deleted) and twice changes nothing; a table of
 * another shape and a file that cannot be written are one line each; and `deno task crawl --sink`
 * with documents on a registry changing 20 times a second, killed with SIGKILL while following and
 * run again, leaves a table equal to the export: ids, revisions, documents, no row twice.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { sqliteSink } from "../../lib/sinks/mod.ts";
import type { SinkBatch } from "../../lib/engine/mod.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { runTask, spawnWatched, untilApplied, untilFeedAt } from "../helpers.ts";
import { realNames, Timeline } from "../registry_timeline.ts";

type Row = { id: string; rev: string; doc: string | null; error: string | null; too_large: number };

function rows(path: string, table: string): Row[] {
  const db = new DatabaseSync(path);
  try {
    return (db.prepare(`SELECT id, rev, doc, error, too_large FROM "${table}" ORDER BY id`)
      .all() as Row[]).map((r) => ({ ...r }));
  } finally {
    db.close();
  }
}

const batch = (b: Partial<SinkBatch>): SinkBatch => ({
  crawlId: "c",
  range: null,
  items: [],
  deleted: [],
  seq: "7",
  keys: "ids",
  ...b,
});

Deno.test("sqlite sink: a range's rows replaced, items upserted, deletions deleted, each batch whole; twice changes nothing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/m.db`;
    const sink = sqliteSink(`sqlite:${path}#pkgs`);
    assert.match(sink.name, /^sqlite:[0-9a-f]{8}:pkgs$/);
    // Without a table, each crawl's own, named after it.
    const own = sqliteSink(`sqlite:${path}`);
    assert.match(own.name, /^sqlite:[0-9a-f]{8}:\*$/);
    await own.apply(batch({ crawlId: "npm-names.2", items: [{ id: "z", rev: "1-z" }] }));
    own.close();
    assert.deepEqual(rows(path, "npm_names_2").map((r) => r.id), ["z"]);
    const page = batch({
      range: { from: null, to: "m" },
      items: [
        { id: "a", rev: "1-a", doc: '{"_id":"a"}' },
        { id: "b", rev: "1-b", error: { status: 404, reason: "not_found" } },
        { id: "é", rev: "1-e", tooLarge: true },
      ],
    });
    await sink.apply(page);
    await sink.apply(batch({ range: { from: "m", to: null }, items: [{ id: "x", rev: "1-x" }] }));
    await sink.apply(page); // again: the same in effect
    // The range [null, m) now holds only b at a new revision; é is past m (UTF-8 order).
    await sink.apply(batch({ range: { from: null, to: "m" }, items: [{ id: "b", rev: "2-b" }] }));
    await sink.apply(batch({ deleted: ["x"] }));
    await sink.state!({
      crawlId: "c",
      seq: "7",
      status: "done",
      verification: { status: "exact", detail: "every range counted" },
    });
    sink.close();
    const meta = new DatabaseSync(path);
    assert.deepEqual(
      { ...meta.prepare("SELECT table_name, crawl_id, seq, checked FROM rankcrawl_state").get() },
      { table_name: "pkgs", crawl_id: "c", seq: "7", checked: "exact" },
    );
    assert.deepEqual(
      meta.prepare(`SELECT DISTINCT seq FROM pkgs`).all().map((r) => r.seq),
      ["7"],
    );
    meta.close();
    assert.deepEqual(rows(path, "pkgs"), [
      { id: "b", rev: "2-b", doc: null, error: null, too_large: 0 },
      { id: "é", rev: "1-e", doc: null, error: null, too_large: 1 },
    ]);
    // Another table of another shape is refused, naming what it would hold.
    const db = new DatabaseSync(path);
    db.exec("CREATE TABLE other (name TEXT)");
    db.close();
    assert.throws(
      () => sqliteSink(`sqlite:${path}#other`),
      /table other exists with other columns \(name\); name another table after #/,
    );
    assert.throws(() => sqliteSink(`sqlite:${path}#no-dash`), /the table must be letters/);
    assert.throws(() => sqliteSink(`sqlite:${path}#rankcrawl_state`), /the sinks' own table/);
    assert.throws(() => sqliteSink(`sqlite:${dir}/no/such/dir/m.db`), /cannot write/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sqlite sink: `deno task crawl --sink` with documents, following a registry changing 20 times a second, killed with SIGKILL and run again: the table is the export", async () => {
  const data = new RegistryData(await realNames(3_000));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docLagMs: 100 });
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/c.kv`;
  const db = `${dir}/npm.db`;
  const args = [
    ...["--source", reg.url, "--kv", kv, "--shards", "4", "--follow", "--docs"],
    ...["--docs-url", reg.docsUrl!, "--sink", `sqlite:${db}#packages`],
  ];
  let moving: { stop: () => number } | null = null;
  try {
    moving = timeline.churn(20);
    const first = spawnWatched("crawl", args);
    await first.waitFor(/following the registry's changes/);
    const before = await untilApplied(kv, 20); // killed while it follows, at no fixed moment
    first.child.kill("SIGKILL");
    assert.notEqual((await first.end()).code, 0);
    const second = spawnWatched("crawl", args);
    await second.waitFor(/following the registry's changes/);
    await untilApplied(kv, before + 30);
    moving.stop();
    // Where the registry stands now, then a second for the sink's next delivery.
    await untilFeedAt(kv, String(data.updateSeq));
    await new Promise((r) => setTimeout(r, 1500));
    second.child.kill("SIGINT");
    const end = await second.end();
    assert.equal(end.code, 0, end.out.slice(-2000));
    const exported = await runTask("export", ["--kv", kv]);
    assert.equal(exported.code, 0, exported.stderr);
    const items = exported.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const table = rows(db, "packages");
    assert.equal(table.length, items.length, "no row missing, none twice");
    assert.equal(new Set(table.map((r) => r.id)).size, table.length);
    const byId = new Map(table.map((r) => [r.id, r]));
    const differ = items.filter((it) => {
      const r = byId.get(it.id);
      const doc = r?.doc === null || r === undefined ? undefined : JSON.parse(r.doc);
      return !r || r.rev !== it.rev || JSON.stringify(doc) !== JSON.stringify(it.doc) ||
        (r.error === null ? undefined : JSON.parse(r.error))?.status !== it.error?.status;
    });
    assert.deepEqual(differ.slice(0, 3), [], `${differ.length} rows differ from the export`);
  } finally {
    moving?.stop();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sqlite sink, tombstones: rows the store stopped holding are kept, marked with deleted_at; one that comes back loses its mark", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = `${dir}/t.db`;
    const sink = sqliteSink(`sqlite:${path}#t`, { tombstones: true });
    assert.match(sink.name, /:t:tombstones$/);
    const all = ["a", "b", "c", "d"].map((id) => ({ id, rev: `1-${id}` }));
    await sink.apply(batch({ range: { from: null, to: null }, items: all }));
    await sink.apply(batch({ range: { from: "b", to: "d" }, items: [all[2]] })); // b goes
    await sink.apply(batch({ deleted: ["d"] }));
    const marked = () => {
      const db = new DatabaseSync(path);
      try {
        return (db.prepare("SELECT id, deleted_at IS NOT NULL AS gone FROM t ORDER BY id").all())
          .map((r) => `${r.id}${r.gone ? "-" : "+"}`).join(" ");
      } finally {
        db.close();
      }
    };
    assert.equal(marked(), "a+ b- c+ d-");
    const stamp = () => {
      const db = new DatabaseSync(path);
      try {
        return db.prepare("SELECT deleted_at FROM t WHERE id = 'b'").get()?.deleted_at;
      } finally {
        db.close();
      }
    };
    const first = stamp();
    await sink.apply(batch({ range: { from: "b", to: "d" }, items: [all[2]] })); // again
    assert.equal(stamp(), first, "a row marked stays as it was marked");
    await sink.apply(batch({ items: [{ id: "b", rev: "2-b" }] }));
    sink.close();
    assert.equal(marked(), "a+ b+ c+ d-");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
