/**
 * The per-host breaker (`host_breaker.ts`): on a fake clock, when a host is paused and when not,
 * one try every few seconds, any answer ending the pause; through HTTP, a host that accepts
 * connections and never answers is paused and its requests then fail at once, while another host
 * of the same process is asked as before.
 */
import assert from "node:assert/strict";
import {
  HostBreaker,
  HostPausedError,
  outageLine,
  pauseLine,
} from "../../lib/sources/http/host_breaker.ts";
import { HttpClient } from "../../lib/sources/http/http.ts";
import { Pacer } from "../../lib/sources/http/host_pacer.ts";
import { FakeClock } from "../fake_clock.ts";

const A = new URL("http://a.example/db/x");
const B = new URL("http://b.example/db/x");
const failed = { failed: "timed out after 20 s" };

Deno.test("breaker: a host whose every attempt failed for a minute (5 at least) is paused, and no other", () => {
  const clock = new FakeClock();
  const told: string[] = [];
  const breaker = new HostBreaker({ clock, onPause: (p) => told.push(pauseLine(p)) });
  for (let s = 0; s < 60; s += 15) {
    breaker.report(A, failed);
    clock.advance(15_000);
  }
  breaker.admit(A); // 4 failures over 45 s, the 60th second not yet reported: not paused
  breaker.report(A, { failed: "connection refused" });
  assert.deepEqual(breaker.paused().map((p) => p.host), ["a.example"]);
  assert.throws(() => breaker.admit(A), HostPausedError);
  breaker.admit(B); // another host is asked as before
  assert.deepEqual(told, [
    "a.example answered nothing for 60 s (timed out after 20 s ×4, connection refused ×1): " +
    "paused, one request every 5 s tries it; work on other hosts goes on",
  ]);
  // Many failures within less than the window pause nothing: a minute of them is needed.
  for (let i = 0; i < 100; i++) breaker.report(B, failed);
  clock.advance(59_000);
  breaker.report(B, failed);
  breaker.admit(B);
});

Deno.test("breaker: paused, one request every 5 s tries the host; a failed try keeps it paused, told once; an answer ends the pause", () => {
  const clock = new FakeClock();
  let told = 0;
  const breaker = new HostBreaker({ clock, onPause: () => told++ });
  for (let i = 0; i < 4; i++) (breaker.report(A, failed), clock.advance(15_000));
  breaker.report(A, failed); // the fifth, a minute after the first: paused now
  assert.throws(() => breaker.admit(A), /a\.example answers nothing \(timed out after 20 s ×5/);
  clock.advance(4_999);
  assert.throws(() => breaker.admit(A), (e: HostPausedError) => e.retryAfterMs === 1);
  clock.advance(1);
  breaker.admit(A); // the try
  assert.throws(() => breaker.admit(A), HostPausedError, "one try every 5 s");
  breaker.report(A, failed);
  assert.equal(told, 1, "a failed try is not a new pause");
  assert.ok(breaker.pausedError(A) instanceof HostPausedError, "a failed request ends paused");
  clock.advance(5_000);
  breaker.admit(A);
  breaker.report(A, { answered: true });
  assert.deepEqual(breaker.paused(), []);
  assert.equal(breaker.pausedError(A), null);
  breaker.admit(A);
  breaker.admit(A);
});

Deno.test("breaker: an answer within the minute starts it again; a try that never reports does not hold the host", () => {
  const clock = new FakeClock();
  const breaker = new HostBreaker({ clock });
  for (let i = 0; i < 50; i++) (breaker.report(A, failed), clock.advance(1_000));
  breaker.report(A, { answered: true }); // at 50 s: the host answered once
  for (let i = 0; i < 50; i++) (breaker.report(A, failed), clock.advance(1_000));
  breaker.admit(A); // 50 s of failures since that answer: not a minute
  for (let i = 0; i < 10; i++) (breaker.report(A, failed), clock.advance(1_000));
  breaker.report(A, failed); // a minute after the first failure since the answer
  assert.throws(() => breaker.admit(A), HostPausedError);
  clock.advance(5_000);
  breaker.admit(A); // a try, which is lost (its request never reports)
  clock.advance(4_999);
  assert.throws(() => breaker.admit(A), HostPausedError);
  clock.advance(1);
  breaker.admit(A); // the next try goes all the same
});

Deno.test("breaker: through HTTP, a host that never answers is paused after its window and then fails at once; another host is asked as before", async () => {
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const held: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const c of silent) held.push(c);
  })();
  const alive = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => Response.json({ ok: true }),
  );
  const silentUrl = `http://127.0.0.1:${(silent.addr as Deno.NetAddr).port}/db/doc`;
  const aliveUrl = `http://127.0.0.1:${alive.addr.port}/db/doc`;
  const pauses: string[] = [];
  const pacer = new Pacer({
    breaker: { windowMs: 400, minFailures: 3, onPause: (p) => pauses.push(p.host) },
  });
  const http = new HttpClient({ pacer, timeoutMs: 150, maxAttempts: 3, backoffBaseMs: 10 });
  const get = (url: string) =>
    http.request({ url, maxBytes: 1 << 20 }, (a) => JSON.parse(new TextDecoder().decode(a.body)));
  try {
    // Each request waits out its 3 timeouts until the host has failed for the window.
    let waited = 0;
    for (; pauses.length === 0 && waited < 20; waited++) {
      await assert.rejects(get(silentUrl), /timed out after 0\.2 s/);
    }
    assert.equal(pauses.length, 1);
    assert.ok(waited >= 1);
    // A paused host is not asked: no connection reaches it (the next try is 5 s away).
    await new Promise((r) => setTimeout(r, 50));
    const connections = held.length;
    await assert.rejects(get(silentUrl), HostPausedError);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(held.length, connections, "nothing was sent to the paused host");
    assert.deepEqual(await get(aliveUrl), { ok: true });
    const [state] = pacer.state([silentUrl]).hosts;
    assert.ok(state.pausedAt !== null);
    assert.match(state.pauseReason!, /^timed out after 0\.2 s ×\d+$/);
    assert.equal(pacer.state([aliveUrl]).hosts[0].pausedAt, null);
  } finally {
    silent.close();
    await accepting.catch(() => {});
    for (const c of held) c.close();
    await alive.shutdown();
  }
});

Deno.test("breaker: an outage is said when every attempt failed for 2 s (3 at least), every 30 s while it lasts, and when the host answers; a blip is not", () => {
  const clock = new FakeClock(Date.UTC(2026, 11, 6, 12, 0, 0));
  const told: string[] = [];
  const breaker = new HostBreaker({ clock, onOutage: (o) => told.push(outageLine(o)) });
  const refused = { failed: "connection refused" };
  // A blip: two failures, then an answer.
  breaker.report(A, refused);
  clock.advance(5_000);
  breaker.report(A, refused);
  assert.ok(breaker.failing("a.example", 2));
  breaker.report(A, { answered: true });
  assert.ok(!breaker.failing("a.example"));
  assert.deepEqual(told, [], "two failures are not an outage");
  // Down: 3 failures over 2 s.
  for (let i = 0; i < 3; i++) {
    breaker.report(A, refused);
    clock.advance(1_000);
  }
  assert.deepEqual(told, [
    "a.example has failed every request since 12:00:05 UTC (connection refused ×3): they are " +
    "retried, and the crawl goes on when it answers",
  ]);
  assert.deepEqual(breaker.failingHosts(2), ["a.example"]);
  for (let s = 0; s < 35; s++) {
    breaker.report(A, refused);
    clock.advance(1_000);
  }
  breaker.report(A, { answered: true });
  assert.deepEqual(told.slice(1), [
    "a.example still fails every request after 32 s (33 attempts: connection refused ×33)",
    "a.example answers again after 38 s of failures (38 attempts failed)",
  ]);
  assert.deepEqual(breaker.failingHosts(), []);
});
