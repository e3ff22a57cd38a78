/**
 * The sink seam (`lib/engine/sinks/`): a toy sink, counting what it is told, kept equal to what a
 * crawl stores from the ledger's notes: the crawl's pages, the followed registry's changes, a
 * row sweep's repairs and a range listed again; given its batches again after it failed half-way
 * (at least once, the same in effect), and given the whole crawl again once it fell behind what
 * the ledger keeps.
 */
import assert from "node:assert/strict";
import { clockWithNow } from "../../../lib/base/clock.ts";
import { deliver, type Sink, type SinkBatch } from "../../../lib/engine/sinks/mod.ts";
import { iterateItems } from "../../../lib/engine/items/mod.ts";
import { followTick } from "../../../lib/engine/verify/follow.ts";
import { checkCompletion } from "../../../lib/engine/verify/completion.ts";
import { getCrawl, keys, listShards } from "../../../lib/engine/store/mod.ts";
import { prng } from "../../../lib/sim/names.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { compareKeys } from "../../../lib/plan/keys.ts";
import { begin, ctxOf, finishAll, runOne, spec } from "../../engine_helpers.ts";
import { dataOf, randomKeys, wrapSource } from "../../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");

/** A sink that holds what it is told in a map, and counts it. */
class ToySink implements Sink {
  held = new Map<string, { rev: string; doc?: string }>();
  batches = 0;
  applied = 0;
  /** Throws at the batch of this number (counting from 1), once. */
  failAt = 0;
  constructor(readonly name = "toy") {}
  apply(b: SinkBatch): Promise<void> {
    if (++this.batches === this.failAt) return Promise.reject(new Error("sink crashed"));
    if (b.range) {
      const { from, to } = b.range;
      for (const id of [...this.held.keys()]) {
        const inside = (from === null || compareKeys(id, from) >= 0) &&
          (to === null || compareKeys(id, to) < 0);
        if (inside) this.held.delete(id);
      }
    }
    for (const it of b.items) {
      this.held.set(it.id, { rev: it.rev, ...(it.doc ? { doc: it.doc } : {}) });
      this.applied++;
    }
    for (const id of b.deleted) this.held.delete(id);
    return Promise.resolve();
  }
}

/** Asserts the sink holds exactly what the crawl stores (ids, revisions, documents). */
async function assertSinkIs(kv: Deno.Kv, id: string, sink: ToySink): Promise<void> {
  const stored = new Map<string, { rev: string; doc?: string }>();
  for await (const it of iterateItems(kv, id)) {
    stored.set(it.id, { rev: it.rev, ...(it.doc ? { doc: it.doc } : {}) });
  }
  const missing = [...stored.keys()].filter((k) => !sink.held.has(k));
  const extra = [...sink.held.keys()].filter((k) => !stored.has(k));
  const stale = [...stored].filter(([k, v]) =>
    sink.held.has(k) && JSON.stringify(sink.held.get(k)) !== JSON.stringify(v)
  );
  assert.deepEqual(
    { missing: missing.slice(0, 3), extra: extra.slice(0, 3), stale: stale.slice(0, 3) },
    { missing: [], extra: [], stale: [] },
  );
}

/** Delivers until nothing is left. */
async function drain(kv: Deno.Kv, id: string, sink: Sink): Promise<void> {
  for (let i = 0; i < 100; i++) if ((await deliver({ kv }, id, sink)).behind === 0) return;
  throw new Error("never drained");
}

Deno.test("sinks: a toy sink is kept equal to a crawl, with documents, page by page as it runs, and after it failed half-way", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(1500, ASCII, 201, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 4, docs: true }));
  const sink = new ToySink();
  // Half the shards, then the sink, then the rest: it is told as the crawl goes.
  for (const e of (await listShards(kv, id)).slice(0, 2)) await runOne(kv, source, id, e.value.id);
  await drain(kv, id, sink);
  await assertSinkIs(kv, id, sink);
  await finishAll(kv, source, id);
  sink.failAt = sink.batches + 3; // the third batch from here fails
  await assert.rejects(deliver({ kv }, id, sink), /sink crashed/);
  await drain(kv, id, sink);
  await assertSinkIs(kv, id, sink);
  assert.equal(sink.held.size, data.size);
  assert.ok([...sink.held.values()].every((v) => v.doc), "documents came with the items");
});

Deno.test("sinks: the followed registry's changes, a row sweep's repairs and a range listed again reach the sink", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(1200, ASCII, 202, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id, dispatcher } = await begin(kv, source, spec({ shards: 3, follow: true }));
  await finishAll(kv, source, id);
  assert.equal(
    await checkCompletion(ctxOf(kv, source), id),
    true,
  );
  const sink = new ToySink();
  await drain(kv, id, sink);
  let t = (await getCrawl(kv, id)).value!.finishedAt! + 1000;
  const clock = clockWithNow(() => t);
  // The feed's changes: inserts, updates, deletions.
  data.churn(60, prng(3));
  await followTick(ctxOf(kv, source, { clock }), id, { verifyEveryMs: 0, verifyRowsEveryMs: 0 });
  await drain(kv, id, sink);
  await assertSinkIs(kv, id, sink);
  // Changes the feed never shows: repaired by the row sweep, or by a range listed again.
  const hiding = wrapSource(source, {
    changes: async (s, l) => ({ ...await source.changes(s, l), rows: [] }),
    feedHead: () => Promise.resolve(null),
  });
  data.put(data.keys[100]);
  data.put("cc-untold");
  data.delete(data.keys[900]);
  for (let i = 0; i < 60; i++) {
    t += 1000;
    const tick = await followTick(ctxOf(kv, hiding, { clock, dispatcher }), id, {
      verifyEveryMs: 20_000,
      verifyRowsEveryMs: 20_000,
    });
    if (!tick) {
      await finishAll(kv, hiding, id);
      await checkCompletion(ctxOf(kv, hiding, { clock }), id);
    }
  }
  await drain(kv, id, sink);
  await assertSinkIs(kv, id, sink);
  assert.equal(sink.held.get("cc-untold")?.rev, data.rev("cc-untold"));
});

Deno.test("sinks: a sink behind what the ledger keeps is given the whole crawl again", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(800, ASCII, 203, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 2 }));
  await finishAll(kv, source, id);
  // The first notes of a stream are gone (as after 10,000 more were written).
  const [first] = await listShards(kv, id);
  await kv.delete(keys.note(id, `s${first.value.id}`, 1));
  const sink = new ToySink();
  const done = await deliver({ kv }, id, sink);
  assert.equal(done.resynced, true);
  await drain(kv, id, sink);
  await assertSinkIs(kv, id, sink);
  // Nothing left: the next delivery gives nothing.
  const before = sink.batches;
  assert.equal((await deliver({ kv }, id, sink)).notes, 0);
  assert.equal(sink.batches, before);
});
