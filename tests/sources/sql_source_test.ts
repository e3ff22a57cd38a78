/**
 * An SQL table as a source (`lib/sources/sql/`): any table with a text key is a rank oracle. The
 * engine knows only `Source`, so a table of real npm names plans exactly, locates, and crawls end to
 * end from the command line (`--source sqlite:FILE#table`, the tasks' own permissions), with
 * documents, exact; its export is the table.
 */
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { SqliteSource } from "../../lib/sources/sql/mod.ts";
import { planShards } from "../../lib/plan/planner.ts";
import { realNames } from "../registry_timeline.ts";
import { runTask } from "../helpers.ts";

/** A table `packages` of `names` (shuffled in), each with a revision and a document. */
function writeTable(path: string, names: string[]): void {
  const db = new DatabaseSync(path);
  db.exec("create table packages (id text primary key, rev text not null, doc text)");
  const ins = db.prepare("insert into packages values (?, ?, ?)");
  db.exec("begin");
  for (const [i, id] of [...names].reverse().entries()) {
    ins.run(id, `1-${i}`, JSON.stringify({ _id: id, _rev: `1-${i}`, name: id }));
  }
  db.exec("commit");
  db.close();
}

Deno.test("sql source: a table of 20,000 real names is a rank oracle: exact balance in few requests a boundary", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const names = await realNames(20_000);
    writeTable(`${dir}/t.db`, names);
    const source = new SqliteSource(`sqlite:${dir}/t.db#packages`);
    const plan = await planShards(source, 56);
    assert.equal(plan.method, "rank");
    assert.equal(plan.total, names.length);
    const lo = Math.floor(names.length / 56);
    for (const s of plan.shards) assert.ok(s.items === lo || s.items === lo + 1, `${s.items}`);
    assert.ok(plan.requests / 55 <= 8, `${plan.requests} requests`);
    const page = await source.list({ start: null, limit: 3, includeDocs: true });
    assert.deepEqual(page.rows.map((r) => r.id), [...names].sort().slice(0, 3));
    assert.equal(JSON.parse((page.rows[0].doc as { json: string }).json).name, page.rows[0].id);
    source.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("sql source: `deno task plan`, `locate` and `crawl --docs` from the command line; the export is the table", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const names = await realNames(20_000);
    writeTable(`${dir}/t.db`, names);
    const ref = `sqlite:${dir}/t.db#packages`;
    const plan = await runTask("plan", ["--source", ref, "--shards", "8", "--json"]);
    assert.equal(plan.code, 0, plan.stderr);
    assert.equal(JSON.parse(plan.stdout).total, names.length);
    const located = await runTask("locate", ["--source", ref, "--percentile", "50", "--json"]);
    assert.equal(located.code, 0, located.stderr);
    const crawl = await runTask("crawl", [
      ...["--source", ref, "--kv", `${dir}/c.kv`, "--shards", "8", "--docs"],
    ]);
    assert.equal(crawl.code, 0, crawl.stderr + crawl.stdout);
    // 8 planned, and one more for each straggler split (timing: a loaded machine splits).
    assert.match(
      crawl.stdout,
      /checked: exact: every one of \d+ ranges holds what the registry lists/,
    );
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    assert.equal(exported.code, 0, exported.stderr);
    const lines = exported.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(lines.length, names.length);
    assert.deepEqual(lines.map((l) => l.id), [...names].sort());
    assert.ok(lines.every((l) => l.doc?._id === l.id && l.doc?._rev === l.rev));
    // A table that is not there, or a file that is not SQLite: one line each.
    const missing = await runTask("crawl", [
      ...["--source", `sqlite:${dir}/t.db#nope`, "--kv", `${dir}/d.kv`],
    ]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /^error: .*no table nope with an id column/m);
    const bad = await runTask("plan", ["--source", `sqlite:${dir}/t.db#a-b`, "--shards", "2"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^error: --source: the table must be letters, digits and _/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
