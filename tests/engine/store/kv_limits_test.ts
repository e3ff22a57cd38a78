/** The accounting in kv_limits.ts against KV itself: one byte each side of each limit. */
import assert from "node:assert/strict";
import {
  AtomicBudget,
  keySize,
  kvFailureKind,
  MAX_KEY_BYTES,
  MAX_PAYLOAD_BYTES,
  MAX_TOTAL_KEY_BYTES,
  MAX_VALUE_BYTES,
  storageCause,
  utf8Length,
} from "../../../lib/engine/store/kv_limits.ts";

async function commits(op: Deno.AtomicOperation): Promise<string> {
  try {
    return (await op.commit()).ok ? "ok" : "conflict";
  } catch (err) {
    return (err as Error).message;
  }
}

/** An op of `set`s whose keys sum to exactly `total` encoded bytes. */
function keysSummingTo(
  kv: Deno.Kv,
  total: number,
): { op: Deno.AtomicOperation; budget: AtomicBudget } {
  const op = kv.atomic();
  const budget = new AtomicBudget();
  for (let i = 0, used = 0; used < total; i++) {
    const want = Math.min(1000, total - used);
    const key = ["k", `${String(i).padStart(8, "0")}`.padEnd(want - 5, "x")];
    assert.equal(keySize(key), want);
    op.set(key, new Uint8Array(0));
    budget.set(want, 0);
    used += want;
  }
  return { op, budget };
}

Deno.test("kv limits: total key bytes of sets, exactly", async () => {
  using kv = await Deno.openKv(":memory:");
  const at = keysSummingTo(kv, MAX_TOTAL_KEY_BYTES);
  assert.equal(at.budget.setKeys, MAX_TOTAL_KEY_BYTES);
  assert.equal(await commits(at.op), "ok");
  const over = keysSummingTo(kv, MAX_TOTAL_KEY_BYTES + 1);
  assert.equal(over.budget.fitsSet(0, 0), false, "the budget refuses what KV refuses");
  assert.match(await commits(over.op), /Total key size too large/);
  assert.equal(kvFailureKind(new TypeError("Total key size too large (max 81920 bytes)")), "limit");
});

Deno.test("kv limits: payload counts checks, deletes and sets (key twice) exactly", async () => {
  using kv = await Deno.openKv(":memory:");
  for (const extra of ["check", "delete"] as const) {
    for (const delta of [0, 1]) {
      const op = kv.atomic();
      const b = new AtomicBudget();
      for (let i = 0; i < 12; i++) {
        op.set(["p", i], new Uint8Array(MAX_VALUE_BYTES));
        b.set(keySize(["p", i]), MAX_VALUE_BYTES);
      }
      const k = [extra, "x".repeat(100)];
      if (extra === "check") (op.check({ key: k, versionstamp: null }), b.check(keySize(k)));
      else (op.delete(k), b.delete(keySize(k)));
      const last = ["q"];
      const rest = MAX_PAYLOAD_BYTES - b.payload + delta - 2 * keySize(last);
      assert.equal(b.fitsSet(keySize(last), rest), delta === 0);
      op.set(last, new Uint8Array(rest));
      const res = await commits(op);
      if (delta === 0) assert.equal(res, "ok", extra);
      else assert.match(res, /Total mutation size too large/, extra);
    }
  }
});

Deno.test("kv limits: key and value sizes, NUL escapes and non-ASCII counted as KV does", async () => {
  using kv = await Deno.openKv(":memory:");
  assert.equal(keySize(["a\u0000b"]), 6);
  assert.equal(keySize(["é中😀"]), 2 + 2 + 3 + 4);
  assert.equal(keySize([new Uint8Array([0, 1, 0])]), 2 + 3 + 2);
  assert.equal(keySize([7]), 9);
  const fits = ["x".repeat(MAX_KEY_BYTES - 2)];
  assert.equal(keySize(fits), MAX_KEY_BYTES);
  await kv.set(fits, 1);
  await assert.rejects(() => kv.set(["x".repeat(MAX_KEY_BYTES - 1)], 1), /Key too large/);
  await kv.set(["v"], new Uint8Array(MAX_VALUE_BYTES));
  await assert.rejects(() => kv.set(["v"], new Uint8Array(MAX_VALUE_BYTES + 1)), /too large/);
  assert.equal(kvFailureKind(new Error("database or disk is full")), "storage");
  assert.equal(kvFailureKind(new Error("disk I/O error")), "storage");
  assert.equal(kvFailureKind(new Error("database is locked")), "locked");
  assert.equal(kvFailureKind(new Error("database disk image is malformed")), "storage");
  // A full disk loses nothing; an I/O error may be a full disk or a damaged file: said as both;
  // a malformed file is damaged.
  assert.equal(storageCause(new Error("database or disk is full")), "full");
  assert.equal(storageCause(new Error("disk I/O error")), "failed");
  assert.equal(storageCause(new Error("KV: database disk image is malformed")), "damaged");
});

Deno.test("utf8Length: the bytes TextEncoder writes, lone surrogates as 3", () => {
  const enc = new TextEncoder();
  const parts = ["a", "é", "中", "😀", "\ud800", "\udc00", "\u0000", "\u07ff", "\u0800", "\uffff"];
  for (const x of parts) {
    for (const y of parts) {
      for (const z of ["", ...parts]) {
        const s = x + y + z;
        assert.equal(utf8Length(s), enc.encode(s).length, JSON.stringify(s));
      }
    }
  }
});
