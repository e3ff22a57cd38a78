/** Counting and cutting a crawl's stored items by key range (the final check's parts). */
import assert from "node:assert/strict";
import { cutStored } from "../../../lib/engine/items/stored_parts.ts";
import { MAX_STORED_ID_UNITS } from "../../../lib/engine/items/item_store.ts";
import { plainPartSize } from "../../../lib/engine/items/_item_codec.ts";
import { compareKeys, sortKeys } from "../../../lib/plan/keys.ts";
import { RegistryData } from "../../../lib/sim/registry/registry_data.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { begin, finishAll, spec } from "../../engine_helpers.ts";
import { prng } from "../../../lib/sim/names.ts";
import { randomKeys } from "../../helpers.ts";

const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "\uffff", "z"];

/** Crawls `keys` (documents too when `docs`) into an in-memory KV; returns it and the crawl id. */
async function crawled(keys: string[], o: { docs?: boolean; largeDocRate?: number } = {}) {
  const kv = await Deno.openKv(":memory:");
  const data = new RegistryData(sortKeys(keys), {
    largeDocRate: o.largeDocRate ?? 0,
    largeDocBytes: 20_000,
  });
  const source = new MemorySource(data, { maxPage: 37 });
  const { id } = await begin(kv, source, spec({ shards: 3, maxPage: 37, docs: o.docs }));
  await finishAll(kv, source, id);
  return { kv, id, keys: data.keys };
}

function inRange(keys: readonly string[], start: string | null, end: string | null): string[] {
  return keys.filter((k) =>
    (start === null || compareKeys(k, start) >= 0) && (end === null || compareKeys(k, end) < 0)
  );
}

Deno.test("stored parts: any range is counted exactly and cut at stored ids into parts that cover it", async () => {
  // Ids in blocks, ids stored as records (large documents, ill-formed and long ids) mixed.
  const ids = [
    ...randomKeys(900, UNI, 5, 7),
    "m\ud800",
    "c\udfff-lone",
    "k" + "x".repeat(3_000),
    "q" + "é".repeat(1_500),
  ];
  for (const docs of [false, true]) {
    const { kv, id, keys } = await crawled(ids, { docs, largeDocRate: docs ? 0.3 : 0 });
    try {
      const rand = prng(docs ? 7 : 8);
      const pick = () => rand() < 0.15 ? null : keys[Math.floor(rand() * keys.length)];
      for (let trial = 0; trial < 40; trial++) {
        let [start, end] = [pick(), pick()];
        if (start !== null && end !== null && compareKeys(start, end) > 0) {
          [start, end] = [end, start];
        }
        // Bounds that are not stored ids too: just after one, and ids KV cannot hold as keys.
        if (trial % 3 === 0 && start !== null) start += "\u0000";
        if (trial % 10 === 1) start = "c\udfff-lone";
        if (trial % 10 === 2) end = "m\ud800";
        if (start !== null && end !== null && compareKeys(start, end) > 0) {
          [start, end] = [end, start];
        }
        const want = inRange(keys, start, end);
        const parts = 1 + (trial % 9);
        const cut = await cutStored(kv, id, { start, end }, { parts, expectedItems: want.length });
        assert.ok(cut);
        assert.equal(cut[0].start, start);
        assert.equal(cut.at(-1)!.end, end);
        for (let i = 1; i < cut.length; i++) {
          assert.equal(cut[i].start, cut[i - 1].end, "the parts touch");
          assert.ok(plainPartSize(cut[i].start!) > 0, "cut at an id a listing can start from");
        }
        assert.ok(cut.length <= parts);
        if (want.length >= 4 * parts) assert.equal(cut.length, parts, `${want.length} items`);
        for (const p of cut) {
          assert.equal(p.stored, inRange(keys, p.start, p.end).length, `${trial}: exact count`);
        }
        assert.equal(cut.reduce((n, p) => n + p.stored, 0), want.length);
        // Without the expected count, it is read first: the same parts.
        assert.deepEqual(await cutStored(kv, id, { start, end }, { parts }), cut);
      }
    } finally {
      kv.close();
    }
  }
});

Deno.test("stored parts: a range holding an id kept only by its start cannot be cut", async () => {
  const tooLong = "t" + "y".repeat(MAX_STORED_ID_UNITS + 10);
  const { kv, id } = await crawled([...randomKeys(200, UNI, 9, 6), tooLong]);
  try {
    assert.equal(await cutStored(kv, id, { start: null, end: null }, { parts: 4 }), null);
    // Every range is refused: where the cut id sorts is not known.
    assert.equal(await cutStored(kv, id, { start: "a", end: "b" }), null);
  } finally {
    kv.close();
  }
});
