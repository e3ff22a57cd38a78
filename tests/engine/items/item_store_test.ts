import assert from "node:assert/strict";
import { idKeyPart } from "../../../lib/engine/items/_item_codec.ts";
import {
  countItems,
  type ExportedItem,
  iterateItems,
} from "../../../lib/engine/items/item_read.ts";
import {
  batchWrites,
  INLINE_DOC_BYTES,
  prepareWrites,
  writeItems,
} from "../../../lib/engine/items/item_store.ts";
import { AtomicBudget, MAX_TOTAL_KEY_BYTES } from "../../../lib/engine/store/kv_limits.ts";
import { keys } from "../../../lib/engine/store/mod.ts";

const doc = (json: string) => ({ kind: "doc" as const, json });

async function exported(kv: Deno.Kv, crawl: string) {
  const got = new Map<string, ExportedItem>();
  for await (const it of iterateItems(kv, crawl)) {
    assert.ok(!got.has(it.id), `${JSON.stringify(it.id)} exported twice`);
    got.set(it.id, it);
  }
  return got;
}

Deno.test("item store: items are idempotent, batched past KV limits, large documents chunked", async () => {
  using kv = await Deno.openKv(":memory:");
  const items = Array.from({ length: 2500 }, (_, i) => ({
    id: `k${String(i).padStart(5, "0")}`,
    rev: "1-a",
    doc: doc(JSON.stringify({ i, pad: "p".repeat(300) })),
  }));
  const big = JSON.stringify({ readme: "é".repeat(200_000) }); // 400 kB of UTF-8
  items.push({ id: "big", rev: "1-b", doc: doc(big) });
  items.push({ id: "huge", rev: "1-c", doc: doc("x".repeat(2_000_000)) });
  items.push(
    { id: "gone", rev: "1-d", doc: { kind: "error", status: 404, reason: "not found" } } as never,
  );
  items.push({ id: "vast", rev: "1-e", doc: { kind: "tooLarge", bytes: 40_000_000 } } as never);
  const stats = await writeItems(kv, "c", items, { maxDocBytes: 1_000_000 });
  assert.deepEqual(stats, { items: 2504, docs: 2503, tooLarge: 2, docErrors: 1 });
  await writeItems(kv, "c", items, { maxDocBytes: 1_000_000 }); // again: nothing doubles
  assert.equal(await countItems(kv, "c"), 2504);
  const all = await exported(kv, "c");
  assert.equal(all.get("big")!.doc, big, "chunked document reassembled exactly");
  assert.deepEqual([all.get("huge")!.tooLarge, all.get("huge")!.docBytes], [true, 2_000_000]);
  assert.deepEqual([all.get("vast")!.tooLarge, all.get("vast")!.docBytes], [true, 40_000_000]);
  assert.deepEqual(all.get("gone")!.error, { status: 404, reason: "not found" });
  const chunks = await Array.fromAsync(kv.list({ prefix: keys.chunks("c", "big") }));
  assert.equal(chunks.length, Math.ceil(400_014 / 60_000));
  assert.ok(INLINE_DOC_BYTES < 65_536);
});

Deno.test("item store: thousands of 214-character ids fit KV's 81,920 key bytes per op", async () => {
  using kv = await Deno.openKv(":memory:");
  // A cluster of long generated names, as real npm has (`@scope/...-sandbox-pr-...`).
  const ids = Array.from(
    { length: 5000 },
    (_, i) => `@sandbox-org/feature-branch-preview-${String(i).padStart(6, "0")}-`.padEnd(214, "x"),
  );
  const writes = await prepareWrites("crawl-with-a-long-id", ids.map((id) => ({ id, rev: "1-a" })));
  const batches = batchWrites(writes, new AtomicBudget());
  for (const b of batches) {
    const keyBytes = b.reduce((n, w) => n + w.keyBytes, 0);
    assert.ok(keyBytes <= MAX_TOTAL_KEY_BYTES, `${keyBytes} key bytes in one op`);
  }
  assert.ok(
    batches.length >= 14,
    `${batches.length} batches: key bytes, not mutations, bound them`,
  );
  await writeItems(kv, "crawl-with-a-long-id", ids.map((id) => ({ id, rev: "1-a" })));
  assert.equal(await countItems(kv, "crawl-with-a-long-id"), 5000);
});

Deno.test("item store: distinct ids stay distinct, lone surrogates and ids built to collide included", async () => {
  using kv = await Deno.openKv(":memory:");
  const long = "@x/" + "ü".repeat(3000); // 6,000+ UTF-8 bytes: a hashed key part
  const part = await idKeyPart(long) as Uint8Array;
  const ids = [
    "s",
    "s\ud800",
    "s\ud801",
    "s\udc00",
    "s\ufffd",
    "\ud800",
    "\udfff\ud800",
    long,
    long.slice(0, -1) + "v",
    long + "\ud800",
    // The format the previous version used for long ids, and strings built from the new key part.
    `${long.slice(0, 400)}\u0000a1b2c3d4e5f6a7b8${long.length}`,
    String.fromCharCode(...part.subarray(0, 900)),
    new TextDecoder().decode(part),
  ];
  await writeItems(kv, "c", ids.map((id, i) => ({ id, rev: `1-${i}` })));
  const all = await exported(kv, "c");
  assert.equal(all.size, ids.length, "every id stored once");
  ids.forEach((id, i) => assert.equal(all.get(id)?.rev, `1-${i}`, `id ${i} comes back exactly`));
  assert.equal(await countItems(kv, "c"), ids.length);
});

Deno.test("item store: a long id with a document near the value limit is chunked, never over it", async () => {
  using kv = await Deno.openKv(":memory:");
  const id = "\ud800".repeat(470); // ill-formed and long: the record carries the id
  const json = JSON.stringify({ pad: "z".repeat(INLINE_DOC_BYTES - 20) });
  await writeItems(kv, "c", [{ id, rev: "1-a", doc: doc(json) }]);
  const all = await exported(kv, "c");
  assert.equal(all.get(id)!.doc, json);
});
