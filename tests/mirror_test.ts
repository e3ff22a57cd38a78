/**
 * The mirror, served (`deno task mirror`, `lib/mirror/`), as users reach it: a crawl of real npm
 * names with documents, followed while the registry changes, served read-only. pouchdb-server (a
 * replicator no one here wrote) replicates it whole, then again after the registry changed: its
 * copy holds exactly the crawl's export. `_all_docs` answers `offset` as the registry's own rank;
 * `npm view` reads packuments through the npm endpoint with the read token; `If-None-Match`
 * answers 304; reads without the token are refused.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../lib/sim/registry/registry_server.ts";
import { getFeed, listCrawls } from "../lib/engine/store/mod.ts";
import { havePouchdb, startPouchdb } from "./optional_tools.ts";
import { runTask, spawnWatched } from "./helpers.ts";
import { realNames } from "./registry_timeline.ts";
import { prng } from "../lib/sim/names.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TOKEN = "mirror-read-token-123456";
const auth = { authorization: `Bearer ${TOKEN}` };

Deno.test({
  name:
    "mirror: pouchdb-server replicates a followed crawl whole, and its changes; offset is the registry's rank; npm view reads it",
  ignore: !havePouchdb,
  async fn() {
    const data = new RegistryData(await realNames(3_000));
    const reg = await startRegistry(data, {});
    const dir = await Deno.makeTempDir();
    const kv = `${dir}/c.kv`;
    const peer = await startPouchdb(dir);
    const crawl = spawnWatched("crawl", [
      ...["--source", reg.url, "--kv", kv, "--shards", "4", "--docs", "--follow"],
      ...["--follow-poll", "100ms", "--follow-idle", "200ms"],
    ]);
    let mirror: ReturnType<typeof spawnWatched> | null = null;
    try {
      await crawl.waitFor(/following the registry's changes/, 120_000);
      mirror = spawnMirror(kv);
      await mirror.waitFor(/npm registry on /);
      const db = /mirror on (\S+)/.exec(mirror.text())![1];
      const npm = /npm registry on (\S+)/.exec(mirror.text())![1];
      // Reads need the token.
      const refused = await fetch(db);
      assert.equal(refused.status, 401);
      await refused.body?.cancel();
      const info = await (await fetch(db, { headers: auth })).json();
      assert.equal(info.doc_count, 3_000);
      assert.equal(info.update_seq, 3_000, "the initial crawl counts as 3,000 changes");
      // offset is the rank, as the registry ranks.
      for (const key of ["m", data.keys[1234], "zzz", "@"]) {
        const q = `_all_docs?limit=1&startkey=${encodeURIComponent(JSON.stringify(key))}`;
        const mine = await (await fetch(`${db}/${q}`, { headers: auth })).json();
        const theirs = await (await fetch(`${reg.url}/${q}`)).json();
        assert.deepEqual(
          [mine.offset, mine.total_rows, mine.rows.map((r: { id: string }) => r.id)],
          [theirs.offset, theirs.total_rows, theirs.rows.map((r: { id: string }) => r.id)],
          key,
        );
      }
      // A replicator no one here wrote copies it whole.
      const replicate = async () => {
        const res = await fetch(`${peer.base}/_replicate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            source: db.replace("http://", `http://reader:${TOKEN}@`),
            target: "copy",
            create_target: true,
          }),
        });
        const text = await res.text();
        const body = JSON.parse(text.startsWith("{") ? text : "{}");
        assert.equal(body.ok, true, text.slice(0, 2000));
        return body;
      };
      const first = await replicate();
      assert.equal(first.docs_written, 3_000);
      await assertCopyIsExport(peer.base, kv);
      // The mirror is itself a rank oracle: rankcrawl plans it by rank and crawls it exactly.
      const recrawl = await runTask("crawl", [
        ...["--source", db, "--kv", `${dir}/again.kv`, "--shards", "4", "--docs"],
        ...["--header", `Authorization: Bearer ${TOKEN}`],
      ]);
      assert.equal(recrawl.code, 0, recrawl.stderr);
      assert.match(
        recrawl.stderr,
        /planned 3,000 items into 4 shards .* \(each cut where the registry ranks a key\)/,
      );
      assert.match(recrawl.stdout, /checked: exact/);
      assert.ok(!(recrawl.stdout + recrawl.stderr).includes(TOKEN), "the token is never printed");
      // The registry changes; the follower applies it; the mirror's feed says so; again.
      const rand = prng(5);
      for (let i = 0; i < 40; i++) data.churn(1, rand);
      const head = String(data.updateSeq);
      await until(async () => {
        using store = await Deno.openKv(kv);
        const [c] = await listCrawls(store);
        return (await getFeed(store, c.id)).value?.seq === head;
      });
      await until(async () =>
        (await (await fetch(db, { headers: auth })).json()).update_seq > info.update_seq
      );
      await sleep(1500); // the mirror's log, level with the ledger (it looks every second)
      const changes = await (await fetch(`${db}/_changes?since=${info.update_seq}`, {
        headers: auth,
      })).json();
      assert.ok(changes.results.length > 0 && changes.results.length <= 40, changes.results.length);
      const second = await replicate();
      assert.ok(second.docs_read > 0 && second.docs_read <= 40, JSON.stringify(second));
      await assertCopyIsExport(peer.base, kv, { deletionsGone: true });
      // The npm endpoint: npm view with the token; 304; the abbreviated form.
      const name = data.keys.find((k) => k.startsWith("@"))!;
      const viewed = await new Deno.Command("npm", {
        args: [
          ...["view", name, "name", "--registry", npm],
          `--//${new URL(npm).host}/npm/:_authToken=${TOKEN}`,
          "--cache",
          `${dir}/npm-cache`,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(new TextDecoder().decode(viewed.stdout).trim(), name);
      const full = await fetch(`${npm}${name.replace("/", "%2f")}`, { headers: auth });
      const etag = full.headers.get("etag")!;
      assert.equal((await full.json()).name, name);
      const again = await fetch(`${npm}${name}`, { headers: { ...auth, "if-none-match": etag } });
      assert.equal(again.status, 304);
      const abbr = await fetch(`${npm}${name}`, {
        headers: { ...auth, accept: "application/vnd.npm.install-v1+json" },
      });
      assert.deepEqual(Object.keys(await abbr.json()).sort(), [
        "dist-tags",
        "modified",
        "name",
        "versions",
      ]);
      const none = await fetch(`${npm}no-such-package-here`, { headers: auth });
      assert.equal(none.status, 404);
      assert.deepEqual(await none.json(), { error: "Not found" });
    } finally {
      mirror?.child.kill("SIGINT");
      await mirror?.end();
      crawl.child.kill("SIGINT");
      await crawl.end();
      await peer.stop();
      await reg.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

function spawnMirror(kv: string) {
  return spawnWatched("mirror", ["--kv", kv, "--port", "0"], { MIRROR_TOKEN: TOKEN });
}

async function until(check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check().catch(() => false));) {
    if (Date.now() > deadline) throw new Error("never happened");
    await sleep(100);
  }
}

/** The peer's copy holds exactly the export's ids, revisions and documents. */
async function assertCopyIsExport(
  base: string,
  kv: string,
  _o: { deletionsGone?: boolean } = {},
): Promise<void> {
  const exported = await runTask("export", ["--kv", kv, "--partial"]);
  assert.equal(exported.code, 0, exported.stderr);
  const want = new Map(
    exported.stdout.trim().split("\n").map((l) => JSON.parse(l)).map((it) => [it.id, it]),
  );
  const copy = await (await fetch(`${base}/copy/_all_docs?include_docs=true`)).json();
  const got = new Map(
    copy.rows.map((r: { id: string; doc: Record<string, unknown> }) => [r.id, r.doc]),
  );
  assert.equal(got.size, want.size, "the copy holds every document once, and no other");
  for (const [id, it] of want) {
    const doc = got.get(id) as Record<string, unknown> | undefined;
    assert.ok(doc, `${id} is in the copy`);
    assert.equal(doc._rev, it.rev, id);
    assert.equal(doc.name, it.doc.name, id);
  }
}
