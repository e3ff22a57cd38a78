/**
 * Worker processes on one crawl: the same 56-shard crawl with documents fetched one by one from a
 * registry 20 ms away, run by 1, 2 and 4 `deno task worker` processes on one KV file (each with its
 * default 16 shards at once), side by side in one run. What a user who outgrows one process does.
 *
 * @module
 */
import { SYSTEM_CLOCK } from "../base/clock.ts";
import { listCrawls } from "../engine/store/mod.ts";
import { crawlStatus, kvOp } from "../engine/mod.ts";
import { medianOf, n, registry, s, table, x } from "./harness.ts";

const SHARDS = 56;

function worker(kvPath: string, extra: string[]): Deno.ChildProcess {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "tasks/worker.ts", "--kv", kvPath, "--exit-when-idle", ...extra],
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
}

/** The crawl in `kvPath` once a process has created it (the first worker does). */
async function crawlCreated(kvPath: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      const kv = await kvOp(() => Deno.openKv(kvPath));
      try {
        if ((await listCrawls(kv)).length > 0) return;
      } finally {
        kv.close();
      }
    } catch {
      // Not created yet.
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("the first worker never created the crawl");
}

/** One crawl by `processes` worker processes: wall milliseconds, checked complete. */
async function crawlWith(url: string, processes: number, size: number): Promise<number> {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/w.kv`;
  try {
    const t = performance.now();
    const first = worker(kvPath, ["--source", url, "--shards", String(SHARDS), "--docs"]);
    await crawlCreated(kvPath);
    const all = [first, ...Array.from({ length: processes - 1 }, () => worker(kvPath, []))];
    const ends = await Promise.all(
      all.map(async (w) => ({
        code: (await w.status).code,
        log: await new Response(w.stderr).text(),
      })),
    );
    const ms = performance.now() - t;
    const failed = ends.find((e) => e.code !== 0);
    if (failed) throw new Error(`a worker failed: ${failed.log.trim().split("\n").at(-1)}`);
    const kv = await Deno.openKv(kvPath);
    try {
      const [crawl] = await listCrawls(kv);
      const report = await crawlStatus(kv, crawl.id, { clock: SYSTEM_CLOCK });
      if (report.status !== "done" || report.itemsStored !== size) {
        throw new Error(`${processes} processes: ${report.status}, ${report.itemsStored} items`);
      }
    } finally {
      kv.close();
    }
    return ms;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Prints the worker-processes table. */
export async function benchWorkers(o: { size: number; runs: number; log: (s: string) => void }) {
  const reg = await registry([
    "--synthetic",
    String(o.size),
    "--latency-ms",
    "20",
    "--no-include-docs",
    "--no-bulk-get",
  ]);
  try {
    const rows: (string | number)[][] = [];
    let one = 0;
    for (const processes of [1, 2, 4]) {
      const ms = await medianOf(o.runs, () => crawlWith(reg.url, processes, o.size));
      if (processes === 1) one = ms;
      rows.push([processes, processes * 16, s(ms), n(o.size / (ms / 1000)), x(one / ms)]);
    }
    o.log(
      `\n### Worker processes: ${n(o.size)} documents fetched one by one, 20 ms away, ` +
        `${SHARDS} shards (median of ${o.runs})\n`,
    );
    o.log(table(["processes", "shards at once", "seconds", "documents/s", "speedup"], rows));
  } finally {
    await reg.close();
  }
}
