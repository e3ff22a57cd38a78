/** `deno task serve` (main.ts) as a subprocess, driven over HTTP to a finished crawl. */
import assert from "node:assert/strict";
import { cpuMs, freePort, spawnRegistry, spawnServer, taskArgs, waitHealthy } from "../helpers.ts";

Deno.test("serve: refuses to start without CRAWL_TOKEN unless --insecure-local", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: taskArgs("serve"),
    env: { NO_COLOR: "1", PORT: String(freePort()), CRAWL_TOKEN: "" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 1);
  const err = new TextDecoder().decode(out.stderr).trim();
  assert.match(err, /^error: CRAWL_TOKEN is not set; refusing to start/);
  assert.equal(err.split("\n").length, 1, "one line");
});

Deno.test("serve: auth, validation, allowlist, and a crawl driven to done over HTTP", async () => {
  const reg = await spawnRegistry(["--synthetic", "25000", "--no-skip", "--max-limit", "1000"]);
  const dir = await Deno.makeTempDir();
  const token = "e2e-secret-token-123";
  const server = spawnServer({
    CRAWL_TOKEN: token,
    KV_PATH: `${dir}/serve.kv`,
    ALLOWED_SOURCES: reg.url,
  });
  const base = server.base;
  const req = (method: string, path: string, body?: unknown, auth: string | null = token) =>
    fetch(`${base}${path}`, {
      method,
      headers: auth ? { authorization: `Bearer ${auth}` } : {},
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  try {
    await waitHealthy(`${base}/healthz`);
    const none = await req("POST", "/crawls", { source: reg.url, shards: 4 }, null);
    assert.equal(none.status, 401);
    await none.body?.cancel();
    const wrong = await req("GET", "/crawls", undefined, "wrong");
    assert.equal(wrong.status, 401);
    await wrong.body?.cancel();
    const zero = await req("POST", "/crawls", { source: reg.url, shards: 0 });
    assert.equal(zero.status, 400);
    assert.match((await zero.json()).error, /shards/);
    const malformed = await fetch(`${base}/crawls`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: "{oops",
    });
    assert.equal(malformed.status, 400);
    await malformed.body?.cancel();
    const outside = await req("POST", "/crawls", { source: "http://127.0.0.1:1/other", shards: 4 });
    assert.equal(outside.status, 403);
    await outside.body?.cancel();
    const created = await req("POST", "/crawls", { source: reg.url, shards: 6 });
    assert.equal(created.status, 202);
    const { id } = await created.json();
    let status: { status: string; itemsStored: number; total: number } | undefined;
    // A generous bound: the crawl takes about a second, but these machines are shared.
    for (let i = 0; i < 900; i++) {
      const res = await req("GET", `/crawls/${id}`);
      status = await res.json();
      if (status!.status === "done" || status!.status === "failed") break;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(status!.status, "done", JSON.stringify(status).slice(0, 3000));
    assert.equal(status!.total, 25000);
    assert.equal(status!.itemsStored, 25000);
  } finally {
    const logs = await server.stop();
    assert.ok(!logs.includes(token), "the token never appears in logs");
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("serve: --insecure-local serves without a token, on 127.0.0.1 only", async () => {
  const dir = await Deno.makeTempDir();
  const server = spawnServer({ CRAWL_TOKEN: "", KV_PATH: `${dir}/i.kv` }, ["--insecure-local"]);
  try {
    await waitHealthy(`${server.base}/healthz`);
    const res = await fetch(`${server.base}/crawls`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { crawls: [] });
  } finally {
    const logs = await server.stop();
    assert.match(logs, /listening on http:\/\/127\.0\.0\.1:\d+ \(dispatch queue, no token\)/);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("serve: redirects that leave ALLOWED_SOURCES are refused; the target never sees a request", async () => {
  let canaryHits = 0;
  const canary = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    canaryHits++;
    return Response.json({ _id: "stolen", secret: "canary-secret-7f3a" });
  });
  const canaryUrl = `http://127.0.0.1:${(canary.addr as Deno.NetAddr).port}/steal`;
  const reg = await spawnRegistry([
    "--synthetic",
    "3000",
    "--no-include-docs",
    "--no-bulk-get",
    "--bad-doc-rate",
    "0.05",
    "--bad-docs",
    "redirect",
    "--redirect-to",
    canaryUrl,
  ]);
  const dir = await Deno.makeTempDir();
  const token = "ssrf-token-0123456789";
  const server = spawnServer({
    CRAWL_TOKEN: token,
    KV_PATH: `${dir}/s.kv`,
    ALLOWED_SOURCES: reg.url,
  });
  const auth = { authorization: `Bearer ${token}` };
  try {
    await waitHealthy(`${server.base}/healthz`);
    const created = await fetch(`${server.base}/crawls`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ source: reg.url, shards: 3, docs: true }),
    });
    const { id } = await created.json();
    let status: { status: string; docErrors: number; itemsStored: number } | undefined;
    for (let i = 0; i < 300 && status?.status !== "done" && status?.status !== "failed"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      status = await (await fetch(`${server.base}/crawls/${id}`, { headers: auth })).json();
    }
    assert.equal(status!.status, "done");
    assert.equal(status!.itemsStored, 3000);
    assert.ok(status!.docErrors > 50, `${status!.docErrors} redirecting documents`);
    assert.equal(canaryHits, 0, "no request left the allowlist");
    const page = await (await fetch(`${server.base}/crawls/${id}/items?limit=1000`, {
      headers: auth,
    })).json();
    const refused = page.items.filter((it: { error?: { reason: string } }) => it.error);
    assert.ok(refused.length > 0);
    for (const it of refused) {
      assert.match(it.error.reason, /refused redirect .* to http:\/\/127\.0\.0\.1:\d+\/steal/);
    }
    assert.ok(!JSON.stringify(page).includes("canary-secret-7f3a"), "nothing of the target stored");
  } finally {
    await server.stop();
    await reg.close();
    await canary.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("serve: a crawl that cannot be planned fails visibly, resume plans it again, the server idles", async () => {
  const reg = await spawnRegistry(["--synthetic", "2000"]);
  const root = new URL(reg.url).origin;
  const dir = await Deno.makeTempDir();
  const token = "plan-fail-token-0123456789";
  const server = spawnServer({ CRAWL_TOKEN: token, KV_PATH: `${dir}/p.kv`, ALLOWED_SOURCES: root });
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: await res.json() };
  };
  const waitFor = async (id: string, done: (s: { status: string }) => boolean) => {
    for (let i = 0; i < 200; i++) {
      const { json } = await call("GET", `/crawls/${id}`);
      if (done(json)) return json;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`crawl ${id} never got there`);
  };
  try {
    await waitHealthy(`${server.base}/healthz`);
    const created = await call("POST", "/crawls", { source: `${root}/no-such-db`, shards: 4 });
    assert.equal(created.status, 202);
    const id = created.json.id;
    const failed = await waitFor(id, (s) => s.status !== "planning");
    assert.equal(failed.status, "failed");
    assert.match(failed.error, /not a CouchDB database \(404 at _all_docs\)/);
    const listed = (await call("GET", "/crawls")).json.crawls.find((c: { id: string }) =>
      c.id === id
    );
    assert.equal(listed.status, "failed");
    assert.match(listed.error, /404/);
    // Idle: nothing is retried in a loop once the crawl failed.
    const before = cpuMs(server.pid);
    await new Promise((r) => setTimeout(r, 2000));
    const idle = cpuMs(server.pid) - before;
    assert.ok(idle < 400, `server used ${idle} ms of CPU in 2 s while idle`);
    // Resume: planned again (and fails again, the database is still missing).
    const resumed = await call("POST", `/crawls/${id}/resume`);
    assert.equal(resumed.status, 200);
    assert.equal(resumed.json.status, "planning");
    const again = await waitFor(id, (s) => s.status !== "planning");
    assert.equal(again.status, "failed");
  } finally {
    const logs = await server.stop();
    assert.ok(!logs.includes(token));
    assert.match(logs, /crawl [a-z0-9-]+ failed: .*404/);
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
