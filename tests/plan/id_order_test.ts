/** Ids of registries ordered by UTF-16 code unit, carried as keys ordered by code point. */
import assert from "node:assert/strict";
import { idOfKey, keyOfId } from "../../lib/plan/id_order.ts";
import { compareKeys } from "../../lib/plan/keys.ts";
import { prng } from "../../lib/sim/names.ts";

const CHARS = [
  "a",
  "z",
  "é",
  "\u00ff",
  "\u0100",
  "中",
  "\ud7ff",
  "\ue000",
  "\uf8ff",
  "\ufffd",
  "\uffff",
  "\u{10000}",
  "\u{1f600}",
  "\u{11fff}",
  "\u{12000}",
  "\u{10fffd}",
  "\u{10ffff}",
];

function utf16(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

Deno.test("id order: keys sort by code point as their ids sort by UTF-16 unit, and map back", () => {
  const rand = prng(5);
  const ids = Array.from(
    { length: 4000 },
    () =>
      Array.from(
        { length: 1 + Math.floor(rand() * 4) },
        () => CHARS[Math.floor(rand() * CHARS.length)],
      ).join(""),
  );
  const unique = [...new Set(ids)];
  const byUnits = [...unique].sort(utf16);
  const byKeys = unique.map((id) => keyOfId(id, "utf16")).sort(compareKeys).map((k) =>
    idOfKey(k, "utf16")
  );
  assert.deepEqual(byKeys, byUnits);
  for (const id of unique) assert.equal(idOfKey(keyOfId(id, "utf16"), "utf16"), id);
  // Plain ids are their own keys; code point order changes nothing.
  assert.equal(keyOfId("react", "utf16"), "react");
  assert.equal(keyOfId("\u{1f600}", "codepoint"), "\u{1f600}");
  // The greatest key maps to the greatest id by UTF-16 units: a listing's open end.
  assert.equal(idOfKey("\u{10ffff}\u{10ffff}\u{10ffff}", "utf16"), "\uffff\uffff\uffff");
  // Any string is a key: its id maps back to it (probes are made-up strings).
  for (const k of ["\ue000", "\u{10e000}", "a\u{10dfff}", "\uffff"]) {
    assert.equal(keyOfId(idOfKey(k, "utf16"), "utf16"), k);
  }
});
