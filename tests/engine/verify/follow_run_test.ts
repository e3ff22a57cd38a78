/**
 * The CLI's refresh of a done crawl (`follow_run.ts`): the same command a day later catches the
 * crawl up from its sequence, saying what it applied; a registry replaced since is one line that
 * offers the re-crawl.
 */
import { clockWithNow, SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { InputError } from "../../../lib/base/errors.ts";
import { refreshDone } from "../../../lib/cli/follow_run.ts";
import { crawlStatus } from "../../../lib/engine/crawl/reads/status.ts";
import { getCrawl, getFollow } from "../../../lib/engine/store/mod.ts";
import { ctxOf, doneCrawl } from "../../engine_helpers.ts";
import { assertCrawledExactly, dataOf, randomKeys } from "../../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");
const DAY_MS = 86_400_000;

Deno.test("refresh: a done crawl run again a day later applies exactly the changes since, and says so", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(900, ASCII, 91, 6));
  const { source, id, crawl } = await doneCrawl(kv, data, { shards: 4 });
  const seqBefore = data.updateSeq;
  // A day of changes: inserts, updates, deletions, one id changed several times.
  for (let i = 0; i < 40; i++) data.put(`day-${i}`);
  for (const k of data.keys.slice(100, 110)) data.put(k);
  for (const k of data.keys.slice(200, 205)) data.delete(k);
  data.put("day-0");
  // The feed names an id once for all its changes since (day-0 twice: one row).
  const rows = data.changes(seqBefore, 10_000).results.length;
  assert.equal(rows, 55);
  const lines: string[] = [];
  const later = crawl.finishedAt! + DAY_MS;
  const res = await refreshDone(ctxOf(kv, source, { clock: clockWithNow(() => later) }), crawl, {
    log: (l) => lines.push(l),
    kvPath: "crawl.kv",
  });
  assert.equal(res?.applied, rows);
  assert.equal(res!.toSeq, String(data.updateSeq));
  // Proven before it says so: every range's count, and, a day after the crawl (a sweep due), every
  // row.
  assert.deepEqual(lines, [
    `refreshed crawl ${id} (done ${new Date(crawl.finishedAt!).toISOString()}): applied ` +
    `${res!.applied} changes, now at seq ${data.updateSeq}; counts of 4 ranges proven now; ` +
    "every row compared now (all equal)",
  ]);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
  assert.equal((await getFollow(kv, id)).value!.checkedAt, later, "the injected clock is used");
  assert.equal((await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).status, "done");
  // Again at once: nothing since.
  lines.length = 0;
  const again = await refreshDone(
    ctxOf(kv, source, { clock: clockWithNow(() => later + 1000) }),
    (await getCrawl(kv, id)).value!,
    { log: (l) => lines.push(l), kvPath: "crawl.kv" },
  );
  assert.equal(again!.applied, 0);
  assert.match(lines[0], /was already done .* and is current: no change since seq /);
});

Deno.test("refresh: a registry replaced since the crawl is one line that offers the re-crawl", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, ASCII, 92, 6));
  const { source, id } = await doneCrawl(kv, data, { shards: 4 });
  // Restored from an old backup: other revisions, a lower sequence.
  data.replace(randomKeys(500, ASCII, 93, 6));
  const err = await refreshDone(ctxOf(kv, source), (await getCrawl(kv, id)).value!, {
    log: () => {},
    kvPath: "my.kv",
  }).then(() => null, (e) => e);
  assert.ok(err instanceof InputError, String(err));
  assert.match(
    err.message,
    /^crawl \S+ cannot be refreshed from seq \d+: the registry at .* was replaced or rolled back .*; to crawl the registry again from scratch, use another --crawl-id \(or delete my\.kv\)$/,
  );
  assert.ok(!err.message.includes("\n"));
  assert.equal(
    (await crawlStatus(kv, id, { clock: SYSTEM_CLOCK })).status,
    "done",
    "the stored copy stays as it was",
  );
});
