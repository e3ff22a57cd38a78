/**
 * The tools some tests need beyond Deno: Debian's chromium (the status page in a real browser),
 * pouchdb-server from npm (a CouchDB-compatible server no one here wrote), Debian's tmux (the
 * live display in a real terminal), Debian's PostgreSQL (the PostgreSQL sink, against a server of
 * its own started on 127.0.0.1: `lib/sim/postgres_server.ts`) and DuckDB's Node client from npm
 * (the Parquet export read back, {@linkcode duckdb}). `bash .ci/run` installs them; elsewhere,
 * tests that need a missing one are skipped, and `deno task test` ends with one line naming what
 * was skipped and why (run this module). In CI (`CI` set) a missing tool is an error, never a
 * skip.
 */

import { POSTGRES_BIN } from "../lib/sim/postgres_server.ts";
import { POUCHDB_SERVER, startPouchdb } from "../lib/sim/pouchdb_server.ts";

export { POSTGRES_BIN, POUCHDB_SERVER, startPouchdb };

/** Where chromium is looked for (`CHROMIUM_PATH`). */
export const CHROMIUM = Deno.env.get("CHROMIUM_PATH") ?? "/usr/bin/chromium";

function isFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}

/** Where tmux is looked for (`TMUX_PATH`). */
export const TMUX = Deno.env.get("TMUX_PATH") ?? "/usr/bin/tmux";

/** DuckDB's Node client (`DUCKDB_NODE_API`, else where .ci/run installs it), run by `node`. */
export const DUCKDB_NODE_API = Deno.env.get("DUCKDB_NODE_API") ??
  new URL("../.ci/.duckdb/node_modules/@duckdb/node-api/lib/index.js", import.meta.url).pathname;

/** True when chromium is there. @throws in CI when it is not */
export const haveChromium = need(CHROMIUM, "chromium");
/** True when pouchdb-server is there. @throws in CI when it is not */
export const havePouchdb = need(POUCHDB_SERVER, "pouchdb-server");
/** True when tmux is there. @throws in CI when it is not */
export const haveTmux = need(TMUX, "tmux");
/** True when PostgreSQL's `initdb` and `pg_ctl` are there. @throws in CI when they are not */
export const havePostgres = need(`${POSTGRES_BIN}/initdb`, "PostgreSQL") &&
  need(`${POSTGRES_BIN}/pg_ctl`, "PostgreSQL");

function need(path: string, what: string): boolean {
  const have = isFile(path);
  if (!have && Deno.env.get("CI")) throw new Error(`CI needs ${what} at ${path} (see .ci/run)`);
  return have;
}

/** True when DuckDB's Node client is there. @throws in CI when it is not */
export const haveDuckdb = need(DUCKDB_NODE_API, "DuckDB's Node client");

/**
 * Runs `sql` in DuckDB (in memory, through `node` and its Node client) and returns its rows as
 * JSON values (`getRowObjectsJson`: numbers past 2^53 and big counts come as strings).
 */
export async function duckdb(sql: string): Promise<Record<string, unknown>[]> {
  const script = `const { DuckDBInstance } = await import(${JSON.stringify(DUCKDB_NODE_API)});
const db = await DuckDBInstance.create(":memory:");
const c = await db.connect();
const r = await c.runAndReadAll(process.argv[1]);
process.stdout.write(JSON.stringify(r.getRowObjectsJson()));`;
  const out = await new Deno.Command("node", {
    args: ["--input-type=module", "-e", script, sql],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`duckdb: ${new TextDecoder().decode(out.stderr)}`);
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

/** One line: what was skipped for want of which tool, or that nothing was. */
export function skippedLine(): string {
  const skipped = [
    ...(haveChromium ? [] : [`the status page browser test (no chromium at ${CHROMIUM})`]),
    ...(havePouchdb ? [] : [`the two real-peer tests (no pouchdb-server at ${POUCHDB_SERVER})`]),
    ...(haveTmux ? [] : [`the live display in tmux (no tmux at ${TMUX})`]),
    ...(havePostgres ? [] : [`the PostgreSQL sink tests (no initdb in ${POSTGRES_BIN})`]),
    ...(haveDuckdb ? [] : [`the Parquet read-back (no DuckDB client at ${DUCKDB_NODE_API})`]),
  ];
  return skipped.length === 0
    ? "skipped: nothing (chromium, pouchdb-server, tmux, PostgreSQL and DuckDB found)"
    : `skipped: ${
      skipped.join("; ")
    }. bash .ci/run installs them (or set CHROMIUM_PATH, POUCHDB_SERVER, TMUX_PATH, POSTGRES_BIN, DUCKDB_NODE_API)`;
}

if (import.meta.main) console.log(skippedLine());
