/**
 * The mirror, served (`deno task mirror`, `lib/mirror/`), as users reach it: a crawl of 20,000
 * real npm names with documents, followed, served read-only. pouchdb-server (PouchDB's replicator,
 * which no one here wrote) replicates it whole into an empty database: its copy holds exactly the
 * crawl's export. Then, replicating live while the registry changes 20 times a second and
 * rankcrawl follows it, the copy comes to equal the registry (ids, revisions, bodies) once the
 * changes stop. `_all_docs` answers `offset` as the registry's own rank, and rankcrawl plans the
 * mirror into 56 shards by rank and copies it exactly; `npm view` reads plain and scoped
 * packuments (and `versions --json`) through the npm endpoint with the read token, and says npm's
 * own 404 for an unknown name; `If-None-Match` answers 304; reads without the token are refused.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { havePouchdb, startPouchdb } from "../optional_tools.ts";
import { runTask, spawnWatched } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";
import { prng } from "../../lib/sim/names.ts";
import { compareKeys } from "../../lib/plan/keys.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TOKEN = "mirror-read-token-123456";
const auth = { authorization: `Bearer ${TOKEN}` };

Deno.test({
  name:
    "mirror: pouchdb-server replicates 20,000 documents whole, then live while the registry changes; offset is the registry's rank; npm view reads it",
  ignore: !havePouchdb,
  async fn() {
    const N = 20_000;
    const data = new RegistryData(await realNames(N));
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
      await crawl.waitFor(/following the registry's changes/, 300_000);
      mirror = spawnMirror(kv);
      await mirror.waitFor(/npm registry on /);
      await mirror.waitFor(/mirror log level with crawl \S+: 20,000 changes/);
      const db = /mirror on (\S+)/.exec(mirror.text())![1];
      const npm = /npm registry on (\S+)/.exec(mirror.text())![1];
      // Reads need the token.
      const refused = await fetch(db);
      assert.equal(refused.status, 401);
      await refused.body?.cancel();
      const info = await (await fetch(db, { headers: auth })).json();
      assert.equal(info.doc_count, N);
      assert.equal(info.update_seq, N, "the initial crawl counts as 20,000 changes");
      // offset is the rank, as the registry ranks.
      for (const key of ["m", data.keys[12345], "zzz", "@"]) {
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
      const replicate = async (o: { continuous?: boolean } = {}) => {
        const res = await fetch(`${peer.base}/_replicate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            source: db.replace("http://", `http://reader:${TOKEN}@`),
            target: "copy",
            create_target: true,
            ...o,
          }),
        });
        const text = await res.text();
        const body = JSON.parse(text.startsWith("{") ? text : "{}");
        assert.equal(body.ok, true, text.slice(0, 2000));
        return body;
      };
      const first = await replicate();
      assert.equal(first.docs_written, N);
      await assertCopyIsExport(peer.base, kv);
      // The mirror is itself a rank oracle: rankcrawl plans it by rank (a request or so a
      // boundary, no skip, no pass over the rows), each shard's count the registry's own.
      const planned = await runTask("plan", [
        ...["--source", db, "--shards", "56", "--json"],
        ...["--header", `Authorization: Bearer ${TOKEN}`],
      ]);
      assert.equal(planned.code, 0, planned.stderr);
      const plan = JSON.parse(planned.stdout);
      assert.equal(plan.method, "rank");
      assert.ok(plan.requests <= 3 * 55, `${plan.requests} requests for 55 boundaries`);
      assert.equal(plan.total, N);
      for (
        const sh of plan.shards as { start: string | null; end: string | null; items: number }[]
      ) {
        const rank = (k: string | null) =>
          k === null ? N : data.keys.findIndex((x) => compareKeys(x, k) >= 0);
        assert.equal(sh.items, rank(sh.end) - (sh.start === null ? 0 : rank(sh.start)));
        assert.ok(Math.abs(sh.items - N / 56) <= 1, `${sh.items} items in a shard`);
      }
      const recrawl = await runTask("crawl", [
        ...["--source", db, "--kv", `${dir}/again.kv`, "--shards", "56", "--docs"],
        ...["--header", `Authorization: Bearer ${TOKEN}`],
      ]);
      assert.equal(recrawl.code, 0, recrawl.stderr);
      assert.match(
        recrawl.stderr,
        /planned 20,000 items into 56 shards .* \(each cut where the registry ranks a key\)/,
      );
      assert.match(recrawl.stdout, /checked: exact/);
      assert.ok(!(recrawl.stdout + recrawl.stderr).includes(TOKEN), "the token is never printed");
      // Live: the replicator follows the mirror's continuous feed while the registry changes 20
      // times a second and rankcrawl follows it; once the changes stop, the copy comes to equal
      // the registry.
      await replicate({ continuous: true });
      const rand = prng(5);
      for (let i = 0; i < 200; i++) {
        data.churn(1, rand);
        await sleep(50);
      }
      const stopped = Date.now();
      const registryNow = await docsOf(`${reg.url}/_all_docs?include_docs=true`);
      let copyNow = new Map<string, unknown>();
      await until(async () => {
        copyNow = await docsOf(`${peer.base}/copy/_all_docs?include_docs=true`);
        return sameDocs(copyNow, registryNow);
      }, 120_000).catch(() => {
        assert.deepEqual(copyNow, registryNow, "the live copy never came to equal the registry");
      });
      console.log(
        `live: the copy equals the registry ${Date.now() - stopped} ms after the last change`,
      );
      const changes = await (await fetch(`${db}/_changes?since=${info.update_seq}`, {
        headers: auth,
      })).json();
      assert.ok(
        changes.results.length > 0 && changes.results.length <= 200,
        changes.results.length,
      );
      await assertCopyIsExport(peer.base, kv);
      // The npm endpoint: npm view with the token; 304; the abbreviated form.
      const name = data.keys.find((k) => k.startsWith("@") && data.doc(k))!;
      const plain = data.keys.find((k) => /^[a-z]/.test(k) && data.doc(k))!;
      const npmView = async (...args: string[]) => {
        const out = await new Deno.Command("npm", {
          args: [
            ...["view", ...args, "--registry", npm],
            `--//${new URL(npm).host}/npm/:_authToken=${TOKEN}`,
            ...["--cache", `${dir}/npm-cache`, "--prefer-online"],
          ],
          stdout: "piped",
          stderr: "piped",
        }).output();
        const text = (b: Uint8Array) => new TextDecoder().decode(b);
        return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
      };
      for (const pkg of [name, plain]) {
        const doc = data.doc(pkg) as { versions: Record<string, unknown> };
        assert.equal((await npmView(pkg, "name")).stdout.trim(), pkg);
        const versions = await npmView(pkg, "versions", "--json");
        assert.equal(versions.code, 0, versions.stderr);
        const listed = JSON.parse(versions.stdout);
        assert.deepEqual([listed].flat(), Object.keys(doc.versions), pkg);
      }
      const ping = await new Deno.Command("npm", {
        args: [
          ...["ping", "--registry", npm, `--//${new URL(npm).host}/npm/:_authToken=${TOKEN}`],
          ...["--cache", `${dir}/npm-cache`],
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(ping.code, 0, new TextDecoder().decode(ping.stderr));
      const unknown = await npmView("no-such-package-here");
      assert.notEqual(unknown.code, 0);
      assert.match(unknown.stderr, /E404/);
      // npm's own words (npm 10 says "could not be found…", older ones "is not in this registry").
      assert.match(
        unknown.stderr,
        /'no-such-package-here@\*' (could not be found|is not in this registry)/,
      );
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
      await peer.stop(); // first: a live replication whose source goes away ends pouchdb-server
      mirror?.child.kill("SIGINT");
      await mirror?.end();
      crawl.child.kill("SIGINT");
      await crawl.end();
      await reg.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

function spawnMirror(kv: string) {
  return spawnWatched("mirror", ["--kv", kv, "--port", "0"], { MIRROR_TOKEN: TOKEN });
}

/** Every document of an `_all_docs?include_docs=true` answer by id. */
async function docsOf(url: string): Promise<Map<string, unknown>> {
  const body = await (await fetch(url)).json();
  return new Map(body.rows.map((r: { id: string; doc: unknown }) => [r.id, r.doc]));
}

/** Whether two copies hold the same ids, revisions and bodies (PouchDB's `_revisions` aside). */
function sameDocs(a: Map<string, unknown>, b: Map<string, unknown>): boolean {
  if (a.size !== b.size) return false;
  const plain = (d: unknown) => {
    const { _revisions: _, ...rest } = d as Record<string, unknown>;
    return JSON.stringify(Object.entries(rest).sort(([x], [y]) => x < y ? -1 : 1));
  };
  for (const [id, d] of a) if (!b.has(id) || plain(d) !== plain(b.get(id))) return false;
  return true;
}

async function until(check: () => Promise<boolean>, ms = 60_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check().catch(() => false));) {
    if (Date.now() > deadline) throw new Error("never happened");
    await sleep(100);
  }
}

/** The peer's copy holds exactly the export's ids, revisions and documents. */
async function assertCopyIsExport(base: string, kv: string): Promise<void> {
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

Deno.test("mirror task: bad input is one line and a non-zero exit, the token never echoed", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const empty = `${dir}/empty.kv`;
    (await Deno.openKv(empty)).close();
    for (
      const [args, env, re] of [
        [[], { MIRROR_PUBLIC: "1" }, /--kv PATH is required/],
        [["--kv", empty], {}, /MIRROR_TOKEN is not set/],
        [["--kv", empty], { MIRROR_TOKEN: TOKEN }, /holds no crawl/],
        [["--kv", empty, "--port", "70000"], { MIRROR_PUBLIC: "1" }, /--port/],
        [["--kv", empty, "--crawl-id", "nope", "--bogus"], { MIRROR_PUBLIC: "1" }, /--bogus/],
      ] as [string[], Record<string, string>, RegExp][]
    ) {
      const r = await runTask("mirror", args, { env });
      assert.notEqual(r.code, 0, args.join(" "));
      const lines = r.stderr.trim().split("\n").filter((l) => !l.startsWith("Task "));
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0], re);
      assert.ok(!r.stderr.includes(TOKEN));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
