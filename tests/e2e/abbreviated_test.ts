/**
 * `--abbreviated` behind a document host that lags its feed (npm's CDN serves the previous
 * packument for a while after `_changes` reports a new one): abbreviated metadata carries no
 * `_rev`, so a change's document is held against the stored one by `modified`, and a stale one is
 * never stored as the new revision's: it is recorded as the item's error, with its reason. The
 * summary says the documents were not checked against their listed revisions.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { abbreviatedDoc } from "../../lib/sim/registry/registry_docs.ts";
import { prng } from "../../lib/sim/names.ts";
import { runTask, spawnWatched, untilFeedAt } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";

Deno.test("abbreviated: a change's document served stale by a lagging host is never stored as the new revision's", async () => {
  const data = new RegistryData(await realNames(2_000));
  // Documents changed less than 5 s ago are served as they were: past the follower's pauses.
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docLagMs: 5_000 });
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/c.kv`;
  const crawl = spawnWatched("crawl", [
    ...["--source", reg.url, "--kv", kv, "--shards", "4", "--follow", "--follow-poll", "100ms"],
    ...["--docs", "--docs-url", reg.docsUrl!, "--abbreviated"],
  ]);
  try {
    await crawl.waitFor(/following the registry's changes/, 120_000);
    const rand = prng(11);
    const before = new Set(data.keys);
    // Thirty documents changed once each (one changed twice within the host's lag could be
    // stored with the middle revision's content: `modified` tells older from newer, not which).
    const changed = new Set<string>();
    while (changed.size < 30) changed.add(data.keys[Math.floor(rand() * data.keys.length)]);
    for (const id of changed) data.put(id);
    await untilFeedAt(kv, String(data.updateSeq), 60_000);
    crawl.child.kill("SIGINT");
    const end = await crawl.end();
    assert.equal(end.code, 0, end.out.slice(-2000));
    assert.match(end.out, /documents: not checked against their listed revisions/);
    const exported = await runTask("export", ["--kv", kv]);
    assert.equal(exported.code, 0, exported.stderr);
    const items = exported.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(items.length, before.size);
    let caught = 0;
    for (const it of items) {
      if (it.rev !== data.rev(it.id)) assert.fail(`${it.id} holds ${it.rev}, not the listed rev`);
      if (it.error) {
        assert.match(
          it.error.reason,
          /no later than the one stored \(modified .*\) for an earlier revision: a cache behind/,
        );
        caught++;
        continue;
      }
      // Every document stored without a mark is the listed revision's.
      const want = abbreviatedDoc(data.doc(it.id) as Record<string, unknown>);
      assert.equal(it.doc.modified, want.modified, it.id);
    }
    assert.ok(caught > 0, "the lagging host served stale documents that were caught");
  } finally {
    try {
      crawl.child.kill("SIGKILL");
    } catch { /* ended */ }
    await crawl.end();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
