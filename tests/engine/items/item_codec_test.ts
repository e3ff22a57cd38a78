import assert from "node:assert/strict";
import {
  decodeItem,
  encodeItem,
  idKeyPart,
  isWellFormed,
  needsBytesKey,
} from "../../../lib/engine/items/_item_codec.ts";

Deno.test("item codec: records round-trip with only the fields they have", () => {
  const keysOnly = encodeItem({ rev: "3-0123456789abcdef0123456789abcdef" });
  assert.equal(keysOnly.length, 2 + 34, "a flags byte, a length byte, the revision");
  assert.deepEqual(decodeItem(keysOnly), { rev: "3-0123456789abcdef0123456789abcdef" });
  const full = {
    rev: "1-é",
    id: "s\ud800x",
    docBytes: 300_000,
    chunks: 5,
    error: { status: 403, reason: "access denied — ü" },
  };
  assert.deepEqual(decodeItem(encodeItem(full)), full);
  const inline = { rev: "1-a", doc: new TextEncoder().encode('{"a":1}'), docBytes: 7 };
  const back = decodeItem(encodeItem(inline));
  assert.equal(new TextDecoder().decode(back.doc), '{"a":1}');
  assert.deepEqual(decodeItem(encodeItem({ rev: "1", tooLarge: true, docBytes: 9e9 })), {
    rev: "1",
    tooLarge: true,
    docBytes: 9e9,
  });
  assert.throws(() => decodeItem(encodeItem(full).subarray(0, 8)), RangeError);
  // A pending document: its host's answer as the error, and the mark that it is asked again.
  const pending = {
    rev: "2-b",
    error: { status: 304, reason: "not modified" },
    pending: true as const,
  };
  assert.deepEqual(decodeItem(encodeItem(pending)), pending);
  assert.equal(
    decodeItem(encodeItem({ rev: "2-b", pending: true })).pending,
    undefined,
    "only with its error",
  );
});

Deno.test("item codec: key parts are the id when UTF-8 holds it exactly, bytes otherwise", async () => {
  assert.equal(await idKeyPart("@types/node"), "@types/node");
  assert.equal(await idKeyPart("😀"), "😀");
  assert.ok(isWellFormed("a😀b") && !isWellFormed("a\ud83d") && !isWellFormed("\ude00"));
  const a = await idKeyPart("s\ud800") as Uint8Array;
  const b = await idKeyPart("s\ud801") as Uint8Array;
  assert.ok(a instanceof Uint8Array && a[0] === 0, "exact bytes, tag 0");
  assert.notDeepEqual(a, b);
  const long = await idKeyPart("x".repeat(5000)) as Uint8Array;
  assert.equal(long[0], 1, "hashed, tag 1");
  assert.ok(needsBytesKey("x".repeat(5000)) && !needsBytesKey("x".repeat(1000)));
});

Deno.test("item codec: the fast path agrees with the general one", async () => {
  const { encodeRevOnly, plainPartSize } = await import("../../../lib/engine/items/_item_codec.ts");
  const { keySize } = await import("../../../lib/engine/store/kv_limits.ts");
  for (const id of ["a", "é中😀", "a\u0000b", "x".repeat(1900), "x".repeat(1901), "s\ud800"]) {
    const part = await idKeyPart(id);
    assert.equal(
      plainPartSize(id),
      typeof part === "string" ? keySize([part]) : -1,
      JSON.stringify(id.slice(0, 8)),
    );
  }
  const rev = "12-0123456789abcdef0123456789abcdef";
  assert.deepEqual(encodeRevOnly(rev), encodeItem({ rev }));
  assert.equal(encodeRevOnly("1-é"), null, "non-ASCII revisions take the general path");
});
