/**
 * The mirror mounted in `deno task serve` (`MIRROR_TOKEN`): every documents crawl of the store is a
 * database under `/mirror/`, named by its id, `/mirror/npm/` answers from the newest done
 * documents crawl; the read token is the mirror's own (the API token does not read it, and it does
 * not drive the API); the change log of each crawl is brought level by the server's loop; reads
 * sent as POST are not audited as changes, a checkpoint written is.
 */
import assert from "node:assert/strict";
import { startServer } from "../../lib/http/server.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { begin, finishAll, spec } from "../engine_helpers.ts";
import { dataOf, randomKeys } from "../helpers.ts";

const API = "api-token-0123456789";
const READ = "read-token-0123456789";

Deno.test("serve: MIRROR_TOKEN mounts the mirror of every documents crawl under /mirror/", async () => {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/s.kv`;
  const keysOf = {
    docs: randomKeys(200, [..."abcdefgh-"], 7, 6),
    bare: randomKeys(90, [..."xyz"], 8),
  };
  {
    using kv = await Deno.openKv(kvPath);
    for (const [id, docs] of [["docs", true], ["bare", false]] as const) {
      const source = new MemorySource(dataOf(keysOf[id]), { maxPage: 40 });
      await begin(kv, source, spec({ shards: 2, docs }), id);
      await finishAll(kv, source, id);
    }
  }
  const logs: string[] = [];
  const rt = await startServer({
    port: 0,
    hostname: "127.0.0.1",
    kvPath,
    token: API,
    allowedSources: [],
    dispatch: "lease",
    workers: 0,
    mirror: { readToken: READ, npmCrawl: null },
  }, { log: (l) => logs.push(l) });
  const get = async (path: string, token: string | null, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    if (token) headers.set("authorization", `Bearer ${token}`);
    const res = await fetch(`${rt.url}${path}`, { ...init, headers });
    return { status: res.status, body: await res.text() };
  };
  try {
    assert.ok(
      logs.includes(
        `mirror on ${rt.url}/mirror/ (a database per documents crawl, named by its id)`,
      ),
    );
    assert.ok(logs.includes(`npm registry on ${rt.url}/mirror/npm/`));
    assert.equal((await get("/mirror/docs", null)).status, 401);
    assert.equal((await get("/mirror/docs", API)).status, 401, "the API token does not read it");
    assert.equal((await get("/crawls", READ)).status, 401, "the read token does not drive the API");
    assert.equal((await get("/crawls", API)).status, 200);
    const welcome = JSON.parse((await get("/mirror/", READ)).body);
    assert.equal(welcome.couchdb, "Welcome");
    assert.equal(JSON.parse((await get("/mirror", READ)).body).uuid, welcome.uuid);
    for (const [id, n] of [["docs", 200], ["bare", 90]] as const) {
      const info = JSON.parse((await get(`/mirror/${id}`, READ)).body);
      assert.deepEqual([info.db_name, info.doc_count], [id, n]);
      // The server's loop brings each crawl's change log level (it looks every second).
      for (let i = 0; JSON.parse((await get(`/mirror/${id}`, READ)).body).update_seq !== n; i++) {
        assert.ok(i < 300, `${id}'s log was never brought level`);
        await new Promise((r) => setTimeout(r, 100));
      }
      const changes = JSON.parse((await get(`/mirror/${id}/_changes?limit=3`, READ)).body);
      assert.deepEqual(changes.results.map((r: { seq: number }) => r.seq), [1, 2, 3]);
    }
    const sorted = [...keysOf.docs].sort();
    const page = JSON.parse(
      (await get(`/mirror/docs/_all_docs?limit=2&descending=true`, READ)).body,
    );
    assert.deepEqual(page.rows.map((r: { id: string }) => r.id), sorted.slice(-2).reverse());
    const posted = await get("/mirror/docs/_all_docs?include_docs=true", READ, {
      method: "POST",
      body: JSON.stringify({ keys: [sorted[5]] }),
    });
    assert.equal(JSON.parse(posted.body).rows[0].doc._id, sorted[5]);
    const packument = JSON.parse((await get(`/mirror/npm/${sorted[9]}`, READ)).body);
    assert.equal(packument._id, sorted[9], "/mirror/npm/ answers from the documents crawl");
    assert.equal((await get("/mirror/nosuch", READ)).status, 404);
    const put = await get("/mirror/docs/_local/cp", READ, {
      method: "PUT",
      body: JSON.stringify({ last_seq: 3 }),
    });
    assert.equal(put.status, 201);
    assert.ok(!logs.some((l) => l.includes("_all_docs")), "a read sent as POST is not audited");
    assert.ok(logs.includes("audit: PUT /mirror/docs/_local/cp 201"));
    assert.ok(!logs.join("\n").includes(READ) && !logs.join("\n").includes(API));
  } finally {
    await rt.close();
    await Deno.remove(dir, { recursive: true });
  }
});
