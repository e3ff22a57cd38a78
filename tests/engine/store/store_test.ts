import assert from "node:assert/strict";
import { planningRecord } from "../../../lib/engine/crawl/planning.ts";
import { countItems } from "../../../lib/engine/items/item_read.ts";
import { writeItems } from "../../../lib/engine/items/item_store.ts";
import {
  commitShard,
  type CrawlRecord,
  deleteCrawlData,
  feedUsable,
  followable,
  keys,
  newShard,
  type ShardRecord,
} from "../../../lib/engine/store/mod.ts";
import { spec } from "../../engine_helpers.ts";

Deno.test("store: a shard commit guarded by a stale versionstamp writes nothing", async () => {
  using kv = await Deno.openKv(":memory:");
  const shard = newShard({ id: 0, start: null, end: null, cursor: null }, {
    expected: 5,
    nowMs: 0,
  });
  await kv.set(keys.shard("c", 0), shard);
  const entry = await kv.get<ShardRecord>(keys.shard("c", 0));
  const first = await commitShard(kv, "c", entry as Deno.KvEntry<ShardRecord>, {
    ...shard,
    pages: 1,
  });
  assert.ok(first && first.versionstamp !== entry.versionstamp);
  const stale = await commitShard(
    kv,
    "c",
    entry as Deno.KvEntry<ShardRecord>,
    { ...shard, pages: 2 },
    (op) => op.set(["side"], 1),
  );
  assert.equal(stale, null);
  assert.equal((await kv.get(["side"])).value, null, "the extra mutation was not applied");
  assert.equal((await kv.get<ShardRecord>(keys.shard("c", 0))).value!.pages, 1);
});

Deno.test("store: deleting a crawl removes every key it owns, in bounded batches", async () => {
  using kv = await Deno.openKv(":memory:");
  const crawl = planningRecord(spec(), "gone", 0);
  await kv.set(keys.crawl("gone"), { ...crawl, status: "done" });
  await kv.set(keys.crawl("kept"), { ...crawl, id: "kept", status: "done" });
  for (const id of ["gone", "kept"]) {
    await writeItems(
      kv,
      id,
      Array.from({ length: 1200 }, (_, i) => ({
        id: `p${i}-` + "x".repeat(i % 200),
        rev: "1-a",
        doc: {
          kind: "doc" as const,
          json: JSON.stringify({ pad: "y".repeat(i === 7 ? 150_000 : 10) }),
        },
      })),
    );
    await kv.set(
      keys.shard(id, 0),
      newShard({ id: 0, start: null, end: null, cursor: null }, {
        expected: 1200,
        nowMs: 0,
      }),
    );
    await kv.set(keys.dead(id, 0), { kind: "shard" });
  }
  const entry = await kv.get<CrawlRecord>(keys.crawl("gone"));
  const n = await deleteCrawlData(kv, entry as Deno.KvEntry<CrawlRecord>, { batch: 100 });
  assert.equal(n, 1200 + 3 + 1 + 1, "items, chunks of one large document, a shard, the record");
  for (const prefix of [["item", "gone"], ["chunk", "gone"], ["shard", "gone"], ["dead", "gone"]]) {
    assert.equal((await Array.fromAsync(kv.list({ prefix }))).length, 0, prefix.join("/"));
  }
  assert.equal((await kv.get(keys.crawl("gone"))).value, null);
  assert.equal(await countItems(kv, "kept"), 1200, "the other crawl is untouched");
});

Deno.test("store: guarded commits from 4 processes on one KV file, retried when locked, count exactly", async () => {
  const dir = await Deno.makeTempDir();
  const path = `${dir}/c.kv`;
  const storeUrl = new URL("../../../lib/engine/store/mod.ts", import.meta.url).href;
  // Each process adds 1 to a shard's counter 150 times with read + guarded commit, retrying
  // conflicts; `database is locked` from the others is absorbed by withLockRetry.
  const code = `
    import { commitShard, getShard, keys, kvOp } from ${JSON.stringify(storeUrl)};
    const kv = await kvOp(() => Deno.openKv(${JSON.stringify(path)}));
    for (let i = 0; i < 150; i++) {
      for (;;) {
        const e = await getShard(kv, "c", 0);
        const v = e.value ?? { id: 0, items: 0 };
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

Deno.test("store: a crawl is followed only when done with a usable feed, one test for all", () => {
  const base = { ...planningRecord(spec(), "f", 0), status: "done" as const, startSeq: "7" };
  assert.equal(feedUsable(base), true);
  assert.equal(followable(base), true);
  assert.equal(feedUsable({ ...base, startSeq: null }), false, "no start sequence was read");
  // A feed refused at the final check is asked again by the follower (its failures shown).
  assert.equal(feedUsable({ ...base, driftError: "change feed unavailable: 400" }), true);
  assert.equal(followable({ ...base, status: "running" }), false, "not done");
  assert.equal(feedUsable({ ...base, status: "running" }), true, "the final check applies it");
  assert.equal(followable(null), false);
});
