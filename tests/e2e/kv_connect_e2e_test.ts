/**
 * Many processes over KV Connect, each run with the permissions its task gives it: `deno task
 * serve` (the API, lease mode, no workers of its own) and two `deno task worker --workers 4`
 * processes share one KV Connect store; one worker is killed mid-crawl and started again; then
 * `deno task export` reads the crawl back through the same URL.
 */
import assert from "node:assert/strict";
import { startKvConnectServer } from "../../lib/sim/kv_connect_server.ts";
import { bundledNames, syntheticNames } from "../../lib/sim/names.ts";
import { spawnRegistry, spawnServer, taskArgs, waitHealthy } from "../helpers.ts";

const KV_TOKEN = "kv-connect-token";
const API_TOKEN = "api-token-0123456789";

function worker(kvUrl: string) {
  return new Deno.Command(Deno.execPath(), {
    args: [...taskArgs("worker"), "--kv", kvUrl, "--workers", "4", "--exit-when-idle"],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", DENO_KV_ACCESS_TOKEN: KV_TOKEN },
  }).spawn();
}

Deno.test("kv connect: serve + two workers (one killed and restarted), then export, all by URL", async () => {
  const reg = await spawnRegistry([
    "--synthetic",
    "12000",
    "--latency-ms",
    "5",
    "--max-limit",
    "500",
  ]);
  const store = startKvConnectServer(KV_TOKEN);
  const server = spawnServer({
    CRAWL_TOKEN: API_TOKEN,
    ALLOWED_SOURCES: reg.url,
    KV_PATH: store.url,
    WORKERS: "0",
    DENO_KV_ACCESS_TOKEN: KV_TOKEN,
  });
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${server.base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
    });
  try {
    await waitHealthy(`${server.base}/healthz`);
    const created = await api("/crawls", {
      method: "POST",
      body: JSON.stringify({ source: reg.url, shards: 8, maxPage: 100 }),
    });
    assert.equal(created.status, 202, await created.clone().text());
    const { id } = await created.json();
    const status = async () => await (await api(`/crawls/${id}`)).json();

    const first = [worker(store.url), worker(store.url)];
    const logs = first.map((w) => new Response(w.stderr).text());
    while ((await status()).itemsStored < 2000) await new Promise((r) => setTimeout(r, 50));
    first[1].kill("SIGKILL");
    assert.notEqual((await first[1].status).code, 0, "killed mid-crawl");
    const again = worker(store.url);
    const codes = await Promise.all([first[0].status, again.status]);
    const text = await Promise.all([logs[0], new Response(again.stderr).text()]);
    assert.deepEqual(codes.map((c) => c.code), [0, 0], text.join("\n"));
    const done = await status();
    assert.equal(done.status, "done", JSON.stringify(done.error));
    assert.equal(done.itemsStored, 12000);

    const exported = await new Deno.Command(Deno.execPath(), {
      args: [...taskArgs("export"), "--kv", store.url],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1", DENO_KV_ACCESS_TOKEN: KV_TOKEN },
    }).output();
    const err = new TextDecoder().decode(exported.stderr);
    assert.equal(exported.code, 0, err);
    const ids = new TextDecoder().decode(exported.stdout).trim().split("\n")
      .map((l) => JSON.parse(l).id);
    const truth = syntheticNames(await bundledNames(), 12000, { seed: 42 });
    assert.equal(ids.length, 12000);
    assert.deepEqual(ids, [...truth].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    assert.match(err, new RegExp(`exported 12000 items of crawl ${id}`));

    // Without the token, and with a wrong one: one line, exit non-zero, the token never shown.
    for (const token of ["", "wrong-token"]) {
      const refused = await new Deno.Command(Deno.execPath(), {
        args: [...taskArgs("export"), "--kv", store.url],
        stdout: "null",
        stderr: "piped",
        env: { NO_COLOR: "1", DENO_KV_ACCESS_TOKEN: token },
      }).output();
      const line = new TextDecoder().decode(refused.stderr);
      assert.notEqual(refused.code, 0);
      assert.equal(line.trim().split("\n").length, 1, line);
      assert.match(line, /^error: /);
      assert.ok(!line.includes("wrong-token") && !line.includes(KV_TOKEN));
    }
  } finally {
    await server.stop();
    await store.close();
    await reg.close();
  }
});
