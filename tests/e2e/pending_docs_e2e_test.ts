/**
 * Documents behind their change on a document host that lags the registry (npm's CDN), end to end
 * as users run it (`deno task crawl --docs --docs-url`): the registry changed a moment before the
 * crawl, its document host serves each changed document's previous revision (with its ETag, 304 to
 * `If-None-Match`) or a 404 for a new one for 6 s. The crawl stores those items at their listed
 * revision with the document pending, asks again conditionally, and ends when every one landed:
 * no item recorded as an error, every document at its listed revision, the summary says how many
 * were pending and how the host answered.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { runTask } from "../helpers.ts";
import { assertExportIs, realNames, Timeline } from "../registry_timeline.ts";

Deno.test("pending docs: a crawl against a document host 6 s behind its registry's changes ends with every document at its listed revision, none an error", async () => {
  const data = new RegistryData(await realNames(5_000));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docLagMs: 6_000 });
  const dir = await Deno.makeTempDir();
  try {
    // 60 changes (updates, inserts, deletions) in the 3 s before the crawl: their documents are
    // behind for most of its run.
    const moving = timeline.churn(20);
    await new Promise((r) => setTimeout(r, 3_000));
    const changes = moving.stop();
    assert.ok(changes >= 30, `the registry changed ${changes} times`);
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--shards", "4"],
      ...["--docs", "--docs-url", reg.docsUrl!],
    ]);
    assert.equal(run.code, 0, run.stderr.slice(-2000));
    assert.match(run.stdout, /checked: exact/);
    assert.match(run.stdout, /document errors 0,/);
    const line =
      /documents behind the document host: 0 pending, ([\d,]+) landed later, 0 given up on \(errors\); ([\d,]+) asked again, ([\d,]+) answered 304/
        .exec(run.stdout);
    assert.ok(line, run.stdout);
    const [landed, asked, notModified] = line.slice(1).map((s) => Number(s.replaceAll(",", "")));
    assert.ok(landed > 0, "documents behind their change waited, then landed");
    assert.ok(asked >= landed && notModified > 0, "re-asks were conditional: some answered 304");
    assert.match(run.stderr, /documents are behind their revision on the document host: asking/);
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportIs(exported.stdout, timeline.stateAt(data.updateSeq), true);
    assert.ok(reg.stats.notModified! >= notModified, "the host counted the 304s it sent");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
