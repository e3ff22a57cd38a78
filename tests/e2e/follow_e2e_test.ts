/**
 * Following end to end, as users run it (`deno task crawl --follow` with the README's permissions,
 * `deno task serve` with `{"follow": true}`), on a registry that answers as npm's replica does and
 * changes 20 times a second: killed with SIGKILL while following, the same command again follows
 * on, and once the changes stop the export is exactly the registry, every document at its listed
 * revision; over HTTP the lag is in the crawl's status and in `/metrics`.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { listCrawls } from "../../lib/engine/store/mod.ts";
import {
  runTask,
  spawnServer,
  spawnWatched,
  untilApplied,
  untilFeedAt,
  untilNonePending,
  waitHealthy,
} from "../helpers.ts";
import { assertExportIs, realNames, Timeline } from "../registry_timeline.ts";

Deno.test("follow: the CLI on npm's replica with documents elsewhere, killed with SIGKILL while following, then the same command again: exact at the end", async () => {
  const data = new RegistryData(await realNames(5_000));
  const timeline = new Timeline(data);
  // npm's document host lags its feed: documents changed less than 100 ms ago are served as before.
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docLagMs: 100 });
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/c.kv`;
  const args = [
    ...["--source", reg.url, "--kv", kv, "--shards", "4", "--follow"],
    ...["--docs", "--docs-url", reg.docsUrl!, "--verify-every", "5s"],
  ];
  let moving: { stop: () => number } | null = null;
  try {
    moving = timeline.churn(20);
    const first = spawnWatched("crawl", args);
    await first.waitFor(/following the registry's changes/);
    // Killed while it follows: once it applied some of the changes, at no fixed moment.
    const before = await untilApplied(kv, 20);
    first.child.kill("SIGKILL");
    assert.notEqual((await first.end()).code, 0);
    const second = spawnWatched("crawl", args);
    await second.waitFor(/following the registry's changes/);
    assert.match(second.text(), /refreshed crawl \S+ .*applied \d+ changes|and is current/);
    assert.doesNotMatch(second.text(), /planned [\d,]+ items/, "not crawled again");
    await untilApplied(kv, before + 40); // the same command follows on from where it stood
    const changes = moving.stop();
    assert.ok(changes > 50, `the registry changed ${changes} times`);
    await untilFeedAt(kv, String(data.updateSeq));
    await untilNonePending(kv);
    second.child.kill("SIGINT");
    const end = await second.end();
    assert.equal(end.code, 0, end.out.slice(-2000));
    assert.match(
      end.out,
      /following: seq \d+, 0 changes behind, lag [\d.]+ s, \d+ changes applied/,
    );
    // Documents the lagging host served behind their change were pending, then landed.
    assert.match(
      end.out,
      /documents behind the document host: 0 pending, [1-9][\d,]* landed later, 0 given up on/,
    );
    const exported = await runTask("export", ["--kv", kv]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportIs(exported.stdout, timeline.stateAt(data.updateSeq), true);
  } finally {
    moving?.stop();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("follow: serve follows a crawl created with follow as it changes 20 times a second; lag in its status and /metrics; exact once the changes stop", async () => {
  const data = new RegistryData(await realNames(5_000));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, npmReplicaProfile());
  const dir = await Deno.makeTempDir();
  const token = "follow-e2e-token-123456";
  const server = spawnServer({
    CRAWL_TOKEN: token,
    KV_PATH: `${dir}/serve.kv`,
    ALLOWED_SOURCES: reg.url,
    VERIFY_EVERY_MS: "5000",
  });
  const req = (method: string, path: string, body?: unknown) =>
    fetch(`${server.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const status = async (id: string) => await (await req("GET", `/crawls/${id}`)).json();
  let moving: { stop: () => number } | null = null;
  try {
    await waitHealthy(`${server.base}/healthz`);
    const { id } = await (await req("POST", "/crawls", {
      source: reg.url,
      shards: 4,
      follow: true,
    })).json();
    for (let st = await status(id); st.status !== "done"; st = await status(id)) {
      assert.ok(st.status === "planning" || st.status === "running", JSON.stringify(st));
      await new Promise((r) => setTimeout(r, 100));
    }
    moving = timeline.churn(20);
    // Waits for the event (changes applied while the registry changes), not for a fixed time.
    let following = await status(id);
    for (const until = Date.now() + 60_000; !(following.follow?.applied > 0);) {
      assert.ok(Date.now() < until, JSON.stringify(following).slice(0, 1000));
      await new Promise((r) => setTimeout(r, 100));
      following = await status(id);
    }
    const metrics = await (await req("GET", "/metrics")).text();
    for (const name of ["lag_seconds", "changes_behind", "changes_applied_total"]) {
      assert.match(
        metrics,
        new RegExp(`^rankcrawl_follow_${name}\\{crawl="${id}"\\} [\\d.]+$`, "m"),
      );
    }
    moving.stop();
    const head = String(data.updateSeq);
    const deadline = Date.now() + 20_000;
    let st = await status(id);
    while (!(st.follow?.head === head && st.follow?.changesBehind === 0) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      st = await status(id);
    }
    assert.equal(st.follow?.head, head, JSON.stringify(st.follow));
    assert.equal(st.status, "done");
    const after = await (await req("GET", "/metrics")).text();
    assert.match(after, new RegExp(`^rankcrawl_follow_changes_behind\\{crawl="${id}"\\} 0$`, "m"));
  } finally {
    moving?.stop();
    const logs = await server.stop();
    assert.ok(!logs.includes(token), "the token never appears in logs");
  }
  try {
    const [crawl] = await (async () => {
      using kv = await Deno.openKv(`${dir}/serve.kv`);
      return await listCrawls(kv);
    })();
    const exported = await runTask("export", ["--kv", `${dir}/serve.kv`, "--crawl-id", crawl.id]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportIs(exported.stdout, timeline.stateAt(data.updateSeq), false);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
