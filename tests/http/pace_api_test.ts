/**
 * The pace over the API: `rate` in `POST /crawls` (kept with the crawl, checked), `pace` in
 * `GET /crawls/:id` (the crawl's rate, the process's, its hosts' learned paces only), and the
 * pace series of `/metrics`; the process's `RATE` from the environment.
 */
import assert from "node:assert/strict";
import { createApp } from "../../lib/http/app.ts";
import { Metrics } from "../../lib/http/metrics.ts";
import { configFromEnv } from "../../lib/http/server_config.ts";
import { Pacer } from "../../lib/sources/http/host_pacer.ts";
import { findCrawl } from "../../lib/engine/mod.ts";
import { RecordingDispatcher } from "../engine_helpers.ts";

const TOKEN = "t0ps3cret-token";
const SRC = "http://127.0.0.1:5999/registry";

Deno.test("api: a crawl's rate is kept and checked; its status shows the pace of its hosts", async () => {
  const kv = await Deno.openKv(":memory:");
  let t = 1_000_000;
  const clock = {
    now: () => t,
    sleep: (ms: number) => (t += ms, Promise.resolve()),
    every: () => () => {},
  };
  const pacer = new Pacer({ ratePerSecond: 500, clock });
  const app = createApp({
    kv,
    token: TOKEN,
    allowedSources: [SRC],
    dispatcher: new RecordingDispatcher(),
    metrics: new Metrics({ pace: () => pacer.state() }),
    pace: (only) => pacer.state(only),
  });
  const call = (method: string, path: string, body?: unknown) =>
    app.request(path, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  try {
    for (const rate of [0, -5, 200_000, "fast"]) {
      const bad = await call("POST", "/crawls", { source: SRC, shards: 2, rate });
      assert.equal(bad.status, 400, `rate ${rate}`);
      assert.match((await bad.json()).error, /^rate/);
    }
    const created = await call("POST", "/crawls", { source: SRC, shards: 2, rate: 40 });
    assert.equal(created.status, 202);
    const { id } = await created.json();
    assert.equal((await findCrawl(kv, id))?.rate, 40);
    // This process asked the crawl's host, and another host; a 429 slowed the crawl's.
    const mine = new URL(`${SRC}/_all_docs`);
    const other = new URL("http://127.0.0.1:6001/db/x");
    for (let i = 0; i < 60; i++) {
      await pacer.pace(mine);
      pacer.report(mine, { status: 200, ms: 5, route: "_all_docs" });
      await pacer.pace(other);
    }
    pacer.report(mine, { status: 429, ms: 5, route: "_all_docs", retryAfterMs: 2_000 });
    const status = await (await call("GET", `/crawls/${id}`)).json();
    assert.equal(status.pace.crawlRatePerSecond, 40);
    assert.equal(status.pace.ratePerSecond, 500);
    assert.deepEqual(status.pace.hosts.map((h: { host: string }) => h.host), ["127.0.0.1:5999"]);
    const [h] = status.pace.hosts;
    assert.equal(h.limitPerSecond, 42); // 70% of the 60 it served
    assert.equal(h.reason, "HTTP 429");
    assert.equal(h.pushbacks, 1);
    assert.equal(h.heldUntil, t + 2_000);
    const metrics = await (await call("GET", "/metrics")).text();
    assert.match(metrics, /^rankcrawl_rate_limit_per_second 500$/m);
    assert.match(metrics, /^rankcrawl_host_rate_per_second\{host="127.0.0.1:5999"\} 42$/m);
    assert.match(metrics, /^rankcrawl_host_rate_per_second\{host="127.0.0.1:6001"\} 0$/m);
    assert.match(metrics, /^rankcrawl_host_pushbacks_total\{host="127.0.0.1:5999"\} 1$/m);
    assert.match(metrics, /^rankcrawl_host_requests_total\{host="127.0.0.1:6001"\} 60$/m);
    t += 5_000;
    assert.match(
      await (await call("GET", "/metrics")).text(),
      /^rankcrawl_host_held_until_timestamp_seconds\{host="127.0.0.1:5999"\} 0$/m,
    );
    assert.match(metrics, /^rankcrawl_host_paused\{host="127.0.0.1:5999"\} 0$/m);
    // A minute of nothing but failures from the crawl's host pauses it; status and metrics say so.
    for (let i = 0; i <= 6; i++) {
      pacer.breaker.report(mine, { failed: "connection refused" });
      t += 10_000;
    }
    const paused = (await (await call("GET", `/crawls/${id}`)).json()).pace.hosts[0];
    assert.equal(paused.pausedAt, t - 10_000);
    assert.equal(paused.pauseReason, "connection refused ×7");
    assert.match(
      await (await call("GET", "/metrics")).text(),
      /^rankcrawl_host_paused\{host="127.0.0.1:5999"\} 1$/m,
    );
  } finally {
    kv.close();
  }
});

Deno.test("config: RATE is the process's cap; a bad one is one line", () => {
  const env = (vars: Record<string, string>) => (name: string) => vars[name];
  const base = { CRAWL_TOKEN: "x".repeat(32) };
  const o = { onDeploy: false };
  assert.equal(configFromEnv(env(base), [], o).ratePerSecond, null);
  assert.equal(configFromEnv(env({ ...base, RATE: "150" }), [], o).ratePerSecond, 150);
  assert.throws(
    () => configFromEnv(env({ ...base, RATE: "lots" }), [], o),
    /^UsageError: RATE must be a number of requests a second from 0.1 to 100000$/,
  );
});
