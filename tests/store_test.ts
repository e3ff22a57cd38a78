import assert from "node:assert/strict";
import { commitShard, keys, type ShardRecord } from "../lib/store.ts";

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
