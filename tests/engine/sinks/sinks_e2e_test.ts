/**
 * The sink seam across SIGKILLs, as users run the crawl (`deno task crawl --follow`, the README's
 * permissions): a sink in a process of its own (`sink_child.ts`, an append-only NDJSON log)
 * delivers from the same KV file while the crawl runs and follows a registry changing 20 times a
 * second; both are killed with SIGKILL half-way and started again. Replayed in order, the log is
 * exactly the crawl's export: every item and every change once in effect.
 */
import assert from "node:assert/strict";
import { compareKeys } from "../../../lib/plan/keys.ts";
import { RegistryData } from "../../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../../lib/sim/registry/registry_server.ts";
import { listCrawls } from "../../../lib/engine/store/mod.ts";
import { deliverAll } from "../../../lib/engine/sinks/mod.ts";
import { runTask, spawnWatched, waitForItems } from "../../helpers.ts";
import { realNames, Timeline } from "../../registry_timeline.ts";
import { ndjsonSink } from "../../sink_child.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the log at `path` holds more than `n` lines (a sink gave it more); how many. */
async function logPast(path: string, n: number): Promise<number> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const lines = await Deno.readTextFile(path).then((t) => t.split("\n").length - 1, () => 0);
    if (lines > n) return lines;
    if (Date.now() > deadline) throw new Error(`the sink's log stayed at ${lines} lines`);
    await sleep(100);
  }
}

/** The sink process (its own permissions: read and write, for the KV file and its log). */
function sinkChild(kv: string, log: string): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-write", "tests/sink_child.ts", kv, log],
    cwd: new URL("../../..", import.meta.url).pathname,
    stdout: "null",
    stderr: "null",
  }).spawn();
}

/** The log replayed in order: id → revision (a cut last line, of a killed process, is skipped). */
function replay(text: string): Map<string, string> {
  const held = new Map<string, string>();
  for (const line of text.split("\n")) {
    let b;
    try {
      b = JSON.parse(line);
    } catch {
      continue;
    }
    if (b.range) {
      const { from, to } = b.range;
      for (const id of [...held.keys()]) {
        if (
          (from === null || compareKeys(id, from) >= 0) && (to === null || compareKeys(id, to) < 0)
        ) {
          held.delete(id);
        }
      }
    }
    for (const [id, rev] of b.items) held.set(id, rev);
    for (const id of b.deleted) held.delete(id);
  }
  return held;
}

Deno.test("sinks e2e: a sink process and a following crawl, both killed with SIGKILL half-way: the sink's log is exactly the export", async () => {
  const data = new RegistryData(await realNames(20_000));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, { latencyMs: 5 });
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/c.kv`;
  const log = `${dir}/sink.ndjson`;
  const args = ["--source", reg.url, "--kv", kv, "--shards", "8", "--follow", "--max-page", "500"];
  let moving: { stop: () => number } | null = timeline.churn(20);
  try {
    let crawl = spawnWatched("crawl", args);
    let child = sinkChild(kv, log);
    // Half-way: a quarter of the items stored, and the sink given some of them.
    await waitForItems(kv, data.size / 4);
    await logPast(log, 0);
    crawl.child.kill("SIGKILL");
    await crawl.end();
    await sleep(500); // the sink goes on a while from the dead crawl's ledger
    child.kill("SIGKILL");
    await child.status;
    child = sinkChild(kv, log);
    crawl = spawnWatched("crawl", args);
    await crawl.waitFor(/following the registry's changes/);
    // The sink killed while it is given the follower's changes.
    await logPast(log, await logPast(log, 0));
    child.kill("SIGKILL");
    await child.status;
    child = sinkChild(kv, log);
    await sleep(2000);
    moving.stop();
    moving = null;
    // The follower catches up, then stops; the sink process is killed one last time.
    const deadline = Date.now() + 20_000;
    for (;;) {
      const out = await runTask("export", ["--kv", kv]);
      const n = out.stdout.split("\n").filter((l) => l).length;
      if (out.code === 0 && n === data.size) break;
      if (Date.now() > deadline) throw new Error(`not caught up: ${n} of ${data.size}`);
      await sleep(500);
    }
    await sleep(1000);
    crawl.child.kill("SIGINT");
    assert.equal((await crawl.end()).code, 0);
    child.kill("SIGKILL");
    await child.status;
    // What the last killed process had not given yet, given now from where it stood.
    {
      using store = await Deno.openKv(kv);
      const file = await Deno.open(log, { append: true });
      const enc = new TextEncoder();
      const sink = ndjsonSink((line) => file.writeSync(enc.encode(line)));
      for (const c of await listCrawls(store)) {
        await deliverAll({ kv: store }, c.id, sink);
      }
      file.close();
    }
    const exported = await runTask("export", ["--kv", kv]);
    assert.equal(exported.code, 0, exported.stderr);
    const want = new Map(
      exported.stdout.split("\n").filter((l) => l).map((l) => {
        const it = JSON.parse(l);
        return [it.id, it.rev] as const;
      }),
    );
    const got = replay(await Deno.readTextFile(log));
    const missing = [...want.keys()].filter((k) => !got.has(k));
    const extra = [...got.keys()].filter((k) => !want.has(k));
    const stale = [...want].filter(([k, r]) => got.has(k) && got.get(k) !== r);
    assert.deepEqual(
      { missing: missing.slice(0, 3), extra: extra.slice(0, 3), stale: stale.slice(0, 3) },
      { missing: [], extra: [], stale: [] },
    );
    assert.equal(got.size, data.size);
  } finally {
    moving?.stop();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
