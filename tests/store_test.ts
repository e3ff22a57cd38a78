import assert from "node:assert/strict";
import {
  commitShard,
  countItems,
  INLINE_DOC_BYTES,
  iterateItems,
  keys,
  type ShardRecord,
  writeItems,
} from "../lib/store.ts";

Deno.test("store: items are idempotent, batched past KV limits, large documents chunked", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
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
  } finally {
    kv.close();
  }
});

Deno.test("store: a shard commit guarded by a stale versionstamp writes nothing", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const shard = { id: 0, token: 0, items: 0 } as ShardRecord;
    await kv.set(keys.shard("c", 0), shard);
    const entry = await kv.get<ShardRecord>(keys.shard("c", 0));
    assert.equal(
      await commitShard(kv, "c", entry as Deno.KvEntry<ShardRecord>, { ...shard, token: 1 }),
      true,
    );
    const extraRan: boolean[] = [];
    const ok = await commitShard(
      kv,
      "c",
      entry as Deno.KvEntry<ShardRecord>,
      { ...shard, token: 2 },
      (op) => (extraRan.push(true), op.set(["side"], 1)),
    );
    assert.equal(ok, false);
    assert.equal((await kv.get(["side"])).value, null, "the extra mutation was not applied");
    assert.equal((await kv.get<ShardRecord>(keys.shard("c", 0))).value!.token, 1);
  } finally {
    kv.close();
  }
});
