import assert from "node:assert/strict";
import { commitShard, keys, type ShardRecord } from "../lib/engine/store.ts";

Deno.test("store: a shard commit guarded by a stale versionstamp writes nothing", async () => {
  using kv = await Deno.openKv(":memory:");
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
});

Deno.test("store: guarded commits from 4 processes on one KV file, retried when locked, count exactly", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/c.kv`;
  const storeUrl = new URL("../lib/engine/store.ts", import.meta.url).href;
  // Each process adds 1 to a shard's counter 150 times with read + guarded commit, retrying
  // conflicts; `database is locked` from the others is absorbed by withLockRetry.
  const code = `
    import { commitShard, getShard, keys } from ${JSON.stringify(storeUrl)};
    const kv = await Deno.openKv(${JSON.stringify(path)});
    for (let i = 0; i < 150; i++) {
      for (;;) {
        const e = await getShard(kv, "c", 0);
        const v = e.value ?? { id: 0, items: 0, token: 0 };
        const entry = e.value ? e : { key: keys.shard("c", 0), value: v, versionstamp: null };
        if (await commitShard(kv, "c", entry, { ...v, items: v.items + 1 })) break;
      }
    }
    kv.close();
  `;
  try {
    const runs = Array.from({ length: 4 }, () =>
      new Deno.Command(Deno.execPath(), {
        args: ["eval", "--unstable-kv", code],
        stdout: "null",
        stderr: "piped",
      }).output());
    for (const out of await Promise.all(runs)) {
      assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    }
    using kv = await Deno.openKv(path);
    assert.equal((await kv.get<ShardRecord>(keys.shard("c", 0))).value!.items, 600);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
