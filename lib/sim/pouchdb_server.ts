/**
 * pouchdb-server from npm (a CouchDB-compatible server, and PouchDB's replicator, that no one here
 * wrote), started in memory on a free port of 127.0.0.1 for a test or the bench. `bash .ci/run`
 * installs it under `.ci/.peer`.
 *
 * @module
 */

/** Where pouchdb-server is looked for (`POUCHDB_SERVER`, else where .ci/run installs it). */
export const POUCHDB_SERVER = Deno.env.get("POUCHDB_SERVER") ??
  new URL("../../.ci/.peer/node_modules/.bin/pouchdb-server", import.meta.url).pathname;

/** A running pouchdb-server. */
export interface RunningPouchdb {
  /** Its base URL (`http://127.0.0.1:PORT`). */
  base: string;
  /** Its process id (for its memory). */
  pid: number;
  /** Ends it (SIGTERM) and waits. */
  stop(): Promise<void>;
}

/**
 * Starts pouchdb-server in memory on a free port of 127.0.0.1, working in `dir`, and waits until it
 * answers (at most 30 s). Its log goes to stderr with `POUCHDB_LOG` set.
 * @throws Error when it does not answer in time
 */
export async function startPouchdb(dir: string): Promise<RunningPouchdb> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const server = new Deno.Command(POUCHDB_SERVER, {
    args: ["--in-memory", "--port", String(port), "--host", "127.0.0.1"],
    cwd: dir,
    stdout: "null",
    stderr: Deno.env.get("POUCHDB_LOG") ? "inherit" : "null",
  }).spawn();
  const base = `http://127.0.0.1:${port}`;
  const stop = async () => {
    try {
      server.kill("SIGTERM");
    } catch { /* it ended already */ }
    await server.status;
  };
  for (const deadline = Date.now() + 30_000;;) {
    const up = await fetch(base).then((r) => (r.body?.cancel(), r.ok), () => false);
    if (up) return { base, pid: server.pid, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`pouchdb-server did not answer at ${base} within 30 s`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
