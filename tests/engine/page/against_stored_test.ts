/**
 * `againstStored` (`lib/engine/page/against_stored.ts`): a document without a revision held
 * against the one it replaces by `modified`.
 */
import assert from "node:assert/strict";
import { againstStored } from "../../../lib/engine/page/against_stored.ts";

const at = (h: number) => new Date(Date.UTC(2026, 0, 1, h)).toISOString();
const doc = (h: number) => ({
  kind: "doc" as const,
  json: JSON.stringify({ name: "a", modified: at(h) }),
});
const row = { id: "a", rev: "3-c" };

Deno.test("against stored: older or equal to what an earlier revision stored is behind; newer is taken", () => {
  const stored = { rev: "2-b", doc: JSON.stringify({ name: "a", modified: at(2) }) };
  assert.deepEqual(againstStored(row, doc(3), stored), doc(3));
  for (const h of [1, 2]) {
    const r = againstStored(row, doc(h), stored);
    assert.equal(r.kind, "failed");
    assert.ok(r.kind === "failed" && r.behind);
    assert.match(
      (r as { reason: string }).reason,
      new RegExp(`modified ${at(h)}, no later than the one stored \\(modified ${at(2)}\\)`),
    );
  }
  // The same revision stored: an older document is behind, the same one is taken.
  const same = { rev: "3-c", doc: JSON.stringify({ name: "a", modified: at(3) }) };
  assert.deepEqual(againstStored(row, doc(3), same), doc(3));
  assert.equal(againstStored(row, doc(2), same).kind, "failed");
  // An item recorded behind keeps the time it was held against in its reason.
  const behind = againstStored(row, doc(2), stored) as { reason: string };
  const recorded = { rev: "3-c", error: { reason: behind.reason } };
  assert.equal(againstStored(row, doc(2), recorded).kind, "failed", "still the stale one");
  assert.deepEqual(againstStored(row, doc(3), recorded), doc(3), "the host caught up");
  // Nothing to hold it against: taken as it is.
  assert.deepEqual(againstStored(row, doc(1), undefined), doc(1));
  assert.deepEqual(againstStored(row, doc(1), { rev: "2-b", doc: "{}" }), doc(1));
  const bad = { kind: "doc" as const, json: "{not json" };
  assert.deepEqual(againstStored(row, bad, stored), bad);
  const raw = { kind: "raw" as const, bytes: new TextEncoder().encode(doc(1).json) };
  assert.equal(againstStored(row, raw, stored).kind, "failed", "raw bytes are read too");
  const error = { kind: "error" as const, status: 404, reason: "missing" };
  assert.deepEqual(againstStored(row, error, stored), error);
});
