import assert from "node:assert/strict";
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import { FakeClock, JumpingClock, nextTurn } from "../../fake_clock.ts";
import { TransientError } from "../../../lib/base/errors.ts";
import { LeaseDispatcher, runLeaseWorker } from "../../../lib/engine/dispatch/_lease_workers.ts";
import { crawlStatus } from "../../../lib/engine/crawl/reads/status.ts";
import { getCrawl, listCrawls, listShards } from "../../../lib/engine/store/mod.ts";
import { iterateItems } from "../../../lib/engine/items/item_read.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { bundledNames, syntheticNames } from "../../../lib/sim/names.ts";
import { openCrawl } from "../../../lib/engine/crawl/lifecycle.ts";
import { readLiveness } from "../../../lib/engine/store/leases.ts";
import { claimable } from "../../../lib/engine/dispatch/_shard_runner.ts";
import { createRuntime } from "../../../lib/engine/dispatch/runtime.ts";
import { begin, ctxOf, spec, workDeps } from "../../engine_helpers.ts";
import {
  assertCrawledExactly,
  dataOf,
  randomKeys,
  spawnRegistry,
  taskArgs,
  waitForItems,
  wrapSource,
} from "../../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");

Deno.test("lease: three in-process lease workers crawl exactly once, rebalancing on", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(4000, ASCII, 62, 7));
  const source = new MemorySource(data, { maxPage: 60 });
  await begin(kv, source, spec({ shards: 5, maxPage: 60, rebalance: true }), "three");
  const deps = workDeps(kv, source, {
    dispatcher: new LeaseDispatcher({ clock: SYSTEM_CLOCK }),
    rebalance: { minItems: 60 },
  });
  const stats = await Promise.all(
    ["w1", "w2", "w3"].map((owner) =>
      runLeaseWorker(deps, { owner, exitWhenIdle: true, idleMs: 10 })
    ),
  );
  assert.ok(stats.filter((s) => s.claims > 0).length >= 2, "the work was shared");
  assert.equal(stats.reduce((n, s) => n + s.errors, 0), 0);
  assert.equal((await getCrawl(kv, "three")).value!.status, "done");
  await assertCrawledExactly(kv, "three", data.keys, { partition: true });
});

Deno.test("lease: idle or failing, a worker sleeps (counted with an injected clock)", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(300, ASCII, 63, 6));
  const source = new MemorySource(data, { maxPage: 60 });
  await begin(kv, source, spec({ shards: 2, maxPage: 60 }), "down");
  let calls = 0;
  const down = wrapSource(source, {
    list: () => (calls++, Promise.reject(new TransientError("connection refused at http://x"))),
  });
  const whileRunning: number[] = [];
  const clock = new JumpingClock(Date.now(), async (ms) => {
    if ((await getCrawl(kv, "down")).value!.status === "running") whileRunning.push(ms);
  });
  const stats = await runLeaseWorker(
    workDeps(kv, down, { dispatcher: new LeaseDispatcher({ clock }), clock }),
    { maxRunMs: 10 * 60_000 },
  );
  const slept = clock.slept;
  // Ten simulated minutes: each shard tried after its backoff, until the crawl fails at 8 tries;
  // while it runs, the worker looks again at least once a second, never more often than 4 times.
  assert.equal((await getCrawl(kv, "down")).value!.status, "failed");
  assert.ok(calls <= 16, `${calls} listing attempts in ten minutes`);
  assert.ok(slept.length <= 620, `${slept.length} sleeps`);
  assert.ok(slept.every((ms) => ms >= 250), "never a busy loop");
  assert.ok(whileRunning.length > 3, `${whileRunning.length} sleeps while the crawl ran`);
  assert.equal(Math.max(...whileRunning), 1000, "asleep a second at most while a crawl runs");
  assert.ok(stats.idleSleeps > 0);
  // Nothing to do at all: the worker only sleeps, longer each time up to 5 s.
  const idler = new JumpingClock(clock.now());
  await runLeaseWorker(workDeps(kv, source, { clock: idler }), { maxRunMs: 60_000 });
  const idle = idler.slept;
  assert.ok(idle.length <= 20, `${idle.length} idle sleeps in a simulated minute`);
  assert.equal(Math.max(...idle), 5000);
  assert.equal((await crawlStatus(kv, "down", { clock: SYSTEM_CLOCK })).status, "failed");
});

Deno.test("lease: dispatching wakes this process's idle workers; a dispatch made while one looked is not slept through", async () => {
  const clock = new FakeClock();
  const d = new LeaseDispatcher({ clock });
  const g0 = d.generation;
  let woke = false;
  const sleeping = d.sleep(60_000, { generation: g0 }).then(() => woke = true);
  await d.dispatch("c", 1, { delayMs: 5000 }); // due later: no reason to wake now
  await clock.advance(59_999);
  assert.equal(woke, false, "a minute's sleep, but for a millisecond");
  await d.dispatch("c", 1);
  await sleeping;
  assert.equal(clock.pending, 0, "woken: its timer is gone");
  assert.equal(d.generation, g0 + 1);
  // Work came between the look (generation g0) and the sleep: no sleep at all.
  await d.sleep(60_000, { generation: g0 });
  const stop = new AbortController();
  const aborted = d.sleep(60_000, { generation: d.generation, signal: stop.signal });
  stop.abort();
  await aborted;

  // A shard one worker of the process runs is passed by its siblings without a claim's reads.
  assert.equal(d.runShard("c", 1), true);
  assert.equal(d.runShard("c", 1), false, "a sibling runs it");
  assert.equal(d.runShard("c", 2), true);
  assert.equal(d.runShard("other", 1), true, "per crawl");
  d.ranShard("c", 1);
  assert.equal(d.runShard("c", 1), true, "free again once its worker is done with it");

  // Two workers asleep for a minute: the crawl opened after they went idle still runs at once.
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(2000, ASCII, 64, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  // Their minute's sleeps are on a clock that stands still: only a dispatch can end them.
  const still = new FakeClock(Date.now());
  const dispatcher = new LeaseDispatcher({ clock: still });
  let finished!: () => void;
  const done = new Promise<void>((r) => finished = r);
  const deps = workDeps(kv, source, {
    dispatcher,
    clock: still,
    onEvent: (e) => e.kind === "crawl-done" && e.crawlId === "late" && finished(),
  });
  const halt = new AbortController();
  const workers = ["w1", "w2"].map((owner) =>
    runLeaseWorker(deps, { owner, idleMs: 60_000, maxIdleMs: 60_000, signal: halt.signal })
  );
  for (let i = 0; i < 10_000 && still.pending < 2; i++) await nextTurn();
  assert.equal(still.pending, 2, "both workers are asleep");
  await openCrawl(ctxOf(kv, source, { dispatcher }), spec({ shards: 4, maxPage: 100 }), {
    id: "late",
  });
  // Their clock stands still: the crawl ends only if the dispatch woke them (a guard, not a wait,
  // fails the test should it not).
  let guard: ReturnType<typeof setTimeout> | undefined;
  const slept = new Promise<"slept">((r) => guard = setTimeout(() => r("slept"), 30_000));
  assert.notEqual(
    await Promise.race([done, slept]),
    "slept",
    "the workers slept through the dispatch",
  );
  clearTimeout(guard);
  assert.equal((await getCrawl(kv, "late")).value!.status, "done");
  halt.abort();
  const stats = await Promise.all(workers);
  assert.ok(stats.every((s) => s.claims > 0), "both workers woke and took shards");
  await assertCrawledExactly(kv, "late", data.keys, { partition: true });
});

Deno.test("lease: three `deno task worker` processes on one KV file, one killed mid-crawl", async () => {
  const reg = await spawnRegistry([
    "--synthetic",
    "20000",
    "--latency-ms",
    "5",
    "--max-limit",
    "1000",
  ]);
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/w.kv`;
  const worker = (name: string) =>
    new Deno.Command(Deno.execPath(), {
      args: [
        ...taskArgs("worker"),
        "--kv",
        kvPath,
        "--source",
        reg.url,
        "--shards",
        "6",
        "--max-page",
        "50",
        "--lease-ms",
        "1500",
        "--exit-when-idle",
        "--workers",
        "2",
        "--name",
        name,
      ],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
  try {
    const ws = ["w1", "w2", "w3"].map(worker);
    const logs = ws.map((w) => new Response(w.stderr).text());
    await waitForItems(kvPath, 4000); // a fifth of the registry: well before the end
    ws[1].kill("SIGKILL");
    const codes = await Promise.all(ws.map(async (w) => (await w.status).code));
    const text = await Promise.all(logs);
    assert.notEqual(codes[1], 0, "w2 was killed mid-crawl");
    assert.equal(codes[0], 0, text[0]);
    assert.equal(codes[2], 0, text[2]);
    using kv = await Deno.openKv(kvPath);
    const [crawl] = await listCrawls(kv);
    assert.equal(crawl.status, "done");
    const ids: string[] = [];
    for await (const it of iterateItems(kv, crawl.id)) ids.push(it.id);
    assert.equal(ids.length, 20000);
    await assertCrawledExactly(
      kv,
      crawl.id,
      syntheticNames(await bundledNames(), 20000, { seed: 42 }),
    );
    const truth = syntheticNames(await bundledNames(), 20000, { seed: 42 });
    assert.deepEqual(new Set(ids), new Set(truth));
    const counted = (await listShards(kv, crawl.id)).reduce((n, e) => n + e.value.items, 0);
    assert.equal(counted, 20000, "no page counted twice across workers");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("lease: a `deno task worker` stopped with SIGTERM lets its shards go at once", async () => {
  const reg = await spawnRegistry(["--synthetic", "6000", "--latency-ms", "30"]);
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/w.kv`;
  const worker = () =>
    new Deno.Command(Deno.execPath(), {
      args: [
        ...taskArgs("worker"),
        ...["--kv", kvPath, "--source", reg.url, "--shards", "4", "--max-page", "50"],
        ...["--workers", "4", "--exit-when-idle"],
      ],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
  try {
    const first = worker();
    await waitForItems(kvPath, 800);
    first.kill("SIGTERM");
    const [status, log] = await Promise.all([first.status, new Response(first.stderr).text()]);
    assert.equal(status.code, 0, log);
    assert.match(log, /stopping: letting the shards go/);
    {
      using kv = await Deno.openKv(kvPath);
      assert.deepEqual(await Array.fromAsync(kv.list({ prefix: ["beat"] })), [], "beat deleted");
      const [crawl] = await listCrawls(kv);
      const now = Date.now();
      const liveness = await readLiveness(kv, now);
      const open = (await listShards(kv, crawl.id)).filter((e) => !e.value.done);
      assert.ok(open.length > 0, "stopped mid-crawl");
      for (const e of open) {
        assert.ok(claimable(e.value, "next", now, liveness), `shard ${e.value.id} is free at once`);
      }
    }
    const second = worker();
    const [done, log2] = await Promise.all([second.status, new Response(second.stderr).text()]);
    assert.equal(done.code, 0, log2);
    using kv = await Deno.openKv(kvPath);
    const [crawl] = await listCrawls(kv);
    assert.equal(crawl.status, "done");
    await assertCrawledExactly(
      kv,
      crawl.id,
      syntheticNames(await bundledNames(), 6000, { seed: 42 }),
    );
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("lease tick: returns at its first look when nothing is pending, else works then returns", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, ASCII, 64, 6));
  const source = new MemorySource(data, { maxPage: 60 });
  const runtime = createRuntime({ kv, openSource: () => source, dispatch: "lease", workers: 0 });
  try {
    // An idle deployment: a tick of "50 s" looks once and returns, without sleeping.
    assert.deepEqual(await runtime.leaseTick(50_000), {
      claims: 0,
      shardsDone: 0,
      errors: 0,
      idleSleeps: 0,
    });
    await begin(kv, source, spec({ shards: 3, maxPage: 60 }), "tick");
    const stats = await runtime.leaseTick(50_000);
    assert.equal(stats.shardsDone, 3, "the tick ran every shard, then found nothing and returned");
    assert.equal((await getCrawl(kv, "tick")).value!.status, "done");
    await assertCrawledExactly(kv, "tick", data.keys, { partition: true });
  } finally {
    await runtime.close();
  }
});
