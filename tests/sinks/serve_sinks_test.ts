/**
 * `SINKS` for `deno task serve`: a crawl created over HTTP with `"sinks": ["pg"]` is kept in its own
 * PostgreSQL table (named after the crawl), its lag is in `GET /crawls/:id` and `/metrics`; a crawl
 * naming a sink `SINKS` does not have is a 400 with a JSON reason; and a `SINKS` entry that refuses
 * at start (a wrong password) stops the server with one line that shows no password.
 */
import assert from "node:assert/strict";
import postgres from "postgres";
import { havePostgres } from "../optional_tools.ts";
import { startPostgres } from "../../lib/sim/postgres_server.ts";
import { runTask, spawnRegistry, spawnServer, waitHealthy } from "../helpers.ts";

Deno.test({
  name:
    "serve: SINKS names a PostgreSQL sink, a crawl created with it is kept in its own table; an unknown name is a 400; a refusing sink stops the start in one line",
  ignore: !havePostgres,
  async fn() {
    const reg = await spawnRegistry(["--synthetic", "20000"]);
    const pg = await startPostgres();
    const dir = await Deno.makeTempDir();
    const token = "sinks-secret-token-123";
    const env = { CRAWL_TOKEN: token, KV_PATH: `${dir}/serve.kv`, ALLOWED_SOURCES: reg.url };
    const server = spawnServer({ ...env, SINKS: `pg=${pg.url} lite=sqlite:${dir}/m.db` });
    const req = (method: string, path: string, body?: unknown) =>
      fetch(`${server.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}` },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const sql = postgres(pg.url, { max: 1, onnotice: () => {} });
    try {
      await waitHealthy(`${server.base}/healthz`);
      const unknown = await req("POST", "/crawls", { source: reg.url, shards: 4, sinks: ["nope"] });
      assert.equal(unknown.status, 400);
      assert.deepEqual(await unknown.json(), {
        error: 'sinks: no sink is named "nope" (SINKS names pg, lite)',
      });
      const created = await req("POST", "/crawls", {
        source: reg.url,
        shards: 4,
        sinks: ["pg"],
        id: "npm-2",
      });
      assert.equal(created.status, 202, await created.clone().text());
      let status: { status: string; sinks: { sink: string; behindNotes: number }[] } | undefined;
      for (let i = 0; i < 1200; i++) {
        status = await (await req("GET", "/crawls/npm-2")).json();
        if (
          status!.status === "done" && status!.sinks.length === 1 &&
          status!.sinks[0].behindNotes === 0
        ) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(status!.status, "done");
      assert.match(status!.sinks[0].sink, /^postgres:[0-9a-f]{8}:\*$/);
      assert.equal(status!.sinks[0].behindNotes, 0);
      const [{ n }] = await sql<{ n: string }[]>`SELECT count(*) AS n FROM npm_2`;
      assert.equal(Number(n), 20_000);
      const [state] = await sql`SELECT crawl_id, checked FROM rankcrawl_state`;
      assert.deepEqual({ ...state }, { crawl_id: "npm-2", checked: "exact" });
      const metrics = await (await req("GET", "/metrics")).text();
      assert.match(
        metrics,
        /rankcrawl_sink_behind_notes\{crawl="npm-2",sink="postgres:[0-9a-f]{8}:\*"\} 0/,
      );
    } finally {
      const logs = await server.stop();
      assert.ok(!logs.includes(pg.password), "the sink's password never appears in logs");
      await sql.end({ timeout: 1 });
    }
    try {
      // A wrong password: the server does not start, and says why in one line.
      const wrong = pg.url.replace(pg.password, "not-the-password");
      const refused = await runTask("serve", [], {
        env: { ...env, PORT: "0", SINKS: `pg=${wrong}` },
      });
      assert.equal(refused.code, 1);
      const line = refused.stderr.trim();
      assert.match(line, /^error: SINKS pg: password authentication failed for user "rankcrawl"$/);
      assert.ok(!line.includes("not-the-password"));
    } finally {
      await pg.close();
      await reg.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
