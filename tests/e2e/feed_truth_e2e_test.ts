/**
 * "Never certify a wrong copy", end to end as users run it (`deno task crawl --follow`, `deno task
 * serve`, the README's permissions), against the project's registry changing while it is read:
 * renumbered by a million while followed (npm's May 2025), down for a minute while followed, and a
 * cluster's feed without `pending` whose database info spells its sequences otherwise (which used
 * to be read forever).
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { type RunningRegistry, startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile, SeqCodec } from "../../lib/sim/registry/registry_profile.ts";
import { listCrawls } from "../../lib/engine/store/mod.ts";
import { runTask, spawnServer, spawnWatched, waitHealthy } from "../helpers.ts";
import {
  assertExportIs,
  assertExportWithin,
  realNames,
  reportedSeqs,
  Timeline,
} from "../registry_timeline.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The only crawl in the KV file at `path`. */
async function onlyCrawl(path: string): Promise<string> {
  using kv = await Deno.openKv(path);
  const [crawl] = await listCrawls(kv);
  return crawl.id;
}

/**
 * Waits until the export of the KV file at `path` is exactly the registry now (the follower
 * writes meanwhile: an export may be refused or catch it mid-batch); fails after `ms`.
 */
async function untilExported(
  path: string,
  timeline: Timeline,
  data: RegistryData,
  ms: number,
): Promise<void> {
  const deadline = Date.now() + ms;
  let last = "";
  for (;;) {
    const out = await runTask("export", ["--kv", path]);
    try {
      assert.equal(out.code, 0, out.stderr);
      assertExportIs(out.stdout, timeline.stateAt(data.updateSeq), false);
      return;
    } catch (err) {
      last = String(err).slice(0, 600);
    }
    if (Date.now() > deadline) {
      throw new Error(`not exact ${ms} ms after the changes stopped: ${last}`);
    }
    await sleep(1000);
  }
}

/** 20,000 real names as npm's replica serves them, numbered as npm numbers (tens of millions). */
async function npmLike(): Promise<
  { data: RegistryData; timeline: Timeline; reg: RunningRegistry }
> {
  const data = new RegistryData(await realNames(20_000));
  data.renumber(40_000_000);
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, npmReplicaProfile());
  return { data, timeline, reg };
}

Deno.test("truth e2e: the CLI following a registry renumbered by a million never fails for it, and is exact 20 s after the changes stop", async () => {
  const { data, timeline, reg } = await npmLike();
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/c.kv`;
  const run = spawnWatched("crawl", [
    ...["--source", reg.url, "--kv", kv, "--shards", "8", "--follow", "--follow-idle", "1s"],
  ]);
  let moving: { stop: () => number } | null = null;
  try {
    await run.waitFor(/following the registry's changes/);
    moving = timeline.churn(5);
    await sleep(4000);
    data.renumber(-1_000_000); // npm's head fell by ~22M under its followers, the data the same
    await sleep(10_000);
    moving.stop();
    await untilExported(kv, timeline, data, 20_000);
    run.child.kill("SIGINT");
    const end = await run.end();
    assert.equal(end.code, 0, end.out.slice(-2000));
    assert.doesNotMatch(end.out, /failed/);
    assert.match(end.out, /following: seq \d+, 0 changes behind/);
  } finally {
    moving?.stop();
    try {
      run.child.kill("SIGKILL");
    } catch {
      // ended
    }
    await run.end();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("truth e2e: serve following a registry renumbered by a million says so, never fails, and is exact 20 s after the changes stop", async () => {
  const { data, timeline, reg } = await npmLike();
  const dir = await Deno.makeTempDir();
  const token = "truth-e2e-token-1234567";
  const server = spawnServer({
    CRAWL_TOKEN: token,
    KV_PATH: `${dir}/serve.kv`,
    ALLOWED_SOURCES: reg.url,
    FOLLOW_IDLE_MS: "1000",
  });
  const req = async (path: string, body?: unknown) =>
    await (await fetch(`${server.base}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: { authorization: `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    })).json();
  let moving: { stop: () => number } | null = null;
  try {
    await waitHealthy(`${server.base}/healthz`);
    const { id } = await req("/crawls", { source: reg.url, shards: 8, follow: true });
    for (
      let st = await req(`/crawls/${id}`);
      st.status !== "done";
      st = await req(`/crawls/${id}`)
    ) {
      assert.ok(["planning", "running"].includes(st.status), JSON.stringify(st).slice(0, 500));
      await sleep(200);
    }
    moving = timeline.churn(5);
    await sleep(3000);
    data.renumber(-1_000_000);
    // The resync is said: the status names it, and never 0 behind while every row is compared.
    let resync = null;
    for (let i = 0; i < 100 && !resync; i++) {
      const st = await req(`/crawls/${id}`);
      assert.notEqual(st.status, "failed", st.error);
      if (st.follow?.rows?.forced) assert.equal(st.follow.changesBehind, null);
      resync = st.follow?.resync;
      await sleep(100);
    }
    assert.ok(resync, "the resync is in the status");
    assert.match(resync.why, /numbered its changes anew/);
    await sleep(8000);
    moving.stop();
    const deadline = Date.now() + 20_000;
    let st = await req(`/crawls/${id}`);
    const head = String(data.updateSeq + data.seqShift);
    while (!(st.follow?.head === head && st.follow?.changesBehind === 0) && Date.now() < deadline) {
      await sleep(200);
      st = await req(`/crawls/${id}`);
    }
    assert.equal(st.status, "done", JSON.stringify(st).slice(0, 800));
    assert.equal(st.follow?.head, head, JSON.stringify(st.follow));
  } finally {
    moving?.stop();
    const logs = await server.stop();
    assert.ok(!logs.includes(token));
  }
  try {
    const id = await onlyCrawl(`${dir}/serve.kv`);
    const exported = await runTask("export", ["--kv", `${dir}/serve.kv`, "--crawl-id", id]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportIs(exported.stdout, timeline.stateAt(data.updateSeq), false);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("truth e2e: a registry down for a minute while followed: within 10 s the lag grows and the reason shows (status, metrics); exact within 10 s of its return", async () => {
  const data = new RegistryData(await realNames(5_000));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, npmReplicaProfile());
  const dir = await Deno.makeTempDir();
  const token = "truth-e2e-token-7654321";
  const server = spawnServer({
    CRAWL_TOKEN: token,
    KV_PATH: `${dir}/serve.kv`,
    ALLOWED_SOURCES: reg.url,
  });
  const get = async (path: string) =>
    await fetch(`${server.base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  let moving: { stop: () => number } | null = null;
  try {
    await waitHealthy(`${server.base}/healthz`);
    const { id } = await (await fetch(`${server.base}/crawls`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify({ source: reg.url, shards: 4, follow: true }),
    })).json();
    const status = async () => await (await get(`/crawls/${id}`)).json();
    for (let st = await status(); st.status !== "done"; st = await status()) await sleep(100);
    moving = timeline.churn(20);
    await sleep(2000);
    await reg.down();
    const downAt = Date.now();
    let st = await status();
    while (!st.follow?.failing && Date.now() - downAt < 10_000) {
      await sleep(250);
      st = await status();
    }
    assert.ok(st.follow?.failing, `no failing look within 10 s: ${JSON.stringify(st.follow)}`);
    assert.match(st.follow.failing.reason, /connection refused|error sending request/i);
    assert.equal(st.follow.changesBehind, null, "never 0 behind while it cannot be read");
    const metrics = await (await get("/metrics")).text();
    assert.match(metrics, new RegExp(`^rankcrawl_follow_up\\{crawl="${id}"\\} 0$`, "m"));
    assert.match(
      metrics,
      new RegExp(
        `^rankcrawl_follow_last_success_timestamp_seconds\\{crawl="${id}"\\} [\\d.]+$`,
        "m",
      ),
    );
    // The lag grows with the outage, a minute of it.
    await sleep(downAt + 60_000 - Date.now());
    const later = await status();
    assert.ok(later.follow.lagSeconds >= 55, `lag ${later.follow.lagSeconds} s after 60 s down`);
    assert.ok(later.follow.failing);
    moving.stop();
    reg.up();
    const upAt = Date.now();
    st = await status();
    const head = String(data.updateSeq);
    while (!(st.follow?.head === head && !st.follow.failing) && Date.now() - upAt < 10_000) {
      await sleep(250);
      st = await status();
    }
    assert.equal(st.follow?.head, head, `not caught up 10 s after: ${JSON.stringify(st.follow)}`);
    assert.equal(st.follow.changesBehind, 0);
  } finally {
    moving?.stop();
    reg.up();
    await server.stop();
  }
  try {
    const id = await onlyCrawl(`${dir}/serve.kv`);
    const exported = await runTask("export", ["--kv", `${dir}/serve.kv`, "--crawl-id", id]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportIs(exported.stdout, timeline.stateAt(data.updateSeq), false);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("truth e2e: a cluster's feed without pending whose database info spells sequences otherwise ends at 100 changes a second", async () => {
  const data = new RegistryData(await realNames(20_000));
  const timeline = new Timeline(data);
  // 20 ms away: every read of the feed finds new changes (an empty batch never comes).
  const registry = {
    opaqueSeq: true,
    pending: false,
    feed: { infoOtherSpelling: true },
    latencyMs: 20,
  };
  const reg = await startRegistry(data, registry);
  const dir = await Deno.makeTempDir();
  const moving = timeline.churn(100);
  try {
    // A guard, not a measure: before, this crawl never ended.
    const guard = new AbortController();
    const timer = setTimeout(() => guard.abort(), 120_000);
    const run = await Promise.race([
      runTask("crawl", ["--source", reg.url, "--kv", `${dir}/c.kv`, "--shards", "4"]),
      new Promise<never>((_, reject) =>
        guard.signal.addEventListener("abort", () => reject(new Error("never ended")))
      ),
    ]);
    clearTimeout(timer);
    moving.stop();
    assert.equal(run.code, 0, run.stderr.slice(-2000) + run.stdout.slice(-2000));
    const checked = run.stdout.split("\n").find((l) => l.includes("checked: exact"));
    assert.ok(checked, run.stdout.slice(-2000));
    const codec = new SeqCodec(registry);
    const seqs = reportedSeqs(checked, (s) => codec.parse(s, -1) as number);
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    assertExportWithin(exported.stdout, timeline, seqs, false);
  } finally {
    moving.stop();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
