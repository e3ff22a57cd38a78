import assert from "node:assert/strict";
import { clockWithNow } from "../../lib/base/clock.ts";
import { taskArgs } from "../helpers.ts";
import { checkCron, configFromEnv, parseSinks, startServer } from "../../lib/http/server.ts";
import { getCrawl, listCrawls, updateCrawl } from "../../lib/engine/store/mod.ts";

const env = (vars: Record<string, string>) => (k: string) => vars[k];
const T = "t".repeat(16);

Deno.test("server config: token required, allowlist parsed, dispatch chosen, bad values refused", () => {
  assert.throws(() => configFromEnv(env({}), [], { onDeploy: false }), /CRAWL_TOKEN is not set/);
  const local = configFromEnv(env({}), ["--insecure-local"], { onDeploy: false });
  assert.equal(
    configFromEnv(env({ CRAWL_TOKEN: "t" }), ["--insecure-local"], { onDeploy: false }).token,
    "t",
    "a short token is fine on loopback",
  );
  assert.equal(local.hostname, "127.0.0.1");
  assert.equal(local.token, null);
  assert.equal(local.dispatch, "queue");
  const deploy = configFromEnv(env({ CRAWL_TOKEN: T }), [], { onDeploy: true });
  assert.equal(deploy.dispatch, "lease");
  assert.equal(deploy.workers, 0);
  const remote = configFromEnv(env({ CRAWL_TOKEN: T, KV_PATH: "https://kv.example:4512" }), [], {
    onDeploy: false,
  });
  assert.equal(remote.dispatch, "lease", "KV Connect has no queues");
  const c = configFromEnv(
    env({ CRAWL_TOKEN: T, ALLOWED_SOURCES: "http://a/db, https://b/", PORT: "9" }),
    [],
    { onDeploy: false },
  );
  assert.deepEqual(c.allowedSources, ["http://a/db", "https://b/"]);
  assert.equal(c.port, 9);
  assert.deepEqual(c.bounds, { maxActiveCrawls: 16, maxStoredCrawls: 1000, maxEventStreams: 200 });
  const b = configFromEnv(
    env({
      CRAWL_TOKEN: T,
      MAX_ACTIVE_CRAWLS: "2",
      MAX_STORED_CRAWLS: "3",
      MAX_EVENT_STREAMS: "4",
    }),
    [],
    { onDeploy: false },
  );
  assert.deepEqual(b.bounds, { maxActiveCrawls: 2, maxStoredCrawls: 3, maxEventStreams: 4 });
  // Followed crawls: looked at from the process locally, by the cron tick alone on Deploy.
  assert.deepEqual(c.follow, {
    pollMs: 500,
    idleMs: 10_000,
    verifyEveryMs: 600_000,
    verifyRowsEveryMs: 86_400_000,
  });
  assert.deepEqual(deploy.follow, {
    pollMs: 0,
    idleMs: 10_000,
    verifyEveryMs: 600_000,
    verifyRowsEveryMs: 86_400_000,
  });
  const f = configFromEnv(
    env({
      CRAWL_TOKEN: T,
      FOLLOW_POLL_MS: "200",
      FOLLOW_IDLE_MS: "100",
      VERIFY_EVERY_MS: "0",
      VERIFY_ROWS_EVERY_MS: "3600000",
    }),
    [],
    { onDeploy: false },
  );
  assert.deepEqual(f.follow, {
    pollMs: 200,
    idleMs: 200,
    verifyEveryMs: 0,
    verifyRowsEveryMs: 3_600_000,
  });
  for (
    const [vars, re] of [
      [{ CRAWL_TOKEN: T, PORT: "x" }, /PORT/],
      [{ CRAWL_TOKEN: T, PORT: "70000" }, /PORT/],
      [{ CRAWL_TOKEN: T, ALLOWED_SOURCES: "nope" }, /ALLOWED_SOURCES/],
      [{ CRAWL_TOKEN: T, DISPATCH: "smoke" }, /DISPATCH/],
      [{ CRAWL_TOKEN: "short" }, /CRAWL_TOKEN is shorter than 16 characters/],
      [{ CRAWL_TOKEN: T, METRICS_TOKEN: "m" }, /METRICS_TOKEN is shorter than 16 characters/],
      [{ CRAWL_TOKEN: T, WORKERS: "257" }, /WORKERS must be a whole number from 1 to 256/],
      [{ CRAWL_TOKEN: T, WORKERS: "0" }, /WORKERS must be .* with queue dispatch, got 0/],
      [{ CRAWL_TOKEN: T, DISPATCH: "lease", WORKERS: "300" }, /from 0 to 256/],
      [{ CRAWL_TOKEN: T, MAX_ACTIVE_CRAWLS: "0" }, /MAX_ACTIVE_CRAWLS/],
      [{ CRAWL_TOKEN: T, MAX_STORED_CRAWLS: "1e9" }, /MAX_STORED_CRAWLS/],
      [{ CRAWL_TOKEN: T, MAX_EVENT_STREAMS: "-1" }, /MAX_EVENT_STREAMS/],
      [{ CRAWL_TOKEN: T, FOLLOW_POLL_MS: "1s" }, /FOLLOW_POLL_MS must be a whole number of ms/],
      [{ CRAWL_TOKEN: T, VERIFY_EVERY_MS: "9e99" }, /VERIFY_EVERY_MS must be a whole number/],
      [{ CRAWL_TOKEN: T, CRAWL_SCHEDULE: "0 3 * * *" }, /CRAWL_SOURCE/],
      [{
        CRAWL_TOKEN: T,
        CRAWL_SCHEDULE: "0 3 * * *",
        CRAWL_SOURCE: "http://a/db",
        CRAWL_SHARDS: "0",
      }, /CRAWL_SHARDS/],
      [{ CRAWL_TOKEN: T, CRAWL_SCHEDULE: "0 3 * * *", CRAWL_SOURCE: "notaurl" }, /not a URL/],
      [{ CRAWL_TOKEN: T, CRAWL_SCHEDULE: "0 3 * * *", CRAWL_SOURCE: "http://a/db" }, /outside/],
      [{ CRAWL_TOKEN: T, CRAWL_SCHEDULE: "0 25 * * *", CRAWL_SOURCE: "http://a/db" }, /hour/],
      [{
        CRAWL_TOKEN: T,
        ALLOWED_SOURCES: "http://a/db",
        CRAWL_SCHEDULE: "0 3 * * *",
        CRAWL_SOURCE: "http://a/db",
        CRAWL_KEEP: "0",
      }, /CRAWL_KEEP/],
    ] as [Record<string, string>, RegExp][]
  ) assert.throws(() => configFromEnv(env(vars), [], { onDeploy: false }), re);
  assert.throws(
    () => configFromEnv(env({ CRAWL_TOKEN: T }), ["--verbose"], { onDeploy: false }),
    /unknown argument/,
  );
});

/** A server on a free port, lease mode without workers, with a daily scheduled recrawl. */
function scheduledServer(
  kvPath: string,
  schedule: { shards: number; keep: number },
  options: Parameters<typeof startServer>[1],
) {
  return startServer({
    port: 0,
    hostname: "127.0.0.1",
    kvPath,
    token: "t",
    allowedSources: [],
    dispatch: "lease",
    workers: 0,
    schedule: { cron: "0 3 * * *", source: "http://127.0.0.1:9/none", docs: false, ...schedule },
  }, options);
}

Deno.test("server: the scheduled recrawl hook creates (once) the crawl of the configured source", async () => {
  const dir = await Deno.makeTempDir();
  const logs: string[] = [];
  const rt = await scheduledServer(`${dir}/s.kv`, { shards: 4, keep: 7 }, {
    log: (l) => logs.push(l),
    clock: clockWithNow(() => Date.UTC(2026, 10, 30, 3, 0, 12)),
  });
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

Deno.test("server: cron expressions are checked field by field", () => {
  for (const ok of ["* * * * *", "0 3 * * *", "*/15 0-6 1,15 * 1-5", " 5 4 * * 7 "]) {
    assert.equal(checkCron(ok), ok.trim());
  }
  for (
    const [bad, re] of [
      ["* * * *", /5 fields/],
      ["60 * * * *", /minute/],
      ["* 24 * * *", /hour/],
      ["* * 0 * *", /day of month/],
      ["* * * 13 *", /month/],
      ["* * * * 8", /day of week/],
      ["*/0 * * * *", /minute/],
      ["@daily * * * *", /minute/],
    ] as [string, RegExp][]
  ) assert.throws(() => checkCron(bad), re, bad);
});

Deno.test("server: scheduled recrawls keep the newest K finished crawls and never a running one", async () => {
  const dir = await Deno.makeTempDir();
  let clock = Date.UTC(2026, 10, 1, 3, 0, 0);
  const logs: string[] = [];
  const rt = await scheduledServer(`${dir}/s.kv`, { shards: 2, keep: 2 }, {
    log: (l) => logs.push(l),
    clock: clockWithNow(() => clock),
  });
  const kv = await Deno.openKv(`${dir}/s.kv`);
  try {
    const day = 86_400_000;
    for (let d = 0; d < 5; d++, clock += day) {
      await rt.recrawl();
      // Every run but the second finishes before the next one; the second is still running.
      const id = `scheduled-202611${String(d + 1).padStart(2, "0")}0300`;
      const entry = await getCrawl(kv, id);
      assert.ok(entry.value, id);
      const status = d === 1 ? "running" : "done";
      const next = { ...entry.value, status } as const;
      assert.ok(await updateCrawl(kv, entry as Deno.KvEntry<typeof next>, next));
    }
    const ids = (await listCrawls(kv)).map((c) => c.id).sort();
    assert.deepEqual(ids, [
      "scheduled-202611020300",
      "scheduled-202611040300",
      "scheduled-202611050300",
    ], "the two newest, and the running one");
  } finally {
    kv.close();
    await rt.close();
    await Deno.remove(dir, { recursive: true });
  }
  assert.ok(logs.some((l) => /scheduled-202611010300 deleted \(keeping the last 2\)/.test(l)));
});

async function runMain(env: Record<string, string>, ms: number) {
  const child = new Deno.Command(Deno.execPath(), {
    args: taskArgs("serve"),
    env: { ...env, NO_COLOR: "1" },
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => child.kill(), ms);
  const out = await child.output();
  clearTimeout(timer);
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

Deno.test("main: --help explains the environment", async () => {
  const r = await runMain({}, 20_000);
  assert.equal(r.code, 1, "no token: refused");
  const child = await new Deno.Command(Deno.execPath(), {
    args: [...taskArgs("serve"), "--help"],
    env: { NO_COLOR: "1" },
    clearEnv: true,
    stdout: "piped",
  }).output();
  assert.equal(child.code, 0);
  const help = new TextDecoder().decode(child.stdout);
  for (const name of ["CRAWL_TOKEN", "ALLOWED_SOURCES", "CRAWL_KEEP", "METRICS_TOKEN"]) {
    assert.match(help, new RegExp(`^  ${name} .*\\S`, "m"));
  }
  assert.match(help, /default: 8000/);
});

Deno.test("main: a bad configuration is one error line and exit 1 locally", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const r = await runMain({ CRAWL_TOKEN: T, PORT: "x", KV_PATH: `${dir}/k.kv` }, 20_000);
    assert.equal(r.code, 1);
    assert.deepEqual(r.stderr.trim().split("\n"), ["error: PORT is not a port: x"]);
    const notKv = await runMain({ CRAWL_TOKEN: T, PORT: "0", KV_PATH: dir }, 20_000);
    assert.equal(notKv.code, 1);
    assert.match(notKv.stderr.trim(), /^error: cannot open KV at .*$/);
    assert.equal(notKv.stderr.trim().split("\n").length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("SINKS: NAME=REF entries, each name once, no #table; a bad entry is one line without its password", () => {
  assert.deepEqual(parseSinks(undefined), []);
  assert.deepEqual(parseSinks(" pg=postgres://u:secret@h/db\n lite=sqlite:/tmp/m.db "), [
    { name: "pg", ref: "postgres://u:secret@h/db" },
    { name: "lite", ref: "sqlite:/tmp/m.db" },
  ]);
  const refused = (raw: string, re: RegExp) => {
    assert.throws(() => parseSinks(raw), (err: Error) => {
      assert.match(err.message, re);
      assert.ok(!err.message.includes("secret"), err.message);
      return true;
    });
  };
  refused("postgres://u:secret@h/db", /each entry is NAME=REF/);
  refused("a=sqlite:/x a=sqlite:/y", /SINKS: a is named twice/);
  refused("pg=postgres://u:secret@h/db#t", /SINKS pg: names no #table/);
  refused("my=mysql://u:secret@h/db", /SINKS my: a sink is sqlite:PATH or postgres:/);
  refused("pg=postgres://u:secret@h", /SINKS pg: name the database/);
  assert.throws(
    () =>
      configFromEnv((k) => ({ CRAWL_TOKEN: "x".repeat(20), SINKS: "bad" })[k], [], {
        onDeploy: false,
      }),
    /SINKS: each entry is NAME=REF/,
  );
});

Deno.test("MIRROR_*: a read token of its own, or reads opened; contradictions refused in one line", () => {
  const cfg = (vars: Record<string, string>) =>
    configFromEnv(env({ CRAWL_TOKEN: T, ...vars }), [], { onDeploy: false });
  assert.equal(cfg({}).mirror, null);
  assert.deepEqual(cfg({ MIRROR_TOKEN: "r".repeat(16) }).mirror, {
    readToken: "r".repeat(16),
    npmCrawl: null,
  });
  assert.deepEqual(cfg({ MIRROR_PUBLIC: "1", MIRROR_NPM: "c1" }).mirror, {
    readToken: null,
    npmCrawl: "c1",
  });
  for (
    const [vars, re] of [
      [{ MIRROR_TOKEN: T }, /MIRROR_TOKEN must differ from CRAWL_TOKEN/],
      [{ MIRROR_TOKEN: "short" }, /MIRROR_TOKEN is shorter than 16/],
      [{ MIRROR_PUBLIC: "yes" }, /MIRROR_PUBLIC must be 1 or 0/],
      [{ MIRROR_PUBLIC: "1", MIRROR_TOKEN: "r".repeat(16) }, /pick one/],
      [{ MIRROR_NPM: "c1" }, /MIRROR_NPM needs MIRROR_TOKEN or MIRROR_PUBLIC=1/],
    ] as [Record<string, string>, RegExp][]
  ) assert.throws(() => cfg(vars), re);
});
