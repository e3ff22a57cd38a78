/** View rows as string keys: order, round trips, and the least row at or above any string. */
import assert from "node:assert/strict";
import {
  ceilViewRow,
  type Collation,
  collationOf,
  compareJson,
  compareViewRows,
  decodeViewRow,
  encodeJson,
  encodeViewRow,
  type Json,
  type ViewRowKey,
} from "../../lib/plan/view/view_keys.ts";
import { compareKeys } from "../../lib/plan/keys.ts";
import { prng } from "../../lib/sim/names.ts";

const COLLATIONS: Collation[] = ["typed", "pouch", "raw"];
const CHARS = [
  "",
  "a",
  "b",
  "\u0000",
  "\u0001",
  "\u0002",
  "é",
  "\u{1f600}",
  "\ue000",
  "\uff21",
  "A",
  "z",
];
const NUMBERS = [0, -0, 1, -1, 0.5, -0.5, 2, 1e21, -1e21, 5e-324, -5e-324, 1.7976931348623157e308];

function randomJson(rand: () => number, depth = 0): Json {
  const t = Math.floor(rand() * (depth > 2 ? 5 : 7));
  if (t === 0) return null;
  if (t === 1) return rand() < 0.5;
  if (t === 2) {
    return rand() < 0.5
      ? NUMBERS[Math.floor(rand() * NUMBERS.length)]
      : Math.round((rand() - 0.5) * 1000) / 8;
  }
  if (t === 3 || t === 4) {
    let s = "";
    for (let n = Math.floor(rand() * 4); n > 0; n--) s += CHARS[Math.floor(rand() * CHARS.length)];
    return s;
  }
  if (t === 5) {
    return Array.from({ length: Math.floor(rand() * 3) }, () => randomJson(rand, depth + 1));
  }
  const o: Record<string, Json> = {};
  for (let n = Math.floor(rand() * 3); n > 0; n--) {
    o[`k${Math.floor(rand() * 3)}`] = randomJson(rand, depth + 1);
  }
  return o;
}

function randomRows(n: number, seed: number): ViewRowKey[] {
  const rand = prng(seed);
  return Array.from({ length: n }, () => ({
    key: randomJson(rand),
    docid: ["", "a", "b", "a\u0001", "é", "\ue000", "\u{1f600}"][Math.floor(rand() * 7)] +
      (rand() < 0.3 ? "x" : ""),
    // Repeats of a pair (a document emitting one key several times), up to the largest ordinal.
    dup: rand() < 0.7 ? 0 : rand() < 0.9 ? 1 + Math.floor(rand() * 20) : 0xffff_ffff,
  }));
}

Deno.test("view keys: the encoding orders rows exactly as the view collation does", () => {
  for (const c of COLLATIONS) {
    const rows = randomRows(3000, 1);
    const byCollation = [...rows].sort((a, b) => compareViewRows(a, b, c))
      .map((r) => encodeViewRow(r, c));
    const byEncoding = rows.map((r) => encodeViewRow(r, c)).sort(compareKeys);
    assert.deepEqual(byEncoding, byCollation, c);
  }
  // pouchdb's strings: by UTF-16 unit, so astral characters come before U+E000..U+FFFF.
  assert.ok(compareJson("\u{1f600}", "\ue000", "pouch") < 0);
  assert.ok(compareJson("\u{1f600}", "\ue000", "typed") > 0);
  assert.ok(compareKeys(encodeJson("\u{1f600}", "pouch"), encodeJson("\ue000", "pouch")) < 0);
  // Raw collation is Erlang term order: numbers < false < null < true < objects < arrays <
  // strings; within a type, as in the typed collation.
  const raw: Json[] = [
    -1e21,
    0,
    2,
    false,
    null,
    true,
    {},
    { a: 1 },
    { b: null },
    [],
    [1],
    [1, "a"],
    ["a"],
    "",
    "A",
    "a",
    "é",
  ];
  for (let i = 1; i < raw.length; i++) {
    const pair = JSON.stringify(raw.slice(i - 1, i + 1));
    assert.ok(compareJson(raw[i - 1], raw[i], "raw") < 0, pair);
    assert.ok(compareKeys(encodeJson(raw[i - 1], "raw"), encodeJson(raw[i], "raw")) < 0, pair);
  }
  // The collation's own rules, spelled out.
  const ordered: Json[] = [
    null,
    false,
    true,
    -1e21,
    -1,
    0,
    0.5,
    1,
    2,
    "",
    "\u0000",
    "A",
    "a",
    "a\u0000",
    "aa",
    "b",
    "é",
    "\u{1f600}",
    [],
    [null],
    [1],
    [1, null],
    [1, "a"],
    ["a"],
    [[]],
    {},
    { a: null },
    { a: 1 },
    { a: 1, b: 1 },
    { b: null },
  ];
  for (let i = 1; i < ordered.length; i++) {
    assert.ok(
      compareJson(ordered[i - 1], ordered[i]) < 0,
      JSON.stringify(ordered.slice(i - 1, i + 1)),
    );
    assert.ok(compareKeys(encodeJson(ordered[i - 1]), encodeJson(ordered[i])) < 0);
  }
  assert.equal(compareJson(-0, 0), 0);
  assert.equal(encodeJson(-0), encodeJson(0));
});

Deno.test("view keys: rows round-trip; other strings are not rows", () => {
  for (const c of COLLATIONS) {
    for (const row of randomRows(2000, 2)) {
      const encoded = encodeViewRow(row, c);
      assert.equal(collationOf(encoded), c);
      const back = decodeViewRow(encoded);
      assert.equal(compareViewRows(back, row, c), 0, JSON.stringify(row));
      assert.equal(back.docid, row.docid);
      assert.equal(back.dup ?? 0, row.dup ?? 0);
    }
  }
  // A docid holding U+0000 would read as a repeat: refused, as are ordinals out of range.
  assert.throws(() => encodeViewRow({ key: 1, docid: "a\u0000" }), RangeError);
  assert.throws(() => encodeViewRow({ key: 1, docid: "a", dup: 2 ** 32 }), RangeError);
  assert.throws(() => encodeViewRow({ key: 1, docid: "a", dup: -1 }), RangeError);
  assert.throws(() => decodeViewRow(encodeViewRow({ key: 1, docid: "a" }) + "\u000000000000"));
  for (const bad of ["", "H", "D12", "Eab", "F", "Ez\u0001\u0005\u0000"]) {
    assert.throws(() => decodeViewRow(bad), RangeError, JSON.stringify(bad));
  }
  assert.throws(() => encodeJson(Infinity), RangeError);
});

for (const c of COLLATIONS) {
  Deno.test(`view keys: ceil is the least row at or above any string, and monotone (${c})`, () => {
    const rows = randomRows(1500, 3).map((r) => encodeViewRow(r, c)).sort(compareKeys);
    const rand = prng(4);
    const alphabet = [
      "A",
      "B",
      "C",
      "D",
      "E",
      "F",
      "G",
      "H",
      "I",
      "L",
      "O",
      "P",
      "\u0000",
      "\u0001",
      "\u0002",
      "\u0003",
      "0",
      "7",
      "8",
      "9",
      ":",
      "a",
      "f",
      "g",
      "z",
      "é",
      "k",
    ];
    const probes: string[] = [];
    for (let i = 0; i < 3000; i++) {
      // Mostly a real row cut short and changed at one place: the strings a search makes up.
      const base = rows[Math.floor(rand() * rows.length)];
      const at = Math.floor(rand() * (base.length + 1));
      const tail = Array.from(
        { length: Math.floor(rand() * 3) },
        () => alphabet[Math.floor(rand() * alphabet.length)],
      ).join("");
      probes.push(base.slice(0, at) + tail);
    }
    probes.push(
      "",
      "A",
      "H",
      "Gzz",
      "D" + "f".repeat(16),
      "D" + "f".repeat(15) + "g",
      "D0",
      "F\u0000",
      "EaB",
      "Ea\u0000Ea\u0000",
      "Ea\u0000Ea\u0000ff",
      "Ea\u0000Ea\u0000ffffffff",
      "Ea\u0000Ea\u0000ffffffff0",
      "Ea\u0000Ea\u0000g",
      "Ea\u0000Ea\u00000000000",
      "Ea\u0000Ea\u00009:",
    );
    probes.sort(compareKeys);
    let last = "";
    for (const s of probes) {
      const r = ceilViewRow(s, c);
      if (r === null) {
        assert.ok(rows.every((x) => compareKeys(x, s) < 0), `nothing above ${JSON.stringify(s)}`);
        last = "\u{10ffff}";
        continue;
      }
      const e = encodeViewRow(r, c);
      assert.ok(
        compareKeys(e, s) >= 0,
        `ceil(${JSON.stringify(s)}) = ${JSON.stringify(e)} is below it`,
      );
      // No real row lies between the string and its ceiling.
      for (const x of rows) {
        if (compareKeys(x, s) >= 0) {
          assert.ok(
            compareKeys(x, e) >= 0,
            `${JSON.stringify(x)} between ${JSON.stringify(s)} and ${JSON.stringify(e)}`,
          );
        }
      }
      assert.ok(compareKeys(e, last) >= 0, "monotone");
      last = e;
    }
    for (const x of rows.slice(0, 300)) assert.equal(encodeViewRow(ceilViewRow(x, c)!, c), x);
  });
}
