import assert from "node:assert/strict";
import { createRegistryApp, type RegistryStats } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { sortKeys } from "../../lib/plan/keys.ts";

const KEYS = sortKeys(["a", "b", "c", "@s/x", "@s/y", "é", "\uffff", "\u{10000}", "z"]);

async function get(app: ReturnType<typeof createRegistryApp>, path: string) {
  const res = await app.request(path);
  return { status: res.status, body: await res.json() };
}

const q = (o: Record<string, string>) => new URLSearchParams(o).toString();

Deno.test("registry: _all_docs offsets are ranks in code point order", async () => {
  const app = createRegistryApp(new RegistryData(KEYS.slice()), { db: "db" });
  const all = await get(app, "/db/_all_docs");
  assert.equal(all.body.total_rows, KEYS.length);
  assert.deepEqual(all.body.rows.map((r: { id: string }) => r.id), KEYS);
  assert.equal(KEYS.at(-1), "\u{10000}"); // astral after U+FFFF
  const r = await get(app, `/db/_all_docs?${q({ startkey: '"b"', limit: "2" })}`);
  assert.equal(r.body.offset, KEYS.indexOf("b"));
  assert.deepEqual(r.body.rows.map((x: { id: string }) => x.id), ["b", "c"]);
  const between = await get(app, `/db/_all_docs?${q({ startkey: '"bb"', limit: "1" })}`);
  assert.equal(between.body.offset, KEYS.indexOf("c"));
  const past = await get(app, `/db/_all_docs?${q({ startkey: '"\u{10ffff}"', limit: "1" })}`);
  assert.equal(past.body.offset, KEYS.length);
  assert.deepEqual(past.body.rows, []);
});

Deno.test("registry: endkey, inclusive_end, descending, skip, limits", async () => {
  const app = createRegistryApp(new RegistryData(KEYS.slice()), { db: "db", maxLimit: 5 });
  const ids = (b: { rows: { id: string }[] }) => b.rows.map((r) => r.id);
  const inc = await get(app, `/db/_all_docs?${q({ startkey: '"a"', endkey: '"c"' })}`);
  assert.deepEqual(ids(inc.body), ["a", "b", "c"]);
  const exc = await get(
    app,
    `/db/_all_docs?${q({ start_key: '"a"', end_key: '"c"', inclusive_end: "false" })}`,
  );
  assert.deepEqual(ids(exc.body), ["a", "b"]);
  const desc = await get(
    app,
    `/db/_all_docs?${q({ startkey: '"c"', descending: "true", limit: "2" })}`,
  );
  assert.deepEqual(ids(desc.body), ["c", "b"]);
  const last = await get(app, `/db/_all_docs?${q({ descending: "true", limit: "1" })}`);
  assert.deepEqual(ids(last.body), ["\u{10000}"]);
  const skip = await get(app, `/db/_all_docs?${q({ skip: "2", limit: "1" })}`);
  assert.equal(skip.body.offset, 2);
  assert.deepEqual(ids(skip.body), [KEYS[2]]);
  assert.equal((await get(app, `/db/_all_docs?limit=6`)).status, 400);
  assert.equal((await get(app, `/db/_all_docs?startkey=abc`)).status, 400);
  assert.equal((await get(app, `/db/_all_docs?limit=-1`)).status, 400);
  const noSkip = createRegistryApp(new RegistryData(KEYS.slice()), { db: "db", skip: false });
  assert.equal((await get(noSkip, `/db/_all_docs?skip=1`)).status, 400);
});

Deno.test("registry: documents by encoded id, include_docs, 404s", async () => {
  const app = createRegistryApp(new RegistryData(KEYS.slice()), { db: "db" });
  const doc = await get(app, `/db/${encodeURIComponent("@s/x")}`);
  assert.equal(doc.status, 200);
  assert.equal(doc.body._id, "@s/x");
  assert.equal((await get(app, `/db/${encodeURIComponent("\u{10000}")}`)).body._id, "\u{10000}");
  assert.equal((await get(app, "/db/nope")).status, 404);
  assert.equal((await get(app, "/other/_all_docs")).status, 404);
  const inc = await get(app, `/db/_all_docs?${q({ limit: "1", include_docs: "true" })}`);
  assert.equal(inc.body.rows[0].doc._id, KEYS[0]);
});

Deno.test("registry: mutations move ranks and appear in _changes once each", async () => {
  const data = new RegistryData(["a", "c"]);
  const app = createRegistryApp(data, { db: "db" });
  assert.equal(data.updateSeq, 2);
  await app.request("/db/b", { method: "PUT" });
  await app.request("/db/a", { method: "DELETE" });
  await app.request("/db/b", { method: "PUT" });
  assert.deepEqual(data.keys, ["b", "c"]);
  const ch = await get(app, "/db/_changes?since=2");
  assert.deepEqual(
    ch.body.results.map((r: { id: string; deleted?: boolean }) => [r.id, r.deleted ?? false]),
    [["a", true], ["b", false]],
  );
  assert.equal(ch.body.last_seq, 5);
  const all = await get(app, "/db/_changes?since=0");
  assert.deepEqual(all.body.results.map((r: { id: string }) => r.id), ["c", "a", "b"]);
});

Deno.test("registry: injected faults are the kinds asked for, at about the rate asked", async () => {
  const app = createRegistryApp(new RegistryData(KEYS.slice()), {
    db: "db",
    faultRate: 0.5,
    faults: ["503", "429"],
    retryAfterS: 3,
  });
  const statuses = new Map<number, number>();
  for (let i = 0; i < 200; i++) {
    const res = await app.request("/db/_all_docs?limit=1");
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    if (res.status === 429) assert.equal(res.headers.get("retry-after"), "3");
    await res.body?.cancel();
  }
  assert.deepEqual([...statuses.keys()].sort(), [200, 429, 503]);
  assert.ok(statuses.get(200)! > 60 && statuses.get(200)! < 140);
});

Deno.test("registry: offset as a rank, always 0, or absent (no rank oracle)", async () => {
  const b = KEYS.indexOf("b");
  for (const [mode, want] of [["rank", b], ["zero", 0], ["absent", undefined]] as const) {
    const app = createRegistryApp(new RegistryData(KEYS.slice()), { db: "db", offsetMode: mode });
    const r = await get(app, `/db/_all_docs?${q({ startkey: '"b"', limit: "2" })}`);
    assert.equal(r.body.offset, want, mode);
    assert.equal("offset" in r.body, mode !== "absent");
    assert.deepEqual(r.body.rows.map((x: { id: string }) => x.id), ["b", "c"]);
  }
});

Deno.test("registry: documents carry an ETag and max-age, and If-None-Match answers 304 without a body", async () => {
  const data = new RegistryData(KEYS.slice());
  const stats: RegistryStats = {
    requests: 0,
    allDocs: 0,
    docs: 0,
    bulkGets: 0,
    changes: 0,
    faults: 0,
  };
  const app = createRegistryApp(data, { db: "db", stats });
  const first = await app.request("/db/b");
  const etag = first.headers.get("etag")!;
  assert.equal(etag, `"${data.rev("b")}"`);
  assert.equal(first.headers.get("cache-control"), "public, max-age=300");
  assert.equal((await first.json())._rev, data.rev("b"));
  const again = await app.request("/db/b", { headers: { "if-none-match": etag } });
  assert.equal(again.status, 304);
  assert.equal(await again.text(), "");
  assert.equal(stats.notModified, 1);
  // The abbreviated form has its own tag; a changed document, a new one.
  const abbr = await app.request("/db/b", {
    headers: { accept: "application/vnd.npm.install-v1+json", "if-none-match": etag },
  });
  assert.equal(abbr.status, 200);
  assert.equal(abbr.headers.get("etag"), `"${data.rev("b")}-abbreviated"`);
  assert.deepEqual(Object.keys(await abbr.json()).sort(), [
    "dist-tags",
    "modified",
    "name",
    "versions",
  ]);
  data.put("b");
  const changed = await app.request("/db/b", { headers: { "if-none-match": etag } });
  assert.equal(changed.status, 200);
  assert.notEqual(changed.headers.get("etag"), etag);
  await changed.body?.cancel();
});
