import assert from "node:assert/strict";
import { startKvConnectServer } from "../../lib/sim/kv_connect_server.ts";

Deno.test("kv connect server: Deno's remote KV client reads, writes, checks and lists through it", async () => {
  const server = startKvConnectServer("kv-secret");
  const before = Deno.env.get("DENO_KV_ACCESS_TOKEN");
  Deno.env.set("DENO_KV_ACCESS_TOKEN", "kv-secret");
  const kv = await Deno.openKv(server.url);
  try {
    const first = await kv.set(["a", 1], { n: 1 });
    assert.ok(first.ok);
    const got = await kv.get<{ n: number }>(["a", 1]);
    assert.deepEqual(got.value, { n: 1 });
    assert.equal(got.versionstamp, first.versionstamp);
    // A check against the versionstamp read commits; against an old one, it does not.
    const ok = await kv.atomic().check(got).set(["a", 1], { n: 2 }).set(["a", 2], "two").commit();
    assert.ok(ok.ok);
    assert.equal((await kv.atomic().check(got).set(["a", 1], { n: 3 }).commit()).ok, false);
    assert.equal(
      (await kv.atomic().check({ key: ["a", 3], versionstamp: null }).set(["a", 3], 3).commit()).ok,
      true,
    );
    await kv.set(["b"], new Uint8Array([1, 2, 3]));
    await kv.atomic().sum(["count"], 5n).sum(["count"], 7n).commit();
    assert.equal((await kv.get<Deno.KvU64>(["count"])).value?.value, 12n);
    const listed = [];
    for await (const e of kv.list({ prefix: ["a"] })) listed.push([e.key, e.value]);
    assert.deepEqual(listed, [[["a", 1], { n: 2 }], [["a", 2], "two"], [["a", 3], 3]]);
    const reversed = [];
    for await (const e of kv.list({ prefix: ["a"] }, { reverse: true, limit: 2 })) {
      reversed.push(e.key);
    }
    assert.deepEqual(reversed, [["a", 3], ["a", 2]]);
    // Pages of a long listing come back whole.
    const ops = kv.atomic();
    for (let i = 0; i < 800; i++) ops.set(["many", i], i);
    assert.ok((await ops.commit()).ok);
    let n = 0;
    for await (const e of kv.list<number>({ prefix: ["many"] }, { batchSize: 100 })) {
      assert.equal(e.value, n++);
    }
    assert.equal(n, 800);
    await kv.delete(["b"]);
    assert.equal((await kv.get(["b"])).value, null);
    assert.equal(server.size(), 4 + 800);
  } finally {
    kv.close();
    if (before === undefined) Deno.env.delete("DENO_KV_ACCESS_TOKEN");
    else Deno.env.set("DENO_KV_ACCESS_TOKEN", before);
    await server.close();
  }
});
