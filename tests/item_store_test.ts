import assert from "node:assert/strict";
import { keys } from "../lib/engine/store.ts";
import {
  countItems,
  INLINE_DOC_BYTES,
  iterateItems,
  writeItems,
} from "../lib/engine/item_store.ts";

Deno.test("item store: items are idempotent, batched past KV limits, large documents chunked", async () => {
  using kv = await Deno.openKv(":memory:");
  const items = Array.from({ length: 2500 }, (_, i) => ({
    id: `k${String(i).padStart(5, "0")}`,
    rev: "1-a",
    docJson: JSON.stringify({ i, pad: "p".repeat(300) }),
  }));
  const big = JSON.stringify({ readme: "é".repeat(200_000) }); // 400 kB of UTF-8
  items.push({ id: "big", rev: "1-b", docJson: big });
  items.push({ id: "huge", rev: "1-c", docJson: "x".repeat(2_000_000) });
  items.push({ id: "gone", rev: "1-d", error: { status: 404, reason: "not found" } } as never);
  const stats = await writeItems(kv, "c", items, { maxDocBytes: 1_000_000 });
  assert.deepEqual(stats, { items: 2503, docs: 2502, tooLarge: 1, docErrors: 1 });
  await writeItems(kv, "c", items, { maxDocBytes: 1_000_000 }); // again: nothing doubles
  assert.equal(await countItems(kv, "c"), 2503);
  const all = new Map<string, Awaited<ReturnType<typeof iterateItems>["next"]>>();
  for await (const it of iterateItems(kv, "c")) all.set(it.id, it as never);
  const b = [...all.values()].map((x) => x as unknown as { id: string; doc?: string });
  assert.equal(b.find((x) => x.id === "big")!.doc, big, "chunked document reassembled exactly");
  const huge = b.find((x) => x.id === "huge") as unknown as {
    tooLarge: boolean;
    docBytes: number;
  };
  assert.equal(huge.tooLarge, true);
  assert.equal(huge.docBytes, 2_000_000);
  const chunks = [];
  for await (const e of kv.list({ prefix: keys.chunks("c", "big") })) chunks.push(e);
  assert.equal(chunks.length, Math.ceil(400_014 / 60_000));
  assert.ok(INLINE_DOC_BYTES < 65_536);
});

Deno.test("item store: an id too long for a KV key is stored under a hashed key, whole", async () => {
  using kv = await Deno.openKv(":memory:");
  const long = "@x/" + "ü".repeat(3000); // 6,000+ UTF-8 bytes
  const other = long.slice(0, -1) + "v";
  await writeItems(kv, "c", [
    { id: long, rev: "1-a", docJson: JSON.stringify({ big: "y".repeat(100_000) }) },
    { id: other, rev: "1-b" },
    { id: "short", rev: "1-c" },
  ]);
  const got = new Map<string, string | undefined>();
  for await (const it of iterateItems(kv, "c")) got.set(it.id, it.doc);
  assert.equal(got.size, 3);
  assert.equal(JSON.parse(got.get(long)!).big.length, 100_000);
  assert.ok(got.has(other) && got.has("short"));
});
