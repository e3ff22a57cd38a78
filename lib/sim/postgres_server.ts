/**
 * A PostgreSQL server of a test's or the bench's own (Debian's programs): a cluster made with
 * `initdb` in a temporary folder, password authentication (SCRAM), listening on a free port of
 * 127.0.0.1 only, started and stopped with `pg_ctl`. As root (CI), the cluster belongs to the
 * `postgres` account (PostgreSQL refuses to run as root).
 *
 * @module
 */

/**
 * Where PostgreSQL's server programs are looked for (`POSTGRES_BIN`, else the newest
 * `/usr/lib/postgresql/N/bin`, where Debian's `postgresql` package puts them).
 */
export const POSTGRES_BIN = Deno.env.get("POSTGRES_BIN") ?? newestPostgresBin();

function newestPostgresBin(): string {
  try {
    const versions = [...Deno.readDirSync("/usr/lib/postgresql")].map((e) => Number(e.name))
      .filter((n) => Number.isFinite(n)).sort((a, b) => b - a);
    if (versions.length > 0) return `/usr/lib/postgresql/${versions[0]}/bin`;
  } catch { /* none */ }
  return "/usr/lib/postgresql/bin";
}

/** A free port of 127.0.0.1. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** A running test server. */
export interface TestPostgres {
  /** `postgres://rankcrawl:PASSWORD@127.0.0.1:PORT/rankcrawl`. */
  url: string;
  /** Its password (to make wrong ones). */
  password: string;
  port: number;
  /** The folder of its Unix socket (what `psql -h` takes). */
  socketDir: string;
  /** Runs SQL through `psql` as the owner (for set-up and for reading back). */
  psql(sql: string, o?: { db?: string }): Promise<string>;
  /** Stops the server (fast: open connections are cut), leaving its data. */
  stop(): Promise<void>;
  /** Starts it again on the same port. */
  start(): Promise<void>;
  /** Stops it and removes its data. */
  close(): Promise<void>;
}

/** PostgreSQL refuses to run as root: then its programs run as `postgres`. */
const asRoot = () => Deno.uid() === 0;

async function run(
  cmd: string,
  args: string[],
  what: string,
  env: Record<string, string> = {},
): Promise<string> {
  const full = asRoot() ? ["runuser", ["-u", "postgres", "--", cmd, ...args]] as const : [
    cmd,
    args,
  ] as const;
  const out = await new Deno.Command(full[0], {
    args: [...full[1]],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) {
    throw new Error(`${what} failed: ${new TextDecoder().decode(out.stderr).trim() || text}`);
  }
  return text;
}

/** Starts a fresh server with a database `rankcrawl` owned by the user `rankcrawl`. */
export async function startPostgres(): Promise<TestPostgres> {
  const dir = await Deno.makeTempDir({ prefix: "rankcrawl-pg-" });
  await Deno.chmod(dir, 0o755);
  const data = `${dir}/data`;
  const password = `pw${crypto.randomUUID().slice(0, 8)}`;
  await Deno.writeTextFile(`${dir}/pw`, password);
  if (asRoot()) {
    const id = (flag: string) =>
      new Deno.Command("id", { args: [flag, "postgres"], stdout: "piped" }).outputSync();
    const uid = Number(new TextDecoder().decode(id("-u").stdout));
    const gid = Number(new TextDecoder().decode(id("-g").stdout));
    await Deno.chown(dir, uid, gid);
    await Deno.chown(`${dir}/pw`, uid, gid);
  }
  await run(`${POSTGRES_BIN}/initdb`, [
    "-D",
    data,
    "-U",
    "rankcrawl",
    "--auth=scram-sha-256",
    `--pwfile=${dir}/pw`,
    "-E",
    "UTF8",
    "--no-locale",
  ], "initdb");
  const port = freePort();
  const start = async () => {
    await run(`${POSTGRES_BIN}/pg_ctl`, [
      "-D",
      data,
      "-l",
      `${dir}/log`,
      "-w",
      "-t",
      "60",
      "-o",
      `-p ${port} -h 127.0.0.1 -k ${dir} -c fsync=off -c shared_buffers=16MB -c max_connections=20`,
      "start",
    ], "pg_ctl start");
  };
  const stop = async () => {
    await run(`${POSTGRES_BIN}/pg_ctl`, ["-D", data, "-w", "-m", "fast", "stop"], "pg_ctl stop");
  };
  await start();
  const psql = (sql: string, o: { db?: string } = {}) =>
    run(
      "psql",
      [
        "-X",
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        dir,
        "-p",
        String(port),
        "-U",
        "rankcrawl",
        "-d",
        o.db ?? "rankcrawl",
        "-c",
        sql,
      ],
      "psql",
      { PGPASSWORD: password },
    );
  await psql("CREATE DATABASE rankcrawl", { db: "postgres" });
  return {
    url: `postgres://rankcrawl:${password}@127.0.0.1:${port}/rankcrawl`,
    password,
    port,
    socketDir: dir,
    psql,
    stop,
    start,
    close: async () => {
      await stop().catch(() => {});
      await Deno.remove(dir, { recursive: true });
    },
  };
}
