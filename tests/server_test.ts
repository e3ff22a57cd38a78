import assert from "node:assert/strict";
import { configFromEnv, startServer } from "../lib/http/server.ts";
import { listCrawls } from "../lib/engine/store.ts";

const env = (vars: Record<string, string>) => (k: string) => vars[k];

Deno.test("server config: token required, allowlist parsed, dispatch chosen, bad values refused", () => {
  assert.throws(() => configFromEnv(env({}), [], { onDeploy: false }), /CRAWL_TOKEN is not set/);
  const local = configFromEnv(env({}), ["--insecure-local"], { onDeploy: false });
  assert.equal(local.hostname, "127.0.0.1");
  assert.equal(local.token, null);
  assert.equal(local.dispatch, "queue");
  const deploy = configFromEnv(env({ CRAWL_TOKEN: "t" }), [], { onDeploy: true });
  assert.equal(deploy.dispatch, "lease");
  assert.equal(deploy.workers, 0);
  const remote = configFromEnv(env({ CRAWL_TOKEN: "t", KV_PATH: "https://kv.example:4512" }), [], {
    onDeploy: false,
  });
  assert.equal(remote.dispatch, "lease", "KV Connect has no queues");
  const c = configFromEnv(
    env({ CRAWL_TOKEN: "t", ALLOWED_SOURCES: "http://a/db, https://b/", PORT: "9" }),
    [],
    { onDeploy: false },
  );
  assert.deepEqual(c.allowedSources, ["http://a/db", "https://b/"]);
  assert.equal(c.port, 9);
  for (
    const [vars, re] of [
      [{ CRAWL_TOKEN: "t", PORT: "x" }, /PORT/],
      [{ CRAWL_TOKEN: "t", PORT: "70000" }, /PORT/],
      [{ CRAWL_TOKEN: "t", ALLOWED_SOURCES: "nope" }, /ALLOWED_SOURCES/],
      [{ CRAWL_TOKEN: "t", DISPATCH: "smoke" }, /DISPATCH/],
      [{ CRAWL_TOKEN: "t", CRAWL_SCHEDULE: "0 3 * * *" }, /CRAWL_SOURCE/],
      [{
        CRAWL_TOKEN: "t",
        CRAWL_SCHEDULE: "0 3 * * *",
        CRAWL_SOURCE: "http://a/db",
        CRAWL_SHARDS: "0",
      }, /CRAWL_SHARDS/],
    ] as [Record<string, string>, RegExp][]
  ) assert.throws(() => configFromEnv(env(vars), [], { onDeploy: false }), re);
  assert.throws(
    () => configFromEnv(env({ CRAWL_TOKEN: "t" }), ["--verbose"], { onDeploy: false }),
    /unknown argument/,
  );
});

Deno.test("server: the scheduled recrawl hook creates (once) the crawl of the configured source", async () => {
  const dir = await Deno.makeTempDir();
  const logs: string[] = [];
  const rt = await startServer({
    port: 0,
    hostname: "127.0.0.1",
    kvPath: `${dir}/s.kv`,
    token: "t",
    allowedSources: [],
    dispatch: "lease",
    workers: 0,
    schedule: { cron: "0 3 * * *", source: "http://127.0.0.1:9/none", shards: 4, docs: false },
  }, { log: (l) => logs.push(l), now: () => Date.UTC(2026, 10, 30, 3, 0, 12) });
  try {
    await rt.recrawl();
    await rt.recrawl(); // same minute: the same crawl, not a second one
    await rt.watchdogTick();
  } finally {
    await rt.close();
  }
  const kv = await Deno.openKv(`${dir}/s.kv`);
  try {
    const crawls = await listCrawls(kv);
    assert.equal(crawls.length, 1);
    assert.equal(crawls[0].id, "scheduled-202611300300");
    assert.equal(crawls[0].status, "planning", "lease workers plan it on their next tick");
    assert.equal(crawls[0].shards, 4);
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
  assert.ok(logs.some((l) => /scheduled crawl scheduled-\d+ \(planning\)/.test(l)));
});
