/**
 * Smaller documents: `--doc-fields` keeps only the top-level fields asked for (`_id`, `_rev`
 * always), in listings with documents and in GETs alike, the export unchanged in shape; a crawl
 * keeping fewer fields is another crawl. `--abbreviated` asks the document host for npm's
 * abbreviated metadata. Bad lists are one line.
 */
import assert from "node:assert/strict";
import { buildSpec, crawlIdFor } from "../../lib/base/spec.ts";
import { keepFields } from "../../lib/sources/couch/doc_fields.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { runTask } from "../helpers.ts";

const NAMES = Array.from({ length: 300 }, (_, i) => `pkg-${String(i).padStart(3, "0")}`);

Deno.test("doc fields: what a document keeps, and what a spec takes", async () => {
  const doc = { _id: "a", _rev: "1-x", name: "a", readme: "long", versions: { "1.0.0": {} } };
  const cut = keepFields({ kind: "doc", json: JSON.stringify(doc), docRev: "1-x" }, [
    "versions",
    "name",
    "time",
  ]);
  assert.deepEqual(cut, {
    kind: "doc",
    json: '{"_id":"a","_rev":"1-x","versions":{"1.0.0":{}},"name":"a"}',
    docRev: "1-x",
  });
  const raw = keepFields(
    { kind: "raw", bytes: new TextEncoder().encode(JSON.stringify(doc)), docRev: "1-x" },
    ["name"],
  );
  assert.deepEqual(raw, {
    kind: "doc",
    json: '{"_id":"a","_rev":"1-x","name":"a"}',
    docRev: "1-x",
  });
  const error = { kind: "error" as const, status: 404, reason: "not found" };
  assert.equal(keepFields(error, ["name"]), error);
  const base = { source: "http://127.0.0.1:1/db", docs: true };
  const spec = buildSpec({ ...base, docFields: [" name", "_id", "versions", "name"] });
  assert.deepEqual(spec.docFields, ["name", "versions"]);
  assert.notEqual(await crawlIdFor(spec), await crawlIdFor(buildSpec(base)));
  assert.equal(await crawlIdFor(buildSpec({ ...base })), await crawlIdFor(buildSpec(base)));
  for (
    const bad of [
      [],
      ["_rev"],
      [""],
      ["a\nb"],
      Array.from({ length: 101 }, (_, i) => `f${i}`),
    ]
  ) {
    assert.throws(() => buildSpec({ ...base, docFields: bad }), /^InputError: docFields/);
  }
  assert.throws(() => buildSpec({ ...base, abbreviated: true }), /give docsUrl too/);
  // Options about documents on a crawl without them would do nothing: refused, in the caller's
  // words.
  const bare = { source: base.source };
  assert.throws(() => buildSpec({ ...bare, docFields: ["name"] }), /docFields is about documents/);
  assert.throws(() => buildSpec({ ...bare, docsUrl: "http://127.0.0.1:2/" }), /give docs too/);
  assert.throws(
    () =>
      buildSpec({ ...bare, abbreviated: true }, {
        names: { abbreviated: "--abbreviated", docs: "--docs" },
      }),
    /^InputError: --abbreviated is about documents, .* give --docs too/,
  );
  assert.equal(buildSpec({ ...bare, docsUrl: null, abbreviated: false }).docs, false);
});

for (const how of ["include_docs", "one GET each"] as const) {
  Deno.test(`doc fields: --doc-fields name,versions, documents by ${how}`, async () => {
    const data = new RegistryData(NAMES);
    const reg = await startRegistry(
      data,
      how === "include_docs" ? {} : { ...npmReplicaProfile(), docsElsewhere: true },
    );
    const dir = await Deno.makeTempDir();
    try {
      const run = await runTask("crawl", [
        ...["--source", reg.url, "--docs", "--kv", `${dir}/c.kv`, "--shards", "3"],
        ...(reg.docsUrl ? ["--docs-url", reg.docsUrl] : []),
        ...["--doc-fields", "name,versions"],
      ]);
      assert.equal(run.code, 0, run.stderr);
      const out = await runTask("export", ["--kv", `${dir}/c.kv`]);
      assert.equal(out.code, 0, out.stderr);
      const lines = out.stdout.trim().split("\n").map((l) => JSON.parse(l));
      assert.deepEqual(lines.map((l) => l.id), NAMES);
      for (const l of lines) {
        const whole = data.doc(l.id)!;
        assert.deepEqual(Object.keys(l), ["id", "rev", "doc"]);
        assert.deepEqual(l.doc, {
          _id: whole._id,
          _rev: whole._rev,
          name: whole.name,
          versions: whole.versions,
        });
        assert.equal(l.rev, whole._rev);
      }
    } finally {
      await reg.close();
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("doc fields: --abbreviated asks the document host for install metadata, on every request", async () => {
  const data = new RegistryData(NAMES.slice(0, 40));
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docsElsewhere: true });
  const accepts = new Map<string, Set<string>>();
  const front = (target: string, label: string) =>
    Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      const u = new URL(req.url);
      if (!accepts.has(label)) accepts.set(label, new Set());
      accepts.get(label)!.add(req.headers.get("accept") ?? "");
      const res = await fetch(target + u.pathname + u.search);
      const headers = new Headers(res.headers);
      headers.delete("content-encoding");
      headers.delete("content-length");
      return new Response(res.body, { status: res.status, headers });
    });
  const docs = front(reg.docsUrl!, "docs");
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--docs", "--kv", `${dir}/c.kv`, "--shards", "2"],
      ...["--docs-url", `http://127.0.0.1:${docs.addr.port}`, "--abbreviated"],
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual([...accepts.get("docs")!], ["application/vnd.npm.install-v1+json"]);
    const out = await runTask("export", ["--kv", `${dir}/c.kv`]);
    assert.equal(out.stdout.trim().split("\n").length, 40);
  } finally {
    await docs.shutdown();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
