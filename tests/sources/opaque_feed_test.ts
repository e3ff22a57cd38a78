/**
 * The proof of "done" from GET listings, the database info and `_changes` alone: rank probes
 * bracketed by `update_seq` reads where listings carry no sequence, small parts proven by one
 * listing of their rows, sequences compared for equality only (the feed's end by an empty batch,
 * `pending: 0`, or a sequence equal to one read before), and a lower sequence number never taken
 * by itself for a replaced database.
 */
import { SYSTEM_CLOCK } from "../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { catchUp, checkSameRegistry } from "../../lib/engine/crawl/feed/catch_up.ts";
import { atEnd, reached } from "../../lib/engine/crawl/feed/feed_read.ts";
import { checkCompletion } from "../../lib/engine/verify/completion.ts";
import { checkListed } from "../../lib/engine/verify/_listed_check.ts";
import { probeRound } from "../../lib/engine/verify/_verdicts.ts";
import { getCrawl, listShards } from "../../lib/engine/store/mod.ts";
import { storedItems } from "../../lib/engine/items/stored_parts.ts";
import type { ChangeRow, Source } from "../../lib/plan/source.ts";
import { bundledNames, prng, syntheticNames } from "../../lib/sim/names.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { begin, ctxOf, finishAll, RecordingDispatcher, runOne, spec } from "../engine_helpers.ts";
import { assertCrawledExactly, wrapSource } from "../helpers.ts";

const names = async (n: number, seed = 31) => syntheticNames(await bundledNames(), n, { seed });

Deno.test("probe round: without a sequence on listings, the feed quiet after the store's sequence makes it one state", async () => {
  const data = new RegistryData(await names(2_000));
  const source = new MemorySource(data, { listingSeq: "ignored" });
  const bounds = [null, data.keys[500], data.keys[1500]];
  const at = String(data.updateSeq);
  const still = await probeRound(source, bounds, { clock: SYSTEM_CLOCK, at });
  assert.ok([...still.values()].every((p) => p.seq === at), "one state");
  // No sequence the store is caught up to: nothing to hold the probes to.
  const unknown = await probeRound(source, bounds, { clock: SYSTEM_CLOCK });
  assert.ok([...unknown.values()].every((p) => p.seq === undefined), "not known");
  // A change landing between the probes: the feed names it, and no page claims a state.
  let n = 0;
  const moving = wrapSource(source, {
    list: async (o) => {
      const page = await source.list(o);
      if (n++ === 1) data.churn(1, prng(3), ["update"]);
      return page;
    },
  });
  const busy = await probeRound(moving, bounds, { clock: SYSTEM_CLOCK, concurrency: 1, at });
  assert.ok([...busy.values()].every((p) => p.seq === undefined), "not one state");
  // A database info stuck at the store's sequence (a replica that stopped, a cache) reads the
  // same before and after: it is not asked, the feed is.
  const stuckAt = String(data.updateSeq);
  data.churn(1, prng(4), ["update"]);
  const stuck = wrapSource(source, { updateSeq: () => Promise.resolve(stuckAt) });
  const fooled = await probeRound(stuck, bounds, { clock: SYSTEM_CLOCK, at: stuckAt });
  assert.ok([...fooled.values()].every((p) => p.seq === undefined), "a stuck info proves nothing");
  // Listings that carry the sequence need no reads of the database info.
  let infoReads = 0;
  const served = wrapSource(new MemorySource(data), {
    updateSeq: () => (infoReads++, Promise.resolve(String(data.updateSeq))),
  });
  await probeRound(served, bounds, { clock: SYSTEM_CLOCK });
  assert.equal(infoReads, 0);
});

Deno.test("listed check: a part is proven by its rows while changes land; one that lost a row is not", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = new RegistryData(await names(3_000));
  const source = new MemorySource(data, { listingSeq: "ignored", maxPage: 1000 });
  const { id } = await begin(kv, source, spec({ shards: 2, maxPage: 500 }));
  await finishAll(kv, source, id);
  const part = { id: 0, start: data.keys[100], end: data.keys[400], stored: 300, relists: 0 };
  const changed: ChangeRow[] = [];
  // Changes inside the part after the store's state: named by the window, they decide nothing.
  for (const k of [data.keys[150], data.keys[250]]) {
    data.put(k);
    changed.push({ seq: String(data.updateSeq), id: k, rev: data.rev(k)!, deleted: false });
  }
  const inserted = `${data.keys[300]}-new`;
  data.put(inserted);
  changed.push({
    seq: String(data.updateSeq),
    id: inserted,
    rev: data.rev(inserted)!,
    deleted: false,
  });
  const storedIn = (r: { start: string | null; end: string | null }) =>
    storedItems(kv, id, r, { maxRows: 1000 });
  const [ok] = await checkListed(source, [part], {
    window: () => Promise.resolve(changed),
    storedItems: storedIn,
  });
  assert.equal(ok.verdict, "equal", JSON.stringify(ok));
  // A row the registry lists that no change names and the store lacks: a mismatch, named.
  const [lost] = await checkListed(source, [part], {
    window: () => Promise.resolve(changed.slice(0, 2)),
    storedItems: storedIn,
  });
  assert.equal(lost.verdict, "mismatch");
  assert.match(lost.why!, /-new" is missing/);
  // A listing that fills its limit may hold more: undecided.
  const [full] = await checkListed(source, [{ ...part, stored: 10 }], {
    window: () => Promise.resolve([]),
    storedItems: storedIn,
  });
  assert.equal(full.verdict, "undecided");
});

Deno.test("feed: sequences compared for equality only; its end by empty batch, pending 0 or the target", () => {
  const row = (seq: string): ChangeRow => ({ seq, id: "a", rev: "1-a", deleted: false });
  assert.equal(reached("12-g1AAAAx", "12-g1AAAAx"), true);
  assert.equal(reached("13", "12"), false, "a higher number is not a sequence reached");
  assert.equal(reached("5", null), false);
  // An empty batch is the end only where the feed confirms it (`FeedReader`, feed_read_test).
  assert.equal(atEnd({ rows: [], lastSeq: "9" }, "12"), false, "an empty batch says nothing alone");
  assert.equal(atEnd({ rows: [row("10")], lastSeq: "10", pending: 0 }, "12"), true);
  assert.equal(atEnd({ rows: [row("10")], lastSeq: "10", pending: 4 }, "12"), false);
  assert.equal(atEnd({ rows: [row("12"), row("14")], lastSeq: "14" }, "12"), true, "passed it");
  assert.equal(atEnd({ rows: [row("10")], lastSeq: "10" }, "12"), false, "short is not the end");
});

/** `source` whose sequences are spelled as a cluster's: `N-g1AAAA<state>`, N sometimes lower. */
function jittering(inner: MemorySource, data: RegistryData): Source {
  const rand = prng(5);
  const spell = (n: number) => `${Math.max(0, n - (rand() < 0.5 ? 2 : 0))}-g1AAAA${n}`;
  const state = (s: string) => Number(/-g1AAAA(\d+)$/.exec(s)?.[1] ?? s);
  return wrapSource(inner, {
    description: "jittering",
    updateSeq: () => Promise.resolve(spell(data.updateSeq)),
    list: async (o) => {
      const page = await inner.list(o);
      return page.seq === undefined ? page : { ...page, seq: spell(Number(page.seq)) };
    },
    changes: async (since, limit) => {
      const feed = await inner.changes(String(state(since)), limit);
      return {
        rows: feed.rows.map((r) => ({ ...r, seq: spell(Number(r.seq)) })),
        lastSeq: spell(Number(feed.lastSeq)),
      };
    },
  });
}

Deno.test("feed: a cluster's jittering sequences, going down now and then, are never a replaced database", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = new RegistryData(await names(4_000, 33));
  const source = jittering(new MemorySource(data, { maxPage: 200 }), data);
  const dispatcher = new RecordingDispatcher();
  const { id } = await begin(kv, source, spec({ shards: 4 }));
  for (const shard of [0, 1]) assert.equal((await runOne(kv, source, id, shard)).kind, "done");
  data.churn(30, prng(8));
  for (let round = 0; round < 8; round++) {
    await finishAll(kv, source, id);
    if (
      await checkCompletion(ctxOf(kv, source, { dispatcher }), id)
    ) break;
    data.churn(3, prng(round));
  }
  const crawl = (await getCrawl(kv, id)).value!;
  assert.equal(crawl.status, "done", crawl.error ?? crawl.verification?.detail);
  await catchUp(ctxOf(kv, source), id);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
});

Deno.test("feed: a lower number is a hint; the stored items decide whether the database was replaced", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = new RegistryData(await names(2_000, 35));
  const source = new MemorySource(data, { maxPage: 200 });
  const { id } = await begin(kv, source, spec({ shards: 2 }));
  for (const shard of [0, 1]) await runOne(kv, source, id, shard);
  const crawl = (await getCrawl(kv, id)).value!;
  assert.equal((await listShards(kv, id)).length, 2);
  // The same data, its sequence spelled lower: carried on.
  await checkSameRegistry(ctxOf(kv, source), crawl, { current: "1000", seen: "2000" });
  // Another database: most stored items differ, and no change explains it.
  data.replace(await names(1_000, 36));
  await assert.rejects(
    () => checkSameRegistry(ctxOf(kv, source), crawl, { current: "1000", seen: "2000" }),
    /replaced or rolled back .*update_seq 1000 is below 2000, and \d+ of \d+ stored items/,
  );
});
