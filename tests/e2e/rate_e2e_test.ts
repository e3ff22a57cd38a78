/**
 * `--rate` and the pace learned from a host's 429s, end to end: `deno task crawl` (as users run
 * it) with documents against an npm-replica registry whose hosts answer 429 beyond 100 requests a
 * second. With `--rate 80` no request gets a 429; with none, the crawl learns the host's pace, says
 * so, and the copy is as exact.
 */
import assert from "node:assert/strict";
import { DOCS_CHECK_SAMPLE } from "../../lib/engine/crawl/docs_check.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { runTask } from "../helpers.ts";

const NAMES = Array.from({ length: 600 }, (_, i) => `pkg-${String(i).padStart(4, "0")}`);

async function crawlOnce(extra: string[]) {
  const reg = await startRegistry(new RegistryData(NAMES), {
    ...npmReplicaProfile(),
    docsElsewhere: true,
    rateLimit: 100,
    // Answers 20 ms away, as a real host's are at least: a loopback answer's usual 1 ms made a
    // stall of the loaded machine (112 ms, once in five full runs) a latency cut after the 429s'.
    latencyMs: 20,
  });
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--docs-url", reg.docsUrl!, "--docs"],
      ...["--kv", `${dir}/c.kv`, "--shards", "4", ...extra],
    ]);
    assert.equal(run.code, 0, run.stderr);
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    assert.equal(exported.code, 0, exported.stderr);
    const ids = exported.stdout.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(ids.map((d) => d.id), NAMES);
    assert.ok(ids.every((d) => d.doc?._id === d.id), "every document stored");
    return { run, limited: reg.stats.limited ?? 0, docs: reg.stats.docs };
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("--rate 80 against a host limited to 100 a second: no 429 at all", async () => {
  // Without splits: a straggler split may have its parent start up to a heartbeat's worth of rows
  // past the split key before it learns its new end, and the child asks for those again (27 of
  // 600 in one CI run). Here every request counted must be a first one.
  const { run, limited, docs } = await crawlOnce(["--rate", "80", "--no-rebalance"]);
  assert.equal(limited, 0);
  // Each document once, and the first few once more: asked before the crawl is made, to see that
  // documents are where it looks (`docs_check.ts`).
  assert.equal(docs, NAMES.length + DOCS_CHECK_SAMPLE);
  assert.match(run.stdout, /pace: rate cap 80\/s/);
});

Deno.test("no --rate: the host's 429s slow the crawl to its pace, said in the summary", async () => {
  const { run, limited } = await crawlOnce([]);
  assert.ok(limited > 0, "the host was asked faster than it serves");
  const line = run.stdout.split("\n").find((l) => l.includes("pace:")) ?? "";
  const m = /slowed to ([\d,.]+)\/s \(HTTP 429 [^)]*\), ([\d,]+) pushed back of ([\d,]+) requests/
    .exec(line);
  assert.ok(m, line);
  assert.ok(Number(m[1].replace(/,/g, "")) < 100, `slowed to ${m[1]}/s`);
  // Every 429 of both hosts (the listings' too) seen and counted.
  const pushedBack = [...line.matchAll(/([\d,]+) pushed back/g)]
    .reduce((sum, p) => sum + Number(p[1].replace(/,/g, "")), 0);
  assert.equal(pushedBack, limited);
});
