/**
 * End-to-end crawls through the real KV queue (temp-file KV) against the project's registry over
 * HTTP, and through `deno task crawl` subprocesses killed with SIGKILL.
 */
import assert from "node:assert/strict";
import { runLocalCrawl } from "../../lib/cli/local_crawl.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { listCrawls } from "../../lib/engine/store/mod.ts";
import { countItems, iterateItems } from "../../lib/engine/items/item_read.ts";
import { buildSpec, type CrawlSpec } from "../../lib/base/spec.ts";
import {
  assertCrawledExactly,
  randomKeys,
  spawnRegistry,
  taskArgs,
  waitForItems,
} from "../helpers.ts";
import { bundledNames, syntheticNames } from "../../lib/sim/names.ts";
import { sortKeys } from "../../lib/plan/keys.ts";
import { JumpingClock } from "../fake_clock.ts";

const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "\uffff", "z", "0"];

function specFor(source: string, over: Partial<CrawlSpec> = {}): CrawlSpec {
  return {
    source,
    docsUrl: null,
    shards: 8,
    docs: false,
    concurrency: 4,
    maxPage: 200,
    rebalance: true,
    ...over,
  };
}

async function exportIds(kvPath: string): Promise<string[]> {
  using kv = await Deno.openKv(kvPath);
  const [crawl] = await listCrawls(kv);
  const ids: string[] = [];
  for await (const it of iterateItems(kv, crawl.id)) ids.push(it.id);
  assert.equal(await countItems(kv, crawl.id), ids.length);
  return ids;
}

Deno.test("e2e: queue crawl of unicode and scoped ids with docs is complete and exact", async () => {
  const keys = sortKeys(randomKeys(6000, UNI, 41, 6).concat(["@scope/name", "@scope/other"]));
  const sorted = new RegistryData(keys, { largeDocRate: 0.02, largeDocBytes: 120_000 });
  const reg = await startRegistry(sorted, {});
  const dir = await Deno.makeTempDir();
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: specFor(reg.url, { docs: true }),
      sourceUrl: reg.url,
    });
    assert.equal(res.report.status, "done");
    assert.equal(res.report.itemsStored, sorted.size);
    assert.equal(res.report.documents, sorted.size);
    const ids = await exportIds(`${dir}/c.kv`);
    assert.equal(ids.length, sorted.size);
    assert.deepEqual(new Set(ids), new Set(sorted.keys));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("e2e: 20% injected faults of every kind, docs on: every item exactly once", async () => {
  const data = new RegistryData(syntheticNames(await bundledNames(), 8000, { seed: 5 }));
  const reg = await startRegistry(data, { faultRate: 0.2, retryAfterS: 0, seed: 3, slowMs: 50 });
  const dir = await Deno.makeTempDir();
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: specFor(reg.url, { docs: true, shards: 6 }),
      sourceUrl: reg.url,
      sourceOptions: { clock: new JumpingClock(), maxAttempts: 30 },
    });
    assert.equal(res.report.itemsStored, 8000);
    assert.ok(res.retries > 0);
    const ids = await exportIds(`${dir}/c.kv`);
    assert.equal(ids.length, 8000);
    assert.deepEqual(new Set(ids), new Set(data.keys));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("e2e: a registry that is down for a while is waited out", async () => {
  const data = new RegistryData(randomKeys(3000, UNI, 42, 6));
  const reg = await startRegistry(data, {});
  const dir = await Deno.makeTempDir();
  let downUntil = 0;
  let calls = 0;
  const fetchDown: typeof fetch = (input, init) => {
    calls++;
    if (calls < downUntil) return Promise.resolve(new Response("down", { status: 503 }));
    return fetch(input, init);
  };
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: specFor(reg.url, { shards: 4, maxPage: 100 }),
      sourceUrl: reg.url,
      sourceOptions: { fetch: fetchDown, clock: new JumpingClock(), maxAttempts: 3 },
      // Once planning is done, the next 40 requests in a row fail.
      log: (line) => {
        if (line.startsWith("planned")) downUntil = calls + 40;
      },
      stallMs: 2000,
      watchdogIntervalMs: 500,
    });
    assert.equal(res.report.itemsStored, 3000);
    const ids = await exportIds(`${dir}/c.kv`);
    assert.deepEqual(new Set(ids), new Set(data.keys));
    assert.equal(ids.length, 3000);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

function runCrawl(args: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: [...taskArgs("crawl"), ...args],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
}

Deno.test("e2e: `deno task crawl` killed with SIGKILL twice resumes with nothing lost or doubled", async () => {
  const reg = await spawnRegistry([
    "--synthetic",
    "30000",
    "--latency-ms",
    "3",
    "--fault-rate",
    "0.15",
    "--retry-after-s",
    "0",
    "--slow-ms",
    "50",
    "--no-skip",
    "--max-limit",
    "1000",
  ]);
  const dir = await Deno.makeTempDir();
  const args = ["--source", reg.url, "--shards", "8", "--kv", `${dir}/c.kv`, "--max-page", "100"];
  try {
    for (const atLeast of [6000, 15000]) {
      const child = runCrawl(args);
      await waitForItems(`${dir}/c.kv`, atLeast); // mid-crawl: 20%, then 50% of the items
      child.kill("SIGKILL");
      const st = await child.status;
      assert.equal(st.success, false, "killed before finishing");
      await child.stderr.cancel();
    }
    const done = await new Deno.Command(Deno.execPath(), {
      args: [...taskArgs("crawl"), ...args],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const err = new TextDecoder().decode(done.stderr);
    assert.equal(done.code, 0, err);
    assert.match(err, /resuming crawl/);
    const ids = await exportIds(`${dir}/c.kv`);
    assert.equal(ids.length, 30000);
    assert.equal(new Set(ids).size, 30000);
    const truth = syntheticNames(await bundledNames(), 30000, { seed: 42 });
    assert.deepEqual(new Set(ids), new Set(truth));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("e2e: default options over names of real length (clusters up to 214 characters): exact", async () => {
  const keys = syntheticNames(await bundledNames(), 150_000, { seed: 8 });
  const longest = keys.reduce((n, k) => Math.max(n, k.length), 0);
  assert.equal(longest, 214);
  const data = new RegistryData(keys);
  const reg = await startRegistry(data, {});
  const dir = await Deno.makeTempDir();
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: buildSpec({ source: reg.url }),
      sourceUrl: reg.url,
    });
    assert.equal(res.report.status, "done");
    assert.equal(res.report.verification?.status, "exact");
    using kv = await Deno.openKv(`${dir}/c.kv`);
    await assertCrawledExactly(kv, res.report.id, keys);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("e2e: a --docs crawl killed with SIGKILL resumes within seconds with the task's own permissions, not after its leases expire", async () => {
  const reg = await spawnRegistry([
    "--synthetic",
    "3000",
    "--doc-latency-ms",
    "20",
    "--no-include-docs",
    "--no-bulk-get",
  ]);
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/c.kv`;
  const args = [
    "--source",
    reg.url,
    "--shards",
    "4",
    "--kv",
    kvPath,
    "--docs",
    "--concurrency",
    "2",
  ];
  const crawl = () =>
    new Deno.Command(Deno.execPath(), {
      args: [...taskArgs("crawl"), ...args],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
  try {
    const first = crawl();
    const before = await waitForItems(kvPath, 400);
    first.kill("SIGKILL");
    await first.status;
    await first.stderr.cancel();
    const started = performance.now();
    const second = crawl();
    // Work resumes as soon as the killed process's heartbeat is stale (3 s), long before its
    // shards' 30 s leases would expire: the bound tells the two apart with room for a loaded
    // machine (about 4 s on a quiet one).
    await waitForItems(kvPath, before + 100);
    const resumedMs = performance.now() - started;
    assert.ok(resumedMs < 20_000, `work resumed after ${Math.round(resumedMs)} ms`);
    const st = await second.status;
    const err = await new Response(second.stderr).text();
    assert.equal(st.code, 0, err);
    const ids = await exportIds(kvPath);
    assert.equal(new Set(ids).size, 3000);
    assert.equal(ids.length, 3000);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("e2e: a local crawl returns when its crawl is done, not at its next status read", async () => {
  const data = new RegistryData(syntheticNames(await bundledNames(), 4000, { seed: 8 }));
  const reg = await startRegistry(data, {});
  const dir = await Deno.makeTempDir();
  // An hour between status reads: only the crawl's end, told by the worker that finished it, can
  // end the wait (the guard fails the test instead of letting it hang).
  const guard = new AbortController();
  const timer = setTimeout(() => guard.abort(), 120_000);
  try {
    for (const dispatch of ["lease", "queue"] as const) {
      const res = await runLocalCrawl({
        kvPath: `${dir}/${dispatch}.kv`,
        spec: specFor(reg.url, { shards: 4 }),
        sourceUrl: reg.url,
        dispatch,
        pollMs: 3_600_000,
        signal: guard.signal,
      });
      assert.equal(res.report.status, "done");
      assert.equal(res.report.itemsStored, 4000);
    }
  } finally {
    clearTimeout(timer);
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
