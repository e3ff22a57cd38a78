/**
 * The final check of crawls whose registry's offsets are not ranks (pouchdb-server): the total
 * against `total_rows`, and each shard against the count its plan found there by `skip`, so that
 * a shard that lost rows is caught even where another gained as many.
 */
import assert from "node:assert/strict";
import { TransientError } from "../../../lib/base/errors.ts";
import { checkCompletion } from "../../../lib/engine/verify/completion.ts";
import { plannedCountVerdicts } from "../../../lib/engine/verify/_verdicts.ts";
import { getCrawl, listShards } from "../../../lib/engine/store/mod.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import type { Page } from "../../../lib/plan/source.ts";
import { begin, ctxOf, finishAll, spec } from "../../engine_helpers.ts";
import { dataOf, randomKeys, wrapSource } from "../../helpers.ts";

const ASCII = "abcdefghijklmnopqrstuvwxyz".split("");

Deno.test("total check: each shard is held against its plan's count, beside the total", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, ASCII, 11, 6));
  const source = new MemorySource(data, { maxPage: 50, skip: true, brokenOffsets: true });
  const { id, crawl } = await begin(kv, source, spec({ shards: 4 }));
  assert.equal(crawl.planMethod, "skip");
  await finishAll(kv, source, id);
  await checkCompletion(ctxOf(kv, source), id);
  const done = (await getCrawl(kv, id)).value!;
  assert.equal(done.status, "done");
  assert.match(done.verification!.detail, /each of 4 shards as many as its plan counted/);
});

Deno.test("total check: a shard short of its plan is listed again, then the crawl fails naming it", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, ASCII, 12, 6));
  const source = new MemorySource(data, { maxPage: 50, skip: true, brokenOffsets: true });
  const { id } = await begin(kv, source, spec({ shards: 4 }));
  const shards = (await listShards(kv, id)).map((e) => e.value);
  // After planning, listings lose one row of shard 1 and show a row that is not there in shard 2:
  // the total still matches, only the shards' own counts tell.
  const lost = data.keys.find((k) => k > shards[1].start! && k < shards[1].end!)!;
  const ghost = shards[2].start! + "\u0000";
  const bent = wrapSource(source, {
    list: async (o) => {
      const page: Page = await source.list(o);
      let rows = page.rows.filter((r) => r.id !== lost);
      const inRange = (o.start ?? "") <= ghost && (o.end == null || ghost < o.end);
      if (inRange && rows.length > 0 && rows[0].id === shards[2].start) {
        rows = [rows[0], { id: ghost, rev: "1-g" }, ...rows.slice(1)].slice(0, o.limit);
      }
      return { ...page, rows };
    },
  });
  for (let pass = 0; pass < 6; pass++) {
    await finishAll(kv, bent, id);
    if (await checkCompletion(ctxOf(kv, bent), id)) break;
    if ((await getCrawl(kv, id)).value!.status === "failed") break;
  }
  const failed = (await getCrawl(kv, id)).value!;
  assert.equal(failed.status, "failed");
  assert.match(failed.error!, /shard 1 .* holds \d+ items but the registry lists \d+ there/);
  assert.match(failed.error!, /the count its plan found there/);
});

Deno.test("total check: planned-count verdicts", () => {
  const v = plannedCountVerdicts([{ id: 0, expected: 5 }, { id: 1, expected: 7 }], [5, 6]);
  assert.deepEqual(v.map((x) => [x.id, x.verdict, x.span, x.stored]), [
    [0, "equal", 5, 5],
    [1, "mismatch", 7, 6],
  ]);
});

Deno.test("total check: two runners finishing a crawl at once never count a range the other listed again", async () => {
  for (const feed of [true, false]) {
    using kv = await Deno.openKv(":memory:");
    const data = dataOf(randomKeys(600, ASCII, 13, 6));
    const inner = new MemorySource(data, { maxPage: 50, skip: true, brokenOffsets: true });
    let finishing = false; // while shards run, the final check cannot read the total (deferred)
    const source = wrapSource(inner, {
      ...(feed ? {} : {
        updateSeq: () => Promise.reject(new Error("no _changes here")),
        feedHead: () => Promise.reject(new Error("no _changes here")),
      }),
    });
    const { id, crawl } = await begin(kv, source, spec({ shards: 4 }));
    assert.equal(crawl.startSeq === null, !feed);
    const shards = (await listShards(kv, id)).map((e) => e.value);
    const lost = data.keys.find((k) => k > shards[1].start! && k < shards[1].end!)!;
    const ghost = shards[2].start! + "\u0000";
    const bent = wrapSource(source, {
      list: async (o) => {
        if (o.limit === 1 && !o.start && !finishing) throw new TransientError("not yet");
        const page: Page = await source.list(o);
        let rows = page.rows.filter((r) => r.id !== lost);
        if (rows.length > 0 && rows[0].id === shards[2].start && o.limit > 1) {
          rows = [rows[0], { id: ghost, rev: "1-g" }, ...rows.slice(1)].slice(0, o.limit);
        }
        return { ...page, rows };
      },
    });
    await finishAll(kv, bent, id);
    assert.equal((await getCrawl(kv, id)).value!.status, "running", "the check was deferred");
    finishing = true;
    // Both read every shard done; the one that checks first lists shards 1 and 2 again.
    const ended = await Promise.all([
      checkCompletion(ctxOf(kv, bent, { owner: "a" }), id),
      checkCompletion(ctxOf(kv, bent, { owner: "b" }), id),
    ]);
    assert.deepEqual(ended, [false, false]);
    const after = (await getCrawl(kv, id)).value!;
    assert.equal(after.status, "running", `feed ${feed}: ${after.error}`);
    const open = (await listShards(kv, id)).filter((e) => !e.value.done).map((e) => e.value.id);
    assert.deepEqual(open, [1, 2], "listed again once, by one runner");
  }
});
