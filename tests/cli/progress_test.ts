import { clockWithNow } from "../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { duration, followLine, n, paceLine, Progress, summary } from "../../lib/cli/progress.ts";
import type { CrawlStatusReport, ShardStatus } from "../../lib/engine/crawl/mod.ts";
import { TerminalScreen } from "../terminal_screen.ts";
import type { HostPace } from "../../lib/sources/http/mod.ts";

function shard(id: number, start: string | null, end: string | null, items: number): ShardStatus {
  return {
    id,
    start,
    end,
    items,
    expected: 500,
    done: false,
    pages: 1,
    rate: 0,
    leased: true,
    inflight: null,
    docErrors: 0,
    retries: 0,
    lastError: null,
    retryAt: null,
    verified: null,
    unproven: null,
    parent: null,
  };
}

function report(items: number, over: Partial<CrawlStatusReport> = {}): CrawlStatusReport {
  return {
    id: "c1",
    status: "running",
    source: "http://x/db",
    docs: false,
    docMode: null,
    total: 1000,
    itemsStored: items,
    pages: 3,
    documents: 0,
    docErrors: 0,
    pendingDocs: null,
    tooLarge: 0,
    shardCount: 2,
    shardsDone: 0,
    retries: 0,
    recentErrors: [],
    rate: 0,
    etaSeconds: null,
    planMethod: "rank",
    pageCap: null,
    registry: null,
    learned: null,
    follow: null,
    createdAt: "",
    startedAt: null,
    finishedAt: null,
    error: null,
    deadLetters: 0,
    splits: [],
    drift: null,
    driftError: null,
    verification: null,
    docRevisions: null,
    sinks: [],
    shards: [
      shard(0, null, "m", items / 2),
      shard(1, "m", null, items / 2),
    ],
    ...over,
  };
}

Deno.test("progress: plain lines at most every interval, with rate and ETA", () => {
  let t = 0;
  const out: string[] = [];
  const p = new Progress({
    tty: false,
    write: (s) => out.push(s),
    clock: clockWithNow(() => t),
    plainIntervalMs: 5000,
  });
  p.update(report(0));
  t = 1000;
  p.update(report(100)); // too soon: no line
  t = 6000;
  p.update(report(600));
  assert.equal(out.length, 2);
  assert.match(
    out[1],
    /^progress: c1 running: 600\/1,000 items \(60\.0%\) 100 items\/s ETA 4s shards 0\/2\n$/,
  );
  t = 7000;
  p.update(report(1000, { status: "done", shardsDone: 2 }), true);
  assert.match(
    out[2],
    /^progress: c1 done: 1,000\/1,000 items \(100\.0%\) \d+ items\/s shards 2\/2\n$/,
  );
  t = 13000;
  const pendingDocs = { pending: 34, landed: 7, expired: 0, asked: 20, notModified: 9 };
  p.update(report(1000, { status: "done", shardsDone: 2, docs: true, pendingDocs }), true);
  assert.match(out[3], /shards 2\/2, 34 documents pending\n$/, "waiting for the last documents");
});

Deno.test("progress: a TTY gets one bar per shard, redrawn in place", () => {
  let t = 0;
  const out: string[] = [];
  const p = new Progress({ tty: true, write: (s) => out.push(s), clock: clockWithNow(() => t) });
  p.update(report(200));
  t = 1000;
  p.update(report(400));
  assert.equal(out.length, 2);
  assert.equal(out[0].split("\n").filter(Boolean).length, 3, "header + 2 bars");
  assert.ok(out[1].startsWith("\x1b[3A"), "moves up over the previous frame");
  assert.match(out[1], /█{9}░{15}\s+200\/500/); // 40% of a 24-wide bar
});

Deno.test("progress: summary and durations", () => {
  const s = summary(report(1000, { status: "done", shardsDone: 2, documents: 10, docErrors: 1 }), {
    elapsedMs: 2000,
    retries: 7,
  });
  assert.match(s, /crawl c1 done: 1,000 items of 1,000 in 2 shards/);
  assert.match(s, /document errors 1, too large 0, retries 7/);
  assert.match(s, /this run: elapsed 2s \(2\.0 s\), 500 items\/s, shard items max 500 \/ mean 500/);
  const resumed = summary(report(1000, { status: "done" }), {
    elapsedMs: 1000,
    retries: 0,
    itemsThisRun: 250,
  });
  assert.match(resumed, /250 items\/s \(250 items stored by this run\)/);
  const drifted = summary(
    report(1000, {
      status: "done",
      drift: { seq: "77", inserted: 3, updated: 2, deleted: 1 },
    }),
    { elapsedMs: 1000, retries: 0 },
  );
  assert.match(drifted, /drift applied from _changes: 3 inserted, 2 updated, 1 deleted \(seq 77\)/);
  const noFeed = summary(
    report(1000, { status: "done", driftError: "change feed unavailable: 404" }),
    {
      elapsedMs: 1000,
      retries: 0,
    },
  );
  assert.match(noFeed, /no drift catch-up: change feed unavailable: 404/);
  // Documents behind their revision on the document host: said only when there were some.
  assert.doesNotMatch(s, /documents behind/);
  const pendingDocs = { pending: 2, landed: 1_205, expired: 1, asked: 4_000, notModified: 3_100 };
  const behind = summary(report(1000, { status: "done", docs: true, pendingDocs }), {
    elapsedMs: 1000,
    retries: 0,
  });
  assert.match(
    behind,
    /documents behind the document host: 2 pending, 1,205 landed later, 1 given up on \(errors\); 4,000 asked again, 3,100 answered 304/,
  );
  // Documents tied to their revisions are not remarked on; abbreviated ones are said unchecked.
  assert.doesNotMatch(s, /documents: not checked/);
  const abbreviated = summary(
    report(1000, { status: "done", docs: true, docRevisions: "unverified" }),
    { elapsedMs: 1000, retries: 0 },
  );
  assert.match(abbreviated, /documents: not checked against their listed revisions/);
  assert.equal(duration(42), "42s");
  assert.equal(duration(185), "3m05s");
  assert.equal(duration(3720), "1h02m");
  assert.equal(duration(null), "?");
});

Deno.test("progress: numbers get thousands separators as en-US writes them, rounded", () => {
  const cases: [number, string][] = [
    [0, "0"],
    [999, "999"],
    [1000, "1,000"],
    [1234567, "1,234,567"],
    [-1234, "-1,234"],
    [12.6, "13"],
    [1e12, "1,000,000,000,000"],
  ];
  for (const [x, want] of cases) assert.equal(n(x), want);
});

Deno.test("progress: a followed crawl's line says where it stands, how far behind, and what was proven when", () => {
  const out: string[] = [];
  const p = new Progress({
    tty: false,
    write: (s) => out.push(s),
    clock: clockWithNow(() => 100_000),
    following: true,
  });
  const follow = {
    lagSeconds: 1.25,
    changesBehind: 12,
    applied: 3456,
    head: "9001",
    checkedAt: new Date(99_000).toISOString(),
    verifiedAt: new Date(100_000 - 125_000).toISOString(),
    roundChecked: 3,
    repaired: 2,
    lastRepair: null,
    lateApplied: 0,
    lastGoodAt: new Date(99_000).toISOString(),
    failing: null,
    rows: {
      comparedAt: new Date(100_000 - 3_600_000).toISOString(),
      lastRepaired: 0,
      provenAt: new Date(100_000 - 3_600_000).toISOString(),
      compared: 500,
      repaired: 0,
      forced: null,
    },
    resync: null,
  };
  p.update(report(1000, { status: "done", follow }), true);
  assert.deepEqual(out, [
    "progress: c1 following: seq 9001, 12 changes behind, lag 1.3 s, 3,456 changes applied, " +
    "counts proven 2m05s ago, rows compared 1h00m ago (all equal), 2 ranges repaired\n",
  ]);
  // A run that does not follow (a refresh of a done crawl) draws it as done, not as following.
  const refresh: string[] = [];
  new Progress({ tty: false, write: (s) => refresh.push(s), clock: clockWithNow(() => 100_000) })
    .update(report(1000, { status: "done", follow }), true);
  assert.match(refresh[0], /^progress: c1 done: 1,000\/1,000 items \(100\.0%\) /);
  assert.equal(
    followLine({ ...follow, changesBehind: null, verifiedAt: null, repaired: 0, rows: null }, 0),
    "following: seq 9001, ? changes behind, lag 1.3 s, 3,456 changes applied, counts not " +
      "proven yet, rows not compared yet",
  );
  // Looks failing: said first, since when and why; a sweep forced by a resync likewise.
  const failing = { since: new Date(100_000 - 35_000).toISOString(), reason: "connection refused" };
  assert.match(
    followLine({ ...follow, failing, changesBehind: null }, 100_000),
    /^following: seq 9001, the registry has failed to answer for 35s \(connection refused\), \? changes behind/,
  );
  const forced = { ...follow.rows, forced: "the feed did not know seq 12", compared: 9000 };
  assert.match(
    followLine({ ...follow, rows: forced, changesBehind: null }, 100_000),
    /comparing every row again \(the feed did not know seq 12\): 9,000 compared, 0 repaired, \? changes behind/,
  );
});

Deno.test("progress: a host that pushes back nearly every request is said to at once, not only slowed", () => {
  const host = {
    host: "registry.example",
    limitPerSecond: 50,
    reason: "HTTP 429",
    cutAt: 1000,
    heldUntil: null,
    sentPerSecond: 3,
    requests: 12,
    pushbacks: 12,
    pausedAt: null,
    pauseReason: null,
  };
  assert.equal(
    paceLine({ ratePerSecond: null, hosts: [host] }, 3000),
    "pace: registry.example refuses nearly every request (429/503/504), slowed to 50/s " +
      "(HTTP 429 2s ago), 12 pushed back of 12 requests",
  );
  assert.doesNotMatch(
    paceLine({ ratePerSecond: null, hosts: [{ ...host, pushbacks: 3 }] }, 3000)!,
    /refuses/,
  );
});

Deno.test("progress: a host paused by its breaker is said first, with how it failed", () => {
  const host = {
    host: "docs.example",
    limitPerSecond: null,
    reason: null,
    cutAt: null,
    heldUntil: null,
    sentPerSecond: 0,
    requests: 240,
    pushbacks: 0,
    pausedAt: 1000,
    pauseReason: "timed out after 20 s ×240",
  };
  assert.equal(
    paceLine({ ratePerSecond: null, hosts: [host] }, 6000),
    "pace: docs.example answers nothing (timed out after 20 s ×240): paused 5s ago, " +
      "tried again every few s",
  );
});

/** A report of `count` shards of 500 each, the first `done` of them done, `items` stored. */
function manyShards(count: number, done: number, items: number): CrawlStatusReport {
  const shards = Array.from({ length: count }, (_, i) => ({
    ...shard(i, i === 0 ? null : `k${i}`, i === count - 1 ? null : `k${i + 1}`, 0),
    items: i < done ? 500 : Math.floor((items - done * 500) / (count - done)),
    done: i < done,
  }));
  return report(items, {
    total: count * 500,
    shardCount: count,
    shardsDone: done,
    shards,
    id: "a-crawl-with-a-long-name",
  });
}

for (const [columns, rows] of [[80, 24], [160, 40], [40, 10]] as const) {
  Deno.test(`progress: in a ${columns}x${rows} terminal, 56 shards and log lines between drawings leave one drawing, every log line once, in order`, () => {
    let t = 0;
    const term = new TerminalScreen(columns, rows);
    const p = new Progress({
      tty: true,
      write: (s) => term.write(s),
      clock: clockWithNow(() => t),
      size: () => ({ columns, rows }),
    });
    term.write("$ deno task crawl\n");
    const logged: string[] = [];
    for (let step = 0; step < 60; step++) {
      t += 500;
      p.update(manyShards(56, Math.min(56, step), Math.min(28_000, step * 480)), true);
      if (step % 3 === 1) {
        // Some lines wrap (a registry's long error reason), most do not.
        const line = step % 9 === 1
          ? `retry ${step}: ${"x".repeat(columns + 17)} (attempt 2)`
          : `retry ${step}: shard ${step} answered 503; again in 1 s`;
        logged.push(line);
        p.log(line);
      }
    }
    p.end();
    term.write("crawl done: 28,000 items\n");
    const lines = term.transcript();
    assert.equal(lines[0], "$ deno task crawl");
    const heads = lines.filter((l) => l.startsWith("a-crawl-with-a-long-name "));
    assert.equal(heads.length, 1, `one drawing stays, not ${heads.length}:\n${lines.join("\n")}`);
    // Each log line, joined again where it wrapped, comes once and in the order it was logged.
    const text = lines.join("\n");
    let at = 0;
    for (const line of logged) {
      const rowsOf = line.match(new RegExp(`.{1,${columns}}`, "g"))!.map((r) => r.trimEnd());
      const found = text.indexOf(rowsOf.join("\n"), at);
      assert.ok(found >= 0, `${line} after ${at}:\n${text}`);
      assert.equal(text.indexOf(rowsOf.join("\n"), found + 1), -1, `${line} once`);
      at = found;
    }
    assert.ok(text.indexOf(logged.at(-1)!.slice(0, 20)) < text.indexOf(heads[0]), "logs above");
    assert.equal(lines.at(-1), "crawl done: 28,000 items", "what ends the run comes below");
    const drawing = lines.slice(lines.indexOf(heads[0]), -1);
    assert.ok(drawing.length <= rows - 1, `${drawing.length} rows fit in ${rows}`);
    assert.ok(drawing.every((l) => [...l].length < columns), "no drawn row wraps");
    if (drawing.length < 57) assert.match(drawing.at(-1)!, /more shards: \d+ done, \d+ to go/);
  });
}

Deno.test("progress: the ETA follows what is seen smoothly (one slow look does not throw it), counts past the plan and split shards are said", () => {
  let t = 0;
  const out: string[] = [];
  const p = new Progress({ tty: false, write: (s) => out.push(s), clock: clockWithNow(() => t) });
  const eta = () => /ETA (\S+)/.exec(out.at(-1)!)![1];
  // 100 items/s, 1,000 left: 10 s.
  p.update(report(0, { total: 2000, etaSeconds: null }), true);
  t = 10_000;
  p.update(report(1000, { total: 2000, etaSeconds: 10 }), true);
  assert.equal(eta(), "10s");
  // One look says 600 s (the slowest shard stalled a moment): the ETA moves, but not there.
  t = 11_000;
  p.update(report(1100, { total: 2000, etaSeconds: 600 }), true);
  const jumped = Number(
    eta().replace(/s$/, "").replace(
      /^(\d+)m(\d+)$/,
      (_, m, s) => String(60 * Number(m) + Number(s)),
    ),
  );
  assert.ok(jumped > 9 && jumped < 60, `ETA ${eta()} after one slow look`);
  // Past the plan: items published since it was made, not 100.2%; splits said beside the shards.
  const split = { parent: 0, child: 2, key: "g", at: "", items: 100 };
  p.update(
    report(2004, { total: 2000, shardCount: 3, shardsDone: 1, splits: [split] as never }),
    true,
  );
  assert.match(
    out.at(-1)!,
    /2,004 items \(the plan's 2,000, \+4 since\) .* shards 1\/3 \(2 planned, 1 split off\)/,
  );
});

Deno.test("progress: a host's slowdown is shown while it holds (requests near its pace, or cut in the last 30 s), not for minutes after", () => {
  const now = 1_000_000;
  const host: HostPace = {
    host: "registry.example",
    limitPerSecond: 50,
    reason: "latency 9.6x its usual",
    cutAt: now - 10_000,
    heldUntil: null,
    sentPerSecond: 12,
    requests: 10_000,
    pushbacks: 3,
    pausedAt: null,
    pauseReason: null,
  };
  const line = (h: HostPace) => paceLine({ ratePerSecond: null, hosts: [h] }, now);
  assert.match(line(host)!, /slowed to 50\/s \(latency 9\.6x its usual 10s ago\)/);
  assert.equal(
    line({ ...host, cutAt: now - 87_000 }),
    null,
    "grown past what is asked: not slowed",
  );
  assert.match(line({ ...host, cutAt: now - 87_000, sentPerSecond: 49 })!, /slowed to 50\/s/);
  assert.equal(line({ ...host, limitPerSecond: null, heldUntil: now - 1 }), null, "held no more");
});
