/**
 * `deno task export --kv PATH [--crawl-id ID] [--format ndjson|parquet|sqlite] [--out FILE]`: a
 * crawl's items as NDJSON on stdout (or in FILE), one object a line with `id`, `rev` and (when
 * fetched) `doc`; or as a Parquet file or an SQLite file (`lib/cli/export_table.ts`), which need
 * `--out`. Streamed with flat memory. With one crawl in the
 * KV store no id is needed. PATH is a KV file or a KV Connect URL (denokv, Deploy's KV), opened with
 * the token in `DENO_KV_ACCESS_TOKEN`; the task may read that variable and reach the network, and
 * nothing else of the environment.
 */
import { UsageError } from "../lib/base/errors.ts";
import { choiceFlag, helpText, parseFlags, runMain } from "../lib/cli/flags.ts";
import { exportNdjson } from "../lib/cli/export.ts";
import { exportParquet, exportSqlite } from "../lib/cli/export_table.ts";
import { readStoredKv } from "../lib/cli/kv_file.ts";
import { chooseCrawl } from "../lib/cli/crawl_list.ts";
import { tableProblem } from "../lib/sinks/mod.ts";
import { dirname, resolve } from "node:path";

const FLAGS = {
  kv: {
    type: "string",
    value: "PATH",
    help: "KV file, or KV Connect URL with DENO_KV_ACCESS_TOKEN set (required)",
  },
  "crawl-id": {
    type: "string",
    value: "ID",
    help: "which crawl, when the KV file holds several",
    default: "the only one",
  },
  format: {
    type: "string",
    value: "FORMAT",
    help: "ndjson, parquet (id, rev, doc and error as JSON text, too_large) or sqlite (a " +
      "table of the SQLite sink's columns)",
    default: "ndjson",
  },
  out: {
    type: "string",
    value: "FILE",
    help: "write to FILE, which must not exist (needed for parquet and sqlite)",
    default: "stdout (ndjson)",
  },
  table: {
    type: "string",
    value: "NAME",
    help: "--format sqlite: the table",
    default: "named after the crawl",
  },
  partial: {
    type: "boolean",
    help: "export a crawl that is not done (running, paused, failed, cancelled): what it holds now",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task export --kv PATH",
  summary: 'Writes a crawl\'s items to stdout as NDJSON: {"id","rev","doc"?,"error"?}, or to a\n' +
    "Parquet or SQLite file.",
  examples: [
    "deno task export --kv crawl.kv --format parquet --out npm.parquet",
    "deno task export --kv crawl.kv --format sqlite --out npm.db --table packages",
    "deno task export --kv crawl.kv > items.ndjson",
    "deno task export --kv x.kv | head",
    "deno task export --kv x.kv --partial > so-far.ndjson   # a crawl still running",
    "DENO_KV_ACCESS_TOKEN=... deno task export --kv http://kv-host:4512 > items.ndjson",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  if (!f.kv) throw new UsageError("--kv PATH is required");
  const path = f.kv;
  const format = choiceFlag("format", f.format, ["ndjson", "parquet", "sqlite"], "ndjson");
  if (format !== "ndjson" && !f.out) throw new UsageError(`--format ${format} needs --out FILE`);
  if (f.table !== undefined && format !== "sqlite") {
    throw new UsageError("--table names the table of --format sqlite");
  }
  const badTable = f.table === undefined ? null : tableProblem(f.table);
  if (badTable !== null) throw new UsageError(`--table: ${badTable}`);
  if (f.out !== undefined) await folderOf(f.out);
  return await readStoredKv(path, async (kv) => {
    const crawl = await chooseCrawl(kv, path, f["crawl-id"]);
    const id = crawl.id;
    if (crawl.status !== "done" && !f.partial) {
      throw new UsageError(
        `crawl ${id} is ${crawl.status}, not done: its items are incomplete (use --partial to ` +
          `export what it holds now)`,
      );
    }
    try {
      const n = format === "parquet"
        ? await exportParquet(kv, id, { path: f.out! })
        : format === "sqlite"
        ? await exportSqlite(kv, id, { path: f.out!, table: f.table })
        : await ndjsonTo(f.out, (out) => exportNdjson(kv, id, out));
      console.error(
        `exported ${n} items of crawl ${id} (${crawl.status}, ${crawl.total} planned)` +
          (f.out ? ` to ${f.out} (${format})` : ""),
      );
    } catch (err) {
      // `export | head` closes the pipe early: the reader has what it wanted, not an error.
      if (err instanceof Deno.errors.BrokenPipe) return 0;
      throw err;
    }
    return 0;
  });
});

/** `--out`'s folder must be there (the file itself must not: each format checks that). */
async function folderOf(out: string): Promise<void> {
  const folder = dirname(resolve(out));
  const there = await Deno.stat(folder).catch(() => null);
  if (!there?.isDirectory) throw new UsageError(`--out ${out}: no folder ${folder} to write in`);
}

/**
 * Runs `write` on where NDJSON goes: stdout, or a new file (one that is there is never written
 * over), closed once written and synced to disk before the count is told.
 */
async function ndjsonTo(
  out: string | undefined,
  write: (to: WritableStream<Uint8Array>) => Promise<number>,
): Promise<number> {
  if (out === undefined) return await write(Deno.stdout.writable);
  let file: Deno.FsFile;
  try {
    file = await Deno.open(out, { write: true, createNew: true });
  } catch (err) {
    if (err instanceof Deno.errors.AlreadyExists) {
      throw new UsageError(`--out ${out} is there already; remove it or name another file`);
    }
    throw err;
  }
  const n = await write(file.writable);
  await file.sync();
  await file.writable.close().catch(() => file.close());
  return n;
}
