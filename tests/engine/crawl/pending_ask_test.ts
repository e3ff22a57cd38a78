/**
 * Pending documents asked again (`crawl/pending_ask.ts` over `items/pending_docs.ts`): a document
 * its host served behind its item's revision waits in KV, is asked again conditionally on a
 * growing schedule, lands at the item's revision (noted for sinks), or is given up on after the
 * window; an entry whose item moved on is dropped.
 */
import assert from "node:assert/strict";
import { askPendingDocs } from "../../../lib/engine/crawl/mod.ts";
import { writeItems } from "../../../lib/engine/items/item_store.ts";
import { itemsByIds } from "../../../lib/engine/items/mod.ts";
import { keys } from "../../../lib/engine/store/mod.ts";
import { PENDING_DOCS } from "../../../lib/base/retry_policy.ts";
import type { DocOptions, DocResult } from "../../../lib/plan/source.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { FakeClock } from "../../fake_clock.ts";
import { dataOf, wrapSource } from "../../helpers.ts";
import { begin, ctxOf, spec } from "../../engine_helpers.ts";

const BEHIND: DocResult = {
  kind: "error",
  status: 0,
  reason: "the document served is revision 1-old, not the listed 2-new",
  later: true,
  etag: '"1-old"',
};

/** A crawl "t" with documents, items a and b pending at 2-new, and a host answering `answer`. */
async function setup(answer: (id: string, o: DocOptions) => DocResult, first = BEHIND) {
  const kv = await Deno.openKv(":memory:");
  const inner = new MemorySource(dataOf(["a", "b"]));
  const asked: { id: string; ifNoneMatch?: string }[] = [];
  const source = wrapSource(inner, {
    doc: (id, o = {}) => {
      asked.push({ id, ifNoneMatch: o.ifNoneMatch });
      return Promise.resolve(answer(id, o));
    },
  });
  const { crawl } = await begin(kv, inner, spec({ docs: true }));
  const clock = new FakeClock();
  await writeItems(kv, crawl.id, [
    { id: "a", rev: "2-new", doc: first },
    { id: "b", rev: "2-new", doc: first },
  ], { nowMs: clock.now() });
  const pass = () => askPendingDocs(ctxOf(kv, source, { clock, maxDocBytes: 1 << 20 }), crawl);
  return { kv, crawl, clock, asked, pass };
}

Deno.test("pending docs: asked again with the ETag seen, a 304 waits longer, the document lands at its revision and is noted", async () => {
  let current = false;
  const { kv, crawl, clock, asked, pass } = await setup((id, o) =>
    current
      ? { kind: "doc", json: `{"_id":"${id}","_rev":"2-new"}`, docRev: "2-new" }
      : o.ifNoneMatch === '"1-old"'
      ? { kind: "error", status: 304, reason: "not modified", later: true }
      : BEHIND
  );
  try {
    let p = await pass();
    assert.deepEqual([p.pending, p.asked], [2, 0], "not due before its first pause");
    assert.equal(p.nextMs, clock.now() + PENDING_DOCS.firstPauseMs);
    await clock.advance(PENDING_DOCS.firstPauseMs);
    p = await pass();
    assert.deepEqual([p.pending, p.asked, p.notModified, p.landed], [2, 2, 2, 0]);
    assert.deepEqual(asked.map((a) => a.ifNoneMatch), ['"1-old"', '"1-old"']);
    assert.equal(p.nextMs, clock.now() + 2 * PENDING_DOCS.firstPauseMs, "the pause doubles");
    await clock.advance(PENDING_DOCS.firstPauseMs);
    assert.equal((await pass()).asked, 0, "not due yet");
    current = true;
    await clock.advance(PENDING_DOCS.firstPauseMs);
    p = await pass();
    assert.deepEqual([p.pending, p.asked, p.landed, p.nextMs], [0, 2, 2, null]);
    assert.deepEqual(p.state && { ...p.state, atMs: 0 }, {
      notes: 2,
      pending: 0,
      asked: 4,
      notModified: 2,
      landed: 2,
      expired: 0,
      atMs: 0,
      lease: null,
    });
    const items = await itemsByIds(kv, crawl.id, ["a", "b"]);
    assert.equal(items.get("a")?.doc, '{"_id":"a","_rev":"2-new"}');
    assert.equal(items.get("a")?.pending, undefined);
    assert.equal(items.get("a")?.error, undefined);
    const notes = [];
    for await (const e of kv.list({ prefix: keys.notes(crawl.id, "docs") })) notes.push(e.value);
    assert.deepEqual(notes, [{ kind: "ids", ids: ["a"] }, { kind: "ids", ids: ["b"] }]);
    let entries = 0;
    for await (const _ of kv.list({ prefix: keys.pendingDocs(crawl.id) })) entries++;
    assert.equal(entries, 0);
  } finally {
    kv.close();
  }
});

Deno.test("pending docs: a 404 for a new package (no ETag to ask with) waits 10 s, then a pause doubling from it, and lands", async () => {
  const NEW: DocResult = { kind: "error", status: 404, reason: "not found", later: true };
  let current = false;
  const { kv, clock, asked, pass } = await setup(
    (id) =>
      current ? { kind: "doc", json: `{"_id":"${id}","_rev":"2-new"}`, docRev: "2-new" } : NEW,
    NEW,
  );
  try {
    assert.equal((await pass()).nextMs, clock.now() + PENDING_DOCS.unconditionalFirstPauseMs);
    await clock.advance(PENDING_DOCS.firstPauseMs);
    assert.equal((await pass()).asked, 0, "not at the conditional pause");
    await clock.advance(PENDING_DOCS.unconditionalFirstPauseMs - PENDING_DOCS.firstPauseMs);
    let p = await pass();
    assert.deepEqual([p.pending, p.asked, p.notModified], [2, 2, 0]);
    assert.deepEqual(
      asked.map((a) => a.ifNoneMatch),
      [undefined, undefined],
      "nothing to ask with",
    );
    assert.equal(p.nextMs, clock.now() + 2 * PENDING_DOCS.unconditionalFirstPauseMs);
    current = true;
    await clock.advance(2 * PENDING_DOCS.unconditionalFirstPauseMs);
    p = await pass();
    assert.deepEqual([p.pending, p.asked, p.landed], [0, 2, 2]);
  } finally {
    kv.close();
  }
});

Deno.test("pending docs: one still behind after the window is its item's error, asked again hourly, and the item takes it when it comes", async () => {
  let current = false;
  const { kv, crawl, clock, pass } = await setup((id) =>
    current ? { kind: "doc", json: `{"_id":"${id}","_rev":"2-new"}`, docRev: "2-new" } : BEHIND
  );
  try {
    await clock.advance(PENDING_DOCS.windowMs);
    let p = await pass();
    assert.deepEqual([p.pending, p.expired, p.landed, p.asked], [0, 2, 0, 0]);
    assert.equal(p.state?.expired, 2);
    const a = (await itemsByIds(kv, crawl.id, ["a"])).get("a")!;
    assert.equal(a.rev, "2-new");
    assert.equal(a.pending, undefined);
    assert.match(
      a.error!.reason,
      /^still behind its revision 2-new after 600 s and 0 asks \(asked again hourly\): the/,
    );
    await clock.advance(PENDING_DOCS.firstPauseMs);
    p = await pass();
    assert.equal(p.asked, 0, "not asked again before the hour");
    current = true;
    await clock.advance(PENDING_DOCS.afterWindowEveryMs);
    p = await pass();
    assert.deepEqual([p.pending, p.landed, p.asked], [0, 2, 2]);
    assert.equal(p.state?.expired, 0, "no longer errors");
    assert.equal(p.state?.landed, 2);
    const landed = (await itemsByIds(kv, crawl.id, ["a"])).get("a")!;
    assert.equal(landed.doc, '{"_id":"a","_rev":"2-new"}');
    assert.equal(landed.error, undefined);
  } finally {
    kv.close();
  }
});

Deno.test("pending docs: an entry whose item moved on (rewritten, deleted) is dropped, the item untouched", async () => {
  const { kv, crawl, clock, asked, pass } = await setup(() => BEHIND);
  try {
    await writeItems(kv, crawl.id, [{
      id: "a",
      rev: "3-later",
      doc: { kind: "doc", json: '{"_id":"a"}' },
    }]);
    await kv.delete(keys.item(crawl.id, "b"));
    await clock.advance(PENDING_DOCS.firstPauseMs);
    const p = await pass();
    assert.deepEqual([p.pending, p.asked, p.landed, p.expired], [0, 0, 0, 0]);
    assert.deepEqual(asked, []);
    const items = await itemsByIds(kv, crawl.id, ["a", "b"]);
    assert.equal(items.get("a")?.doc, '{"_id":"a"}');
    assert.equal(items.get("b"), undefined);
  } finally {
    kv.close();
  }
});

Deno.test("pending docs: the host's own error for one (a 403) is its item's error, counted as given up on, not landed", async () => {
  const { kv, crawl, clock, pass } = await setup(() => ({
    kind: "error",
    status: 403,
    reason: "access denied",
  }));
  try {
    await clock.advance(PENDING_DOCS.firstPauseMs);
    const p = await pass();
    assert.deepEqual([p.pending, p.asked, p.landed, p.expired], [0, 2, 0, 2]);
    assert.deepEqual([p.state?.landed, p.state?.expired], [0, 2]);
    const a = (await itemsByIds(kv, crawl.id, ["a"])).get("a")!;
    assert.deepEqual(a.error, { status: 403, reason: "access denied" });
    assert.equal(a.pending, undefined);
  } finally {
    kv.close();
  }
});

Deno.test("pending docs: two askers of one crawl at once: one asks, the other leaves it to it", async () => {
  let answer!: () => void;
  const held = new Promise<void>((r) => answer = r);
  const { kv, crawl, clock, asked } = await setup(() => BEHIND);
  try {
    const source = wrapSource(new MemorySource(dataOf(["a", "b"])), {
      doc: async (id) => (asked.push({ id }), await held, BEHIND),
    });
    const ctx = { kv, source, clock, maxDocBytes: 1 << 20 };
    await clock.advance(PENDING_DOCS.firstPauseMs);
    const first = askPendingDocs({ ...ctx, owner: "one" }, crawl);
    while (asked.length < 2) await new Promise((r) => setTimeout(r, 1));
    const second = await askPendingDocs({ ...ctx, owner: "two" }, crawl);
    assert.deepEqual([second.asked, second.pending], [0, 2], "the first holds the lease");
    answer();
    const p = await first;
    assert.equal(p.asked, 2);
    assert.equal(asked.length, 2, "each document asked once");
    assert.equal(
      (await kv.get<{ lease: unknown }>(keys.pendingDocsState(crawl.id))).value?.lease,
      null,
    );
  } finally {
    kv.close();
  }
});
