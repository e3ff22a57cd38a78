/**
 * The bench layer (`lib/bench/`): `deno task bench` measures rankcrawl against what a user would
 * pick instead (a plain pager, even-split pagers, couchbackup) and against KV's own ceiling, side
 * by side in one run, and prints every figure as a ratio. Never part of the tests: these machines
 * are shared and noisy.
 *
 * This module: timing whole processes (wall time and peak memory), medians, table output.
 *
 * @module
 */
import { type SpawnedTask, spawnTask } from "../sim/spawn_task.ts";

/** What a timed process did. */
export interface Timed {
  /** Wall time, in milliseconds. */
  ms: number;
  /** Peak resident memory, in MiB (Linux; 0 elsewhere). */
  peakMiB: number;
  /** Exit code. */
  code: number;
  /** What it wrote on stdout (unless redirected to a file). */
  stdout: string;
  /** What it wrote on stderr. */
  stderr: string;
}

/** Resident memory of process `pid` now, in MiB (Linux; 0 elsewhere, or once it has ended). */
export function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

function peakOf(pid: number): number {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const m = /VmHWM:\s+(\d+) kB/.exec(status);
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * Runs `deno run -A <script> <args>` to its end; with `stdoutTo`, its stdout goes to that file the
 * way a user's `> file` sends it (through `sh`, which `exec`s the task, so the pid and its memory
 * are the task's own). Piping it through this process instead added 0.2-0.8 s to a 0.7 s export of
 * 1M lines: the copy competed with this process's own heap, which the peers' runs had filled.
 * @throws Error with its stderr when it exits non-zero.
 */
export async function timeTask(
  script: string,
  args: string[],
  options: { stdoutTo?: string } = {},
): Promise<Timed> {
  const task = ["run", "-A", script, ...args];
  const t = performance.now();
  const child = (options.stdoutTo
    ? new Deno.Command("sh", {
      args: ["-c", 'exec "$0" "$@" > "$BENCH_STDOUT"', Deno.execPath(), ...task],
      stdout: "null",
      stderr: "piped",
      env: { NO_COLOR: "1", BENCH_STDOUT: options.stdoutTo },
    })
    : new Deno.Command(Deno.execPath(), {
      args: task,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    })).spawn();
  let peak = 0;
  const poll = setInterval(() => peak = Math.max(peak, peakOf(child.pid)), 100);
  const [out, err, status] = await Promise.all([
    options.stdoutTo ? "" : new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.status,
  ]);
  clearInterval(poll);
  const ms = performance.now() - t;
  if (status.code !== 0) {
    // Arguments may hold a database's password (a sink): never printed.
    const shown = args.map((a) => a.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@"));
    throw new Error(`${script} ${shown.join(" ")} failed: ${err.trim()}`);
  }
  return { ms, peakMiB: Math.round(peak), code: status.code, stdout: out, stderr: err };
}

/**
 * Checks what `deno task export` reported (`exported N items …` on stderr) against the items the
 * registry holds, so a bench never times an export that lost items.
 * @throws Error when the count is missing or differs.
 */
export function checkExported(run: Timed, items: number): void {
  const m = /exported (\d+) items/.exec(run.stderr);
  if (!m || Number(m[1]) !== items) {
    throw new Error(`export wrote ${m ? m[1] : "no count of"} items, expected ${items}`);
  }
}

/**
 * `deno task crawl --source <url> --kv <kv>` (with `args`), then `deno task export` of it to
 * `out`, each timed; the export checked to hold `items` ({@linkcode checkExported}).
 */
export async function crawlThenExport(
  url: string,
  o: { kv: string; out: string; items: number; args?: string[] },
): Promise<{ crawl: Timed; exported: Timed }> {
  const crawl = await timeTask("tasks/crawl.ts", ["--source", url, "--kv", o.kv, ...o.args ?? []]);
  const exported = await timeTask("tasks/export.ts", ["--kv", o.kv], { stdoutTo: o.out });
  checkExported(exported, o.items);
  return { crawl, exported };
}

/** Times an async function, in milliseconds. */
export async function timeIt(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

/** The median of a few numbers. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Runs `fn` `runs` times and keeps the median of what it measures. */
export async function medianOf(runs: number, fn: () => Promise<number>): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) xs.push(await fn());
  return median(xs);
}

/**
 * Times every step of `steps` once per round, in the given order, for `runs` rounds, and returns
 * each step's times (ms, one per round). Ratios between steps are then taken within a round
 * ({@linkcode pairedRatio}): on shared cores the machine's speed drifts during a part (by a third
 * within minutes, seen), and timing all runs of one side before the other's let that drift decide
 * a ratio (the same part gave 1.09 and 0.76 ten minutes apart).
 */
export async function rounds<K extends string>(
  runs: number,
  steps: Record<K, () => Promise<number>>,
): Promise<Record<K, number[]>> {
  const out = Object.fromEntries(Object.keys(steps).map((k) => [k, [] as number[]])) as Record<
    K,
    number[]
  >;
  for (let r = 0; r < runs; r++) {
    for (const k of Object.keys(steps) as K[]) out[k].push(await steps[k]());
  }
  return out;
}

/** The median over rounds of `a[i] / b[i]` (see {@linkcode rounds}); NaN where `b` is. */
export function pairedRatio(a: readonly number[], b: readonly number[]): number {
  return median(a.map((v, i) => v / b[i]));
}

/** `deno task registry` in its own process with `args`. */
export function registry(args: string[]): Promise<SpawnedTask> {
  return spawnTask(["run", "--allow-net=127.0.0.1", "--allow-read", "tasks/registry.ts"], args);
}

const num = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

/** Formats a count, a rate or milliseconds as an integer with separators. */
export function n(x: number): string {
  return num.format(Math.round(x));
}

/** Seconds with one decimal. */
export function s(ms: number): string {
  return (ms / 1000).toFixed(1);
}

/** A ratio with two decimals. */
export function x(ratio: number): string {
  return ratio.toFixed(2);
}

/** A markdown table. */
export function table(head: string[], rows: (string | number)[][]): string {
  return [
    `| ${head.join(" | ")} |`,
    `|${head.map(() => "---").join("|")}|`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");
}
