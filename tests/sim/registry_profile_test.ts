/**
 * The simulator plays the servers users point rankcrawl at: npm's replica as design.md describes
 * it (GET only, unknown parameters a 400, no sequence on listings, no `pending`, documents only
 * from a document host), a read-only proxy, a cluster's opaque, jittering sequences.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import {
  createDocHostApp,
  createRegistryApp,
  type RegistryOptions,
  startRegistry,
} from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile, SeqCodec } from "../../lib/sim/registry/registry_profile.ts";

const keys = () => ["@a/x", "@b/y", "alpha", "beta", "gamma", "zeta"];

async function ask(
  options: RegistryOptions,
  path: string,
  init?: { method: string; body: string },
) {
  const app = createRegistryApp(new RegistryData(keys()), options);
  const res = await app.request(`http://x/registry${path}`, init);
  return { status: res.status, body: await res.json() };
}

Deno.test("profile: npm's replica refuses what it does not serve, naming it", async () => {
  const npm = npmReplicaProfile();
  for (const q of ["update_seq=true", "skip=1", "include_docs=true", "stale=ok", "limit=20000"]) {
    const r = await ask(npm, `/_all_docs?${q}`);
    assert.equal(r.status, 400, q);
    assert.match(JSON.stringify(r.body), new RegExp(q.split("=")[0]), q);
  }
  const ok = await ask(npm, `/_all_docs?startkey=%22b%22&endkey=%22g%22&inclusive_end=false`);
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.body.rows.map((r: { id: string }) => r.id), ["beta"]);
  assert.equal(ok.body.offset, 3);
  assert.equal("update_seq" in ok.body, false);
  // update_seq ignored instead: the answer simply has none.
  const ignored = await ask(npmReplicaProfile("ignore"), "/_all_docs?limit=1&update_seq=true");
  assert.equal(ignored.status, 200);
  assert.equal("update_seq" in ignored.body, false);
  // The database info as npm's, integer sequences; changes without `pending`.
  const info = await ask(npm, "");
  assert.deepEqual(info.body, {
    db_name: "registry",
    engine: "npm-replicate",
    doc_count: 6,
    update_seq: 6,
  });
  const feed = await ask(npm, "/_changes?since=4&limit=10");
  assert.deepEqual(feed.body.results.map((r: { seq: number }) => r.seq), [5, 6]);
  assert.equal(feed.body.last_seq, 6);
  assert.equal("pending" in feed.body, false);
  assert.equal((await ask(npm, "/_changes?since=0&include_docs=true")).status, 400);
});

Deno.test("profile: GET only, keys on GET, and documents only from the document host", async () => {
  const npm = npmReplicaProfile();
  const post = await ask(npm, "/_all_docs", {
    method: "POST",
    body: JSON.stringify({ keys: ["alpha"] }),
  });
  assert.equal(post.status, 405);
  assert.equal((await ask(npm, "/_bulk_get", { method: "POST", body: "{}" })).status, 405);
  const byKeys = await ask(npm, `/_all_docs?keys=${encodeURIComponent('["beta","nope"]')}`);
  assert.equal(byKeys.status, 200);
  assert.equal(byKeys.body.rows[0].value.rev.startsWith("1-"), true);
  assert.equal(byKeys.body.rows[1].error, "not_found");
  const refused = await ask({ ...npm, refuseKeys: true }, `/_all_docs?keys=%5B%5D`);
  assert.equal(refused.status, 400);
  assert.equal((await ask(npm, "/alpha")).status, 404, "no document under the database");
  const data = new RegistryData(keys());
  const host = createDocHostApp(data, npm);
  const doc = await host.request("http://docs/%40a%2Fx");
  assert.equal(doc.status, 200);
  assert.equal((await doc.json())._id, "@a/x");
  assert.equal((await host.request("http://docs/nope")).status, 404);
  // Served for real: the document host beside the database.
  const reg = await startRegistry(data, npm);
  try {
    assert.ok(reg.docsUrl);
    const res = await fetch(`${reg.docsUrl}/${encodeURIComponent("@b/y")}`);
    assert.equal((await res.json())._id, "@b/y");
  } finally {
    await reg.close();
  }
});

Deno.test("profile: opaque sequences read back as the state they name, however spelled", async () => {
  const codec = new SeqCodec({ opaqueSeq: true, seqJitter: 0.5, seed: 3 });
  const spellings = new Set<string>();
  for (let i = 0; i < 40; i++) {
    const s = codec.show(1234) as string;
    assert.match(s, /^\d+-g1AAAA/);
    assert.equal(codec.parse(s, 0), 1234);
    spellings.add(s);
  }
  assert.ok(spellings.size > 1, "the leading number jitters");
  assert.ok([...spellings].every((s) => Number(s.split("-")[0]) <= 1234), "only ever lower");
  assert.equal(codec.parse("17", 0), 17);
  assert.equal(codec.parse("now", 99), 99);
  assert.ok(codec.parse("garbage", 0) instanceof Error);
  const app = createRegistryApp(new RegistryData(keys()), { opaqueSeq: true });
  const feed = await (await app.request("http://x/registry/_changes?since=0&limit=2")).json();
  assert.equal(typeof feed.last_seq, "string");
  const next = await app.request(
    `http://x/registry/_changes?since=${encodeURIComponent(feed.last_seq)}&limit=10`,
  );
  assert.deepEqual((await next.json()).results.map((r: { id: string }) => r.id), [
    "alpha",
    "beta",
    "gamma",
    "zeta",
  ]);
});

Deno.test("profile: a document host behind the feed serves what a document was before it changed", () => {
  const data = new RegistryData(keys());
  const first = data.rev("alpha");
  data.put("alpha");
  data.put("new-one");
  const now = Date.now();
  assert.equal(data.docBehind("alpha", 1_000, now)?._rev, first, "the revision before");
  assert.equal(data.docBehind("new-one", 1_000, now), undefined, "not there yet");
  assert.equal(data.docBehind("alpha", 1_000, now + 1_000)?._rev, data.rev("alpha"), "caught up");
  assert.equal(data.docBehind("beta", 1_000, now)?._rev, data.rev("beta"), "unchanged: as it is");
  data.delete("gamma");
  assert.ok(data.docBehind("gamma", 1_000, now), "deleted just now: still served");
});
