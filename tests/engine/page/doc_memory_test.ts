/**
 * Bounded memory for documents: a process's budget of document bytes, large answers read and
 * stored a few at a time, large documents kept as bytes and written to their chunks as they
 * arrive. Counted in documents and bytes, never in time.
 */
import assert from "node:assert/strict";
import { Semaphore } from "../../../lib/base/pool.ts";
import { buildSpec } from "../../../lib/base/spec.ts";
import { runLocalCrawl } from "../../../lib/cli/local_crawl.ts";
import { iterateItems } from "../../../lib/engine/items/item_read.ts";
import { DocMemory } from "../../../lib/engine/page/doc_memory.ts";
import { listCrawls } from "../../../lib/engine/store/mod.ts";
import { bundledNames, syntheticNames } from "../../../lib/sim/names.ts";
import { RegistryData } from "../../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../../lib/sim/registry/registry_server.ts";
import { RAW_DOC_BYTES, rawDocFromBody } from "../../../lib/sources/answers/couch_answers.ts";
import { LARGE_ANSWER_BYTES } from "../../../lib/sources/http/body_read.ts";

const enc = new TextEncoder();

Deno.test("doc memory: requests wait while the budget is spent, and go on as it is refunded", async () => {
  const m = new DocMemory(100);
  m.charge(60);
  assert.equal(m.full, false);
  await m.room();
  m.charge(60);
  assert.equal(m.full, true);
  let went = 0;
  const waiting = [m.room().then(() => went++), m.room().then(() => went++)];
  await Promise.resolve();
  assert.equal(went, 0, "nothing goes on while the budget is spent");
  m.refund(60);
  await Promise.all(waiting);
  assert.equal(went, 2);
  assert.equal(m.held, 60);
  m.refund(1000);
  assert.equal(m.held, 0, "never below zero");
});

Deno.test("doc memory: a large document is checked and read as bytes, never as text", () => {
  const doc = { _id: "big", _rev: "3-abc", readme: "x".repeat(200), nested: { a: [1, "}", "\\"] } };
  const pretty = enc.encode(JSON.stringify(doc, null, 2) + "\n");
  const r = rawDocFromBody(pretty, "big");
  assert.equal(r.kind, "raw");
  if (r.kind !== "raw") return;
  assert.equal(r.docRev, "3-abc");
  const text = new TextDecoder().decode(r.bytes);
  assert.ok(!text.includes("\n"), "one line");
  assert.deepEqual(JSON.parse(text), doc, "the same value");
  // Another document's body is that item's error; a cut one is asked again.
  const other = rawDocFromBody(enc.encode(JSON.stringify({ ...doc, _id: "small" })), "big");
  assert.equal(other.kind, "error");
  const whole = enc.encode(JSON.stringify(doc));
  for (const cut of [whole.length - 1, whole.length >> 1, 10]) {
    assert.throws(() => rawDocFromBody(whole.subarray(0, cut), "big"), /invalid JSON/);
  }
  assert.throws(() => rawDocFromBody(enc.encode("[1,2]"), "big"), /invalid JSON/);
  assert.ok(RAW_DOC_BYTES >= LARGE_ANSWER_BYTES);
});

Deno.test("doc memory: 2% of documents over 2 MiB: each stored exactly once, at most the permits' worth of large answers at a time", async () => {
  const keys = syntheticNames(await bundledNames(), 500, { seed: 41 });
  const data = new RegistryData(keys, { largeDocRate: 0.03, largeDocBytes: 2 * 1024 * 1024 });
  const reg = await startRegistry(data, { includeDocs: false, bulkGet: false });
  const dir = await Deno.makeTempDir();
  let holding = 0;
  let most = 0;
  const gate = new Semaphore(2);
  const counted = {
    overBytes: LARGE_ANSWER_BYTES,
    permits: Object.assign(Object.create(gate), {
      acquire: async () => {
        const release = await gate.acquire();
        most = Math.max(most, ++holding);
        return () => (holding--, release());
      },
    }) as Semaphore,
  };
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: buildSpec({ source: reg.url, shards: 4, docs: true, concurrency: 16 }),
      sourceUrl: reg.url,
      sourceOptions: { largeAnswers: counted },
    });
    assert.equal(res.report.status, "done");
    using kv = await Deno.openKv(`${dir}/c.kv`);
    const [crawl] = await listCrawls(kv);
    let large = 0;
    const seen = new Set<string>();
    for await (const it of iterateItems(kv, crawl.id)) {
      assert.ok(!seen.has(it.id));
      seen.add(it.id);
      const doc = JSON.parse(it.doc!);
      assert.deepEqual(doc, data.doc(it.id), it.id);
      if ((it.docBytes ?? 0) > LARGE_ANSWER_BYTES) large++;
    }
    assert.equal(seen.size, 500);
    assert.ok(large >= 8, `${large} large documents`);
    assert.ok(most >= 1 && most <= 2, `${most} large answers held at once (2 permits)`);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
