/**
 * What keeping a PostgreSQL table equal to a crawl costs, side by side in rounds: the crawl with a
 * live `--sink postgres://…` (the table is full when the command ends) beside what a user would do
 * today (the crawl without a sink, then `deno task export | psql \copy` of every line into a jsonb
 * table), and beside the crawl without a sink alone. Names and small documents from the registry
 * simulator, a PostgreSQL cluster of its own on 127.0.0.1 (`lib/sim/postgres_server.ts`).
 *
 * @module
 */
import { startPostgres } from "../sim/postgres_server.ts";
import { median, n, pairedRatio, registry, rounds, s, table, timeTask, x } from "./harness.ts";

/** Times `sh -c script` with `env`, in milliseconds. @throws Error with its stderr on failure */
async function timeShell(script: string, env: Record<string, string>): Promise<number> {
  const t = performance.now();
  const out = await new Deno.Command("sh", {
    args: ["-c", script],
    env: { NO_COLOR: "1", ...env },
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`${script}: ${new TextDecoder().decode(out.stderr).trim()}`);
  return performance.now() - t;
}

/** Prints the table and both ratios (see the module comment). */
export async function benchSinks(o: { size: number; runs: number; log: (s: string) => void }) {
  const dir = await Deno.makeTempDir();
  // 20 ms away, as a registry is: the crawl waits on the network, which a live sink uses.
  const reg = await registry(["--synthetic", String(o.size), "--latency-ms", "20"]);
  const pg = await startPostgres();
  try {
    let round = 0;
    const kv = (side: string) => `${dir}/${side}-${round}.kv`;
    const count = async (t: string) => Number((await pg.psql(`SELECT count(*) FROM ${t}`)).trim());
    const crawl = (side: string, extra: string[]) =>
      timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kv(side), "--docs", ...extra]);
    const memory: Record<string, number[]> = { plain: [], sink: [] };
    const t = await rounds(o.runs, {
      // The crawl alone, then the user's load of its export: the first way a table is had today.
      plain: async () => {
        const run = await crawl("plain", []);
        memory.plain.push(run.peakMiB);
        return run.ms;
      },
      load: async () => {
        const table = `loaded_${round}`;
        await pg.psql(`CREATE TABLE ${table} (line jsonb)`);
        // CSV with quote and delimiter bytes no JSON line holds: each line read as it is.
        const ms = await timeShell(
          `"${Deno.execPath()}" run -A tasks/export.ts --kv "${kv("plain")}" | ` +
            `psql -X -q -h "${pg.socketDir}" -p ${pg.port} -U rankcrawl -d rankcrawl -c ` +
            `"\\copy ${table} (line) FROM STDIN WITH (FORMAT csv, QUOTE e'\\x01', ` +
            `DELIMITER e'\\x02')"`,
          { PGPASSWORD: pg.password },
        );
        if (await count(table) !== o.size) throw new Error(`${table} is not whole`);
        return ms;
      },
      sink: async () => {
        const table = `sunk_${round}`;
        const run = await crawl("sink", ["--sink", `${pg.url}#${table}`, "--sink-required"]);
        memory.sink.push(run.peakMiB);
        if (await count(table) !== o.size) throw new Error(`${table} is not whole`);
        round++;
        return run.ms;
      },
    });
    const today = t.plain.map((v, i) => v + t.load[i]);
    o.log(
      `\n### A PostgreSQL table of ${n(o.size)} names and small documents: the live sink beside ` +
        `crawl + export | psql \\copy (median of ${o.runs})\n`,
    );
    o.log(table(["way", "s", "peak MiB of the crawl"], [
      ["crawl, then `export \\| psql \\copy` (today)", s(median(today)), median(memory.plain)],
      ["  of which the crawl", s(median(t.plain)), ""],
      ["  of which export \\| psql \\copy", s(median(t.load)), ""],
      [
        "crawl with `--sink postgres://…` (table whole at exit)",
        s(median(t.sink)),
        median(memory.sink),
      ],
    ]));
    o.log(
      `\nlive sink / (crawl + export | psql \\copy): ${x(pairedRatio(t.sink, today))}x ` +
        `(goal <= 1.0)\ncrawl with the sink / crawl without: ${x(pairedRatio(t.sink, t.plain))}x ` +
        "(goal <= 1.2)",
    );
  } finally {
    await reg.close();
    await pg.close();
    await Deno.remove(dir, { recursive: true });
  }
}
