/**
 * Every bound holds against hosts that attack the crawler (issue "hostile hosts"): bytes count as
 * they inflate, never as they travel (a gzip bomb among documents is one `tooLarge` item in a
 * process that stays small), a server that compresses although `identity` was asked is read all
 * the same, and a `_changes` answer over its cap is asked again smaller, never dropped.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { taskArgs } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";
import { prng } from "../../lib/sim/names.ts";
import { CouchSource } from "../../lib/sources/couch/mod.ts";
import { runTask } from "../helpers.ts";

/** Runs a task as users run it and samples its resident memory until it ends: its peak, in MiB. */
async function peakRss(task: string, args: string[]) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...taskArgs(task), ...args],
    cwd: new URL("../..", import.meta.url).pathname,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let peak = 0;
  const sampling = (async () => {
    for (;;) {
      try {
        const status = await Deno.readTextFile(`/proc/${child.pid}/status`);
        const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
        peak = Math.max(peak, kb / 1024);
      } catch {
        return; // gone
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const out = await child.output();
  await sampling;
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr), peakMiB: peak };
}

Deno.test("bounds: a 1 GiB-inflating gzip document among 2,000 is one tooLarge item; the process stays under 512 MiB; the rest exact", async () => {
  const data = new RegistryData(await realNames(2_000));
  // About 1% of the documents are bombs: 1.4 MB on the wire, 1 GiB inflated, no length declared.
  const reg = await startRegistry(data, {
    includeDocs: false,
    bulkGet: false,
    badDocRate: 0.01,
    badDocs: ["bomb"],
  });
  const dir = await Deno.makeTempDir();
  try {
    const run = await peakRss("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--docs", "--shards", "8"],
    ]);
    assert.equal(run.code, 0, run.stderr.slice(-1000));
    const bombs = /too large (\d+)/.exec(run.stdout);
    assert.ok(bombs && Number(bombs[1]) > 0, run.stdout);
    assert.match(run.stdout, /checked: exact/);
    assert.ok(run.peakMiB <= 512, `peak RSS ${run.peakMiB.toFixed(0)} MiB`);
    console.log(`  peak RSS ${run.peakMiB.toFixed(0)} MiB`);
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    const items = exported.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.equal(items.length, data.size);
    const large = items.filter((it) => it.tooLarge).length;
    assert.equal(large, Number(bombs![1]));
    assert.ok(items.every((it) => it.tooLarge || it.doc?._id === it.id), "the rest have theirs");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bounds: a server that gzips every answer although identity was asked is read as it is meant", async () => {
  const data = new RegistryData(await realNames(3_000));
  const reg = await startRegistry(data, { gzipAll: true, includeDocs: false, bulkGet: false });
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--docs", "--shards", "4"],
    ]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /documents 3,000, document errors 0, too large 0/);
    assert.match(run.stdout, /checked: exact/);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("bounds: a _changes answer over its cap is asked again smaller, down to one row, and what fitted is remembered", async () => {
  const data = new RegistryData(await realNames(1_000));
  const since = String(data.updateSeq);
  data.churn(300, prng(4));
  // Rows of 40 KB each: 200 of them are 8 MB, over the 3.3 MB a batch of 200 may be (one fits).
  const reg = await startRegistry(data, { changesRowPadBytes: 40_000 });
  try {
    const source = new CouchSource(reg.url);
    const first = await source.changes(since, 200);
    assert.ok(first.rows.length > 0 && first.rows.length < 200, `${first.rows.length} rows`);
    const asked = reg.stats.changes;
    const next = await source.changes(first.lastSeq, 200);
    assert.ok(next.rows.length > 0);
    assert.equal(reg.stats.changes - asked, 1, "the next batch starts at the size that fitted");
    // The crawl on top of it reads the feed through to its end: exact.
    const dir = await Deno.makeTempDir();
    try {
      const run = await runTask("crawl", ["--source", reg.url, "--kv", `${dir}/c.kv`]);
      assert.equal(run.code, 0, run.stderr);
      assert.match(run.stdout, /checked: exact/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  } finally {
    await reg.close();
  }
});

Deno.test("bounds: 16 documents from a slowloris host (a byte every 3 s) are cut for coming too slowly (not left to each attempt's timeout, tens of minutes)", async () => {
  const names = (await realNames(200)).slice(0, 16);
  const data = new RegistryData(names.sort());
  const reg = await startRegistry(data, {
    includeDocs: false,
    bulkGet: false,
    badDocRate: 1,
    badDocs: ["drip"],
  });
  const dir = await Deno.makeTempDir();
  try {
    // A guard, not a measure (about 25 s on a quiet machine; the 2 minutes is measured
    // there): before, this crawl took 23.5 minutes to fail.
    const started = Date.now();
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--docs", "--shards", "2"],
    ]);
    const took = (Date.now() - started) / 1000;
    assert.ok(took < 600, `ended after ${took.toFixed(0)} s`);
    const out = run.stdout + run.stderr;
    // Said by the retry lines, or, the host failing every request meanwhile, by its outage line.
    assert.match(
      out,
      /came too slowly|sent nothing for|a body sent a byte at a time/,
      out.slice(-1500),
    );
    if (run.code === 0) assert.match(run.stdout, /document errors 16/);
    else assert.match(run.stderr, /^error: .*(slowly|refuse|answer)/m);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
