import assert from "node:assert/strict";
import {
  Alphabet,
  codePoints,
  compareKeys,
  keyBetween,
  lowerBound,
  sortKeys,
} from "../../lib/plan/keys.ts";
import { prng } from "../../lib/sim/names.ts";

Deno.test("compareKeys: table of code point order cases", () => {
  const cases: [string, string, number][] = [
    ["", "", 0],
    ["", "a", -1],
    ["a", "", 1],
    ["a", "ab", -1], // a proper prefix sorts first
    ["ab", "b", -1],
    ["Z", "a", -1],
    ["@types/node", "a", -1],
    ["\uffff", "\u{10000}", -1], // UTF-16 `<` gets this one wrong
    ["\ue000", "\u{1f600}", -1],
    ["\u{10ffff}", "\uffff", 1],
    ["a\u0000", "a", 1],
    ["é", "z", 1],
    ["\u00ff", "\u0100", -1],
  ];
  for (const [a, b, sign] of cases) {
    assert.equal(
      Math.sign(compareKeys(a, b)),
      sign,
      `${JSON.stringify(a)} vs ${JSON.stringify(b)}`,
    );
  }
  // UTF-16 comparison disagrees on the astral case; ours agrees with UTF-8 bytes.
  assert.equal("\uffff" < "\u{10000}", false);
});

Deno.test("compareKeys agrees with raw UTF-8 byte order on random strings", () => {
  const rand = prng(3);
  const pool = ["a", "b", "\u0000", "é", "\uffff", "\ue000", "\u{10000}", "\u{1f600}", "-", "@"];
  const enc = new TextEncoder();
  const bytesCmp = (x: string, y: string) => {
    const a = enc.encode(x);
    const b = enc.encode(y);
    for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i];
    return a.length - b.length;
  };
  for (let i = 0; i < 2000; i++) {
    const mk = () =>
      Array.from({ length: Math.floor(rand() * 4) }, () => pool[Math.floor(rand() * pool.length)])
        .join("");
    const x = mk();
    const y = mk();
    assert.equal(Math.sign(compareKeys(x, y)), Math.sign(bytesCmp(x, y)), `${x} ${y}`);
  }
});

Deno.test("sortKeys and lowerBound use code point order", () => {
  const keys = sortKeys(["\u{10000}", "\uffff", "b", "a", ""]);
  assert.deepEqual(keys, ["", "a", "b", "\uffff", "\u{10000}"]);
  assert.equal(lowerBound(keys, "a"), 1);
  assert.equal(lowerBound(keys, "\ufffe"), 3);
  assert.equal(lowerBound(keys, "\u{10ffff}"), 5);
});

Deno.test("keyBetween: strictly between, valid UTF-8, null when impossible", () => {
  const alphabet = new Alphabet(["apple", "banana"]);
  const cases: [string, string | null][] = [
    ["", "a"],
    ["a", "b"],
    ["a", "ab"],
    ["a", "a\u0001"],
    ["abc", "abd"],
    ["\uffff", "\u{10000}"],
    ["\u{10000}", "\u{10001}"],
    ["z", null],
    ["", null],
    ["@types/a", "@types/b"],
    ["a\u0000\u0000", "a\u0000\u0001"],
    ["\ud7ff", "\ue000"],
  ];
  for (const [lo, hi] of cases) {
    for (const f of [0, 0.1, 0.5, 0.9, 1]) {
      const k = keyBetween(lo, hi, f, alphabet);
      assert.ok(k !== null, `no key between ${JSON.stringify(lo)} and ${JSON.stringify(hi)}`);
      assert.ok(compareKeys(lo, k) < 0, `${JSON.stringify(k)} > ${JSON.stringify(lo)}`);
      if (hi !== null) {
        assert.ok(compareKeys(k, hi) < 0, `${JSON.stringify(k)} < ${JSON.stringify(hi)}`);
      }
      assert.ok(
        !/[\ud800-\udfff]/u.test(k.replace(/[\u{10000}-\u{10ffff}]/gu, "")),
        "no lone surrogate",
      );
    }
  }
  assert.equal(keyBetween("a", "a\u0000", 0.5, alphabet), null);
  assert.equal(keyBetween("b", "a", 0.5, alphabet), null);
  assert.equal(keyBetween("a", "a", 0.5, alphabet), null);
});

Deno.test("keyBetween: property on random pairs over a unicode alphabet", () => {
  const rand = prng(11);
  const chars = [
    "a",
    "b",
    "z",
    "-",
    "/",
    "@",
    "é",
    "ж",
    "\uffff",
    "\u{10000}",
    "\u{1f600}",
    "\u0000",
  ];
  const mk = () =>
    Array.from(
      { length: 1 + Math.floor(rand() * 6) },
      () => chars[Math.floor(rand() * chars.length)],
    )
      .join("");
  const alphabet = new Alphabet(["abc"]);
  for (let i = 0; i < 3000; i++) {
    let [lo, hi] = [mk(), mk()];
    if (compareKeys(lo, hi) > 0) [lo, hi] = [hi, lo];
    if (lo === hi) continue;
    const k = keyBetween(lo, hi, rand(), alphabet);
    if (k === null) {
      // Only possible when hi = lo + "\0"...: nothing exists strictly between.
      assert.ok(
        hi.startsWith(lo) && [...hi.slice(lo.length)].every((c) => c === "\u0000"),
        `${lo} ${hi}`,
      );
      continue;
    }
    assert.ok(compareKeys(lo, k) < 0 && compareKeys(k, hi) < 0, `${lo} < ${k} < ${hi}`);
  }
});

Deno.test("Alphabet encode is monotonic in key order", () => {
  const keys = sortKeys(["a", "ab", "abc", "b", "ba", "z", "zz", "-", "@x/y"]);
  const alphabet = new Alphabet(keys);
  const xs = keys.map((k) => alphabet.encode(codePoints(k), 0));
  for (let i = 1; i < xs.length; i++) assert.ok(xs[i - 1] < xs[i], `${keys[i - 1]} < ${keys[i]}`);
});
