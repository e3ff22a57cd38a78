/**
 * Reading items the way a served copy is asked: ids stored under byte-string key parts (ill-formed
 * UTF-16, or too long for a string key) come where their ids sort, in either direction and with
 * either bound, and are counted so.
 */
import assert from "node:assert/strict";
import { compareKeys } from "../../../lib/plan/keys.ts";
import { idKeyPart } from "../../../lib/engine/items/_item_codec.ts";
import { countItemsBetween, itemsBetween } from "../../../lib/engine/items/item_lookup.ts";
import { writeItems } from "../../../lib/engine/items/item_store.ts";

Deno.test("item lookup: ids under byte-string keys come where they sort, with either bound and in either direction", async () => {
  using kv = await Deno.openKv(":memory:");
  const long = "d" + "x".repeat(2_000); // over 1,900 bytes: a hashed byte-string key part
  const ids = ["a", "b\ud800", "b", "c", long, "e", "\udfff", "d\ud800z", "f"];
  for (const id of ["b\ud800", long, "\udfff"]) {
    assert.ok(typeof await idKeyPart(id) !== "string", `${id.slice(0, 4)} has a byte key`);
  }
  await writeItems(kv, "c", ids.map((id, i) => ({ id, rev: `1-${i}`, doc: doc(i) })));
  const sorted = [...ids].sort(compareKeys);
  for (const from of [null, "b", "b\ud800", "c", "d", "dz", "\udfff"]) {
    for (const to of [null, "c", "d\ud800z", "e", "\ue000"]) {
      if (from !== null && to !== null && compareKeys(from, to) >= 0) continue; // callers' rule
      const want = sorted.filter((id) =>
        (from === null || compareKeys(id, from) >= 0) && (to === null || compareKeys(id, to) < 0)
      );
      for (const descending of [false, true]) {
        const got: string[] = [];
        for await (const batch of itemsBetween(kv, "c", { from, to, descending })) {
          for (const it of batch) {
            assert.equal(it.doc, doc(ids.indexOf(it.id)).json, "its own document");
            got.push(it.id);
          }
        }
        const asked = JSON.stringify({ from, to, descending });
        assert.deepEqual(got, descending ? want.toReversed() : want, asked);
      }
      assert.equal(await countItemsBetween(kv, "c", { from, to }), want.length);
    }
  }
});

function doc(i: number) {
  return { kind: "doc" as const, json: JSON.stringify({ i }) };
}
