/**
 * The pacer (`host_pacer.ts`) on a fake clock: a rate cap, a host slowed by its pushback and no
 * other, `Retry-After` holds, growth back, latency, a crawl's rate inside the process's; and
 * through HTTP against a simulated host that answers 429 beyond 50 requests a second.
 */
import assert from "node:assert/strict";
import { Pacer } from "../../lib/sources/http/host_pacer.ts";
import { HttpClient } from "../../lib/sources/http/http.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";

/** A clock that moves only when something sleeps on it (sequential use). */
function fakeClock(start = 1_000_000) {
  const clock = {
    t: start,
    slept: [] as number[],
    now: () => clock.t,
    sleep: (ms: number) => {
      clock.slept.push(ms);
      clock.t += ms;
      return Promise.resolve();
    },
    every: () => () => {},
  };
  return clock;
}

const A = new URL("http://a.example/db/x");
const B = new URL("http://b.example/db/x");
const ok = { status: 200, ms: 10, route: "doc" };

/** Requests to A as fast as the pacer lets them go, until `until` (each must wait: time moves). */
async function paceUntil(pacer: Pacer, c: { t: number }, until: number) {
  for (let n = 0; c.t < until; n++) {
    if (n > 100_000) throw new Error("the pacer let 100,000 requests go at once");
    await pacer.pace(A);
    pacer.report(A, ok);
  }
}

Deno.test("a rate cap spaces requests 1/rate apart after a burst of 1/20 s", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ ratePerSecond: 100, clock: c });
  const start = c.t;
  for (let i = 0; i < 105; i++) await pacer.pace(A);
  // 5 go at once (100/20), then one every 10 ms: the 105th leaves 1,000 ms in.
  assert.equal(c.t - start, 1000);
  assert.equal(pacer.hosts()[0].requests, 105);
});

Deno.test("a 429 slows its host to 70% of what it served, and no other host", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  // 200 answered within the second before the 429 (2 every 10 ms).
  for (let i = 0; i < 200; i++) {
    if (i > 0 && i % 2 === 0) c.t += 10;
    await pacer.pace(A);
    pacer.report(A, ok);
  }
  pacer.report(A, { status: 429, ms: 5, route: "doc" });
  const [a] = pacer.hosts();
  assert.equal(a.limitPerSecond, 140);
  assert.equal(a.reason, "HTTP 429");
  assert.equal(a.pushbacks, 1);
  // A second 429 within the cool-down changes nothing (answers to requests sent before the cut).
  pacer.report(A, { status: 429, ms: 5, route: "doc" });
  assert.equal(pacer.hosts()[0].limitPerSecond, 140);
  assert.equal(pacer.hosts()[0].pushbacks, 2);
  // 140 a second from now on: 14 more requests take 1/140 s each after a burst of 7.
  const before = c.t;
  for (let i = 0; i < 14; i++) await pacer.pace(A);
  assert.equal(Math.round(c.t - before), Math.round(7 * (1000 / 140)));
  // Host B was never slowed.
  const t = c.t;
  for (let i = 0; i < 50; i++) await pacer.pace(B);
  assert.equal(c.t, t);
  assert.equal(pacer.hosts().find((h) => h.host === "b.example")!.limitPerSecond, null);
});

Deno.test("a Retry-After holds every request to its host until it is over", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  await pacer.pace(A);
  pacer.report(A, { status: 503, ms: 5, route: "_all_docs", retryAfterMs: 2_000 });
  assert.equal(pacer.hosts()[0].heldUntil, c.t + 2_000);
  const held = c.t;
  await pacer.pace(A);
  assert(c.t - held >= 2_000, `sent ${c.t - held} ms after a 2 s Retry-After`);
  assert.equal(pacer.hosts()[0].heldUntil, null);
  // A hold is capped: a host cannot park the crawl for an hour.
  pacer.report(A, { status: 429, ms: 5, route: "doc", retryAfterMs: 3_600_000 });
  assert.equal(pacer.hosts()[0].heldUntil, c.t + 30_000);
});

Deno.test("a slowed host grows back, once its cut is judged, while its rate holds requests back", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  for (let i = 0; i < 100; i++) (c.t += i > 0 ? 10 : 0, await pacer.pace(A), pacer.report(A, ok));
  // Ten 429s at once: one cut (the rest are of the same episode).
  for (let i = 0; i < 10; i++) pacer.report(A, { status: 429, ms: 5, route: "doc" });
  assert.equal(pacer.hosts()[0].limitPerSecond, 70);
  assert.equal(pacer.hosts()[0].pushbacks, 10);
  // On trial (judged at its own pace: no growth) until enough answers came without pushback.
  await paceUntil(pacer, c, c.t + 3_000);
  assert.equal(pacer.hosts()[0].limitPerSecond, 70);
  // Judged: it helped. Three seconds of demand above the rate: +5% a second.
  await paceUntil(pacer, c, c.t + 3_050);
  assert.equal(pacer.hosts()[0].limitPerSecond, Math.round(70 * 1.05 ** 3 * 10) / 10);
  // Quiet for over 10 s: +25% a second.
  await paceUntil(pacer, c, c.t + 5_000);
  const before = pacer.hosts()[0].limitPerSecond!;
  await paceUntil(pacer, c, c.t + 1_010);
  assert.equal(pacer.hosts()[0].limitPerSecond, Math.round(before * 1.25 * 10) / 10);
});

Deno.test("latency growing past 4x its usual slows the host; a few slow answers do not", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  // Answered for 6 s first: latency counts once the host has answered for 5 s.
  for (let i = 0; i < 600; i++) (await pacer.pace(A), pacer.report(A, ok), c.t += 10);
  // Large documents answered in 3 s (a few in a row) move nothing.
  for (let i = 0; i < 5; i++) pacer.report(A, { status: 200, ms: 3_000, route: "doc" });
  assert.equal(pacer.hosts()[0].limitPerSecond, null);
  // Listings are not compared at all: a page of 10,000 rows is rightly slower than a probe.
  for (let i = 0; i < 60; i++) pacer.report(A, { status: 200, ms: 400, route: "_all_docs" });
  assert.equal(pacer.hosts()[0].limitPerSecond, null);
  // Every answer now takes 600 ms: the host is overloaded.
  for (let i = 0; i < 15; i++) (pacer.report(A, { status: 200, ms: 600, route: "doc" }), c.t += 10);
  const [a] = pacer.hosts();
  assert(a.limitPerSecond !== null, "latency 60x its usual slowed nothing");
  assert(/^latency \d+(\.\d)?x its usual$/.test(a.reason!), a.reason!);
});

Deno.test("latency growing in a crawl's first seconds (its first burst queuing) slows nothing", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  // 512 requests at once: the first answers in 20 ms, those behind them queued, 150 ms.
  for (let i = 0; i < 512; i++) await pacer.pace(A);
  for (let i = 0; i < 4_000; i++) {
    pacer.report(A, { status: 200, ms: i < 60 ? 20 : 150, route: "doc" });
    await pacer.pace(A);
    c.t += 1;
  }
  assert.equal(pacer.hosts()[0].limitPerSecond, null, "slowed in its first 4 s");
  // Past 5 s of answers, the host slowing down is the host's: slowed to 85% of what it serves.
  const second = (ms: number) => {
    for (let i = 0; i < 1_000; i++) (pacer.report(A, { status: 200, ms, route: "doc" }), c.t += 1);
  };
  second(20);
  second(20);
  second(600);
  const [a] = pacer.hosts();
  assert.match(a.reason ?? "", /^latency/);
  // 85% of the answers counted over the last second (its window's buckets: 900-1,000 of them).
  assert.ok(a.limitPerSecond! >= 0.85 * 900 && a.limitPerSecond! <= 850, JSON.stringify(a));
});

Deno.test("a host asked a few times a second (a crawl just resumed, slow documents left) is not slowed by its latency", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  for (let i = 0; i < 600; i++) (await pacer.pace(A), pacer.report(A, ok), c.t += 10);
  c.t += 10_000; // paused
  // Resumed: what is left are documents of a second each, 5 a second.
  for (let i = 0; i < 50; i++) {
    await pacer.pace(A);
    pacer.report(A, { status: 200, ms: 1_000, route: "doc" });
    c.t += 200;
  }
  assert.equal(pacer.hosts()[0].limitPerSecond, null, pacer.hosts()[0].reason ?? "");
});

Deno.test("503s that come as often at a slower pace are the host's failures: the cut is undone", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  // One answer in 5 is a 503, whatever the pace: 100 a second, then (after the cut) 70.
  let i = 0;
  const second = async (perSecond: number) => {
    const end = c.t + 1000;
    while (c.t < end) {
      await pacer.pace(A);
      pacer.report(A, i++ % 5 === 0 ? { status: 503, ms: 5, route: "doc" } : ok);
      c.t += 1000 / perSecond;
    }
  };
  await second(100);
  assert.equal(pacer.hosts()[0].reason, "HTTP 503");
  assert.ok(pacer.hosts()[0].limitPerSecond! <= 70);
  await second(70);
  await second(70);
  await second(70);
  const [a] = pacer.hosts();
  assert.equal(a.limitPerSecond, null, "the cut was undone");
  assert.equal(a.reason, null);
  // For a minute, more of them slow nothing.
  const before = pacer.hosts()[0].pushbacks;
  await second(100);
  assert.equal(pacer.hosts()[0].limitPerSecond, null);
  assert.equal(pacer.hosts()[0].pushbacks - before, 20);
});

Deno.test("documents slow whatever the pace (a hot range) slow it once, then not", async () => {
  const c = fakeClock();
  const pacer = new Pacer({ clock: c });
  // Answered for 6 s first: latency counts once the host has answered for 5 s.
  for (let i = 0; i < 600; i++) (await pacer.pace(A), pacer.report(A, ok), c.t += 10);
  // Only the hot documents are left: each takes a second, at any pace.
  const slow = { status: 200, ms: 1_000, route: "doc" };
  for (let i = 0; i < 15; i++) (await pacer.pace(A), pacer.report(A, slow), c.t += 10);
  assert.match(pacer.hosts()[0].reason ?? "", /^latency/);
  const end = c.t + 5_000;
  while (c.t < end) (await pacer.pace(A), pacer.report(A, slow), c.t += 10);
  const [a] = pacer.hosts();
  assert.equal(a.limitPerSecond, null, "the cut was undone");
  assert.equal(a.reason, null);
});

Deno.test("a crawl's own rate goes inside the process's, which learns the hosts", async () => {
  const c = fakeClock();
  const process = new Pacer({ ratePerSecond: 1000, clock: c });
  const crawl = process.withRate(10);
  const start = c.t;
  for (let i = 0; i < 11; i++) await crawl.pace(A);
  assert.equal(c.t - start, 1000); // 10 a second, no burst at that rate
  for (let i = 0; i < 20; i++) crawl.report(A, ok);
  crawl.report(A, { status: 429, ms: 5, route: "doc" });
  assert.equal(process.hosts()[0].pushbacks, 1);
  assert.equal(process.state().ratePerSecond, 1000);
  assert.equal(crawl.state().ratePerSecond, 10);
  assert.deepEqual(process.state(["http://b.example/db"]).hosts, []);
});

Deno.test("a rate must be a positive number", () => {
  for (const bad of [0, -1, NaN, Infinity]) {
    let threw = false;
    try {
      new Pacer({ ratePerSecond: bad });
    } catch (err) {
      threw = err instanceof RangeError;
    }
    assert(threw, `rate ${bad} accepted`);
  }
});

Deno.test("through HTTP: a host limited to 50 a second, asked 200 times with no rate", async () => {
  const data = new RegistryData(Array.from({ length: 10 }, (_, i) => `k${i}`));
  const reg = await startRegistry(data, { rateLimit: 50 });
  try {
    const pacer = new Pacer();
    const http = new HttpClient({ pacer });
    const url = `${reg.url}/k1`;
    let served = 0;
    await Promise.all(Array.from({ length: 16 }, async () => {
      for (let i = 0; i < 12; i++) {
        await http.request({ url, maxBytes: 1 << 20 }, (a) => void (a.status === 200 && served++));
      }
    }));
    assert.equal(served, 192);
    const [h] = pacer.hosts();
    // Every 429 was retried and learned from: the host's rate is now below its limit.
    assert.equal(h.pushbacks, reg.stats.limited);
    assert(h.limitPerSecond !== null && h.limitPerSecond < 50, `${h.limitPerSecond}`);
    assert(h.pushbacks < 100, `${h.pushbacks} of ${h.requests} pushed back`);
  } finally {
    await reg.close();
  }
});
