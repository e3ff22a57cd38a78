/**
 * Command-line plumbing shared by the tasks: flag tables that carry their own help (what a flag
 * does, its default, an example), strict parsing with `node:util` parseArgs (stands in for
 * `@std/cli/parse-args`), numeric and URL validation, and the one-line error exit.
 *
 * @module
 */
import { shownText } from "../base/shown_text.ts";
import { parseArgs } from "node:util";
import { errorLine, InputError, InterruptedError, UsageError } from "../base/errors.ts";
import { normalizeSourceUrl, VIEW_PATTERN } from "../base/spec.ts";
import { redactUrl } from "../base/redact.ts";

/** One flag: its type and what `--help` says about it. */
export interface Flag {
  /** `string` flags take a value; `boolean` flags do not. */
  type: "string" | "boolean";
  /** One-letter alias. */
  short?: string;
  /** Placeholder of the value in help, e.g. `URL`. @default "VALUE" */
  value?: string;
  /** What the flag does, one line. */
  help: string;
  /** The default, as help shows it. */
  default?: string;
  /** A string flag that may be given several times (its values in order). */
  multiple?: boolean;
}

/** A task's flags by name. */
export type FlagTable = Record<string, Flag>;

/** What a task's `--help` prints. */
export interface TaskHelp {
  /** The command, e.g. `deno task crawl`. */
  usage: string;
  /** What the task does, a sentence or two. */
  summary: string;
  /** Example invocations. */
  examples: string[];
}

/** The `--help` text of a task: summary, every flag with what it does and its default, examples. */
export function helpText(help: TaskHelp, table: FlagTable): string {
  const rows = Object.entries(table).map(([name, f]) => {
    const head = `  --${name}${f.type === "string" ? ` ${f.value ?? "VALUE"}` : ""}` +
      (f.short ? `, -${f.short}` : "");
    return [head, f.help + (f.default !== undefined ? ` (default: ${f.default})` : "")];
  });
  const width = Math.min(34, Math.max(...rows.map(([h]) => h.length)) + 2);
  const lines = rows.map(([h, text]) =>
    h.length >= width ? `${h}\n${" ".repeat(width)}${text}` : h.padEnd(width) + text
  );
  return [
    `usage: ${help.usage} [flags]`,
    "",
    help.summary,
    "",
    "flags:",
    ...lines,
    "",
    "examples:",
    ...help.examples.map((e) => `  ${e}`),
  ].join("\n");
}

/** The value types parsed from a table: strings for string flags, booleans for boolean flags. */
export type FlagValues<T extends FlagTable> = {
  [K in keyof T]?: T[K]["type"] extends "boolean" ? boolean
    : T[K]["multiple"] extends true ? string[]
    : string;
};

/** Parses `args` strictly: unknown flags and missing values become a {@linkcode UsageError}. */
export function parseFlags<T extends FlagTable>(args: string[], table: T): FlagValues<T> {
  // `--shards -2` would read as a missing value followed by a flag; a negative number is a value,
  // so that the range check can say what is wrong with it.
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i].startsWith("--") ? args[i].slice(2) : "";
    const next = args[i + 1];
    if (table[name]?.type === "string" && next !== undefined && /^-\d/.test(next)) {
      joined.push(`${args[i]}=${next}`);
      i++;
    } else joined.push(args[i]);
  }
  const options = Object.fromEntries(
    Object.entries(table).map(([k, f]) => [
      k,
      {
        type: f.type,
        ...(f.short ? { short: f.short } : {}),
        ...(f.multiple ? { multiple: true } : {}),
      },
    ]),
  );
  try {
    return parseArgs({ args: joined, options, strict: true, allowPositionals: false })
      .values as FlagValues<T>;
  } catch (err) {
    throw new UsageError(errorLine(err));
  }
}

/** Parses an integer flag in [min, max]; `undefined` gives `fallback`. */
export function intFlag(
  name: string,
  raw: string | undefined,
  options: { fallback: number; min?: number; max?: number },
): number {
  if (raw === undefined) return options.fallback;
  if (!/^-?\d+$/.test(raw.trim())) {
    throw new UsageError(`--${name} must be an integer, got "${raw}"`);
  }
  const n = Number(raw);
  const min = options.min ?? Number.MIN_SAFE_INTEGER;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  if (n < min) throw new UsageError(`--${name} must be at least ${min}, got ${n}`);
  if (n > max) throw new UsageError(`--${name} must be at most ${max}, got ${n}`);
  return n;
}

/** Milliseconds in each unit a duration flag takes. */
const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

/**
 * Parses a duration flag (`500ms`, `30s`, `10m`, `2h`, `1d`, or `0`) into milliseconds in
 * [minMs, maxMs] (0 is always taken: "never"); `undefined` gives `fallbackMs`.
 */
export function durationFlag(
  name: string,
  raw: string | undefined,
  options: { fallbackMs: number; minMs?: number; maxMs?: number },
): number {
  if (raw === undefined) return options.fallbackMs;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(raw.trim());
  if (raw.trim() === "0") return 0;
  if (!m) {
    throw new UsageError(
      `--${name} must be a duration such as 500ms, 30s, 10m or 2h, got "${raw}"`,
    );
  }
  const ms = Math.round(Number(m[1]) * DURATION_UNITS[m[2]]);
  const show = (x: number) => x % 1000 === 0 ? `${x / 1000}s` : `${x}ms`;
  if (ms < (options.minMs ?? 0)) {
    throw new UsageError(`--${name} must be 0 or at least ${show(options.minMs!)}, got ${raw}`);
  }
  if (ms > (options.maxMs ?? Infinity)) {
    throw new UsageError(`--${name} must be at most ${show(options.maxMs!)}, got ${raw}`);
  }
  return ms;
}

/** Parses a number flag in [min, max]; `undefined` gives `fallback`. */
export function numberFlag(
  name: string,
  raw: string | undefined,
  options: { fallback: number; min?: number; max?: number },
): number {
  if (raw === undefined) return options.fallback;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n)) {
    throw new UsageError(`--${name} must be a number, got "${raw}"`);
  }
  if (options.min !== undefined && n < options.min) {
    throw new UsageError(`--${name} must be at least ${options.min}, got ${n}`);
  }
  if (options.max !== undefined && n > options.max) {
    throw new UsageError(`--${name} must be at most ${options.max}, got ${n}`);
  }
  return n;
}

/** Parses an http(s) URL flag into canonical form (`normalizeSourceUrl`), or throws a {@linkcode UsageError} naming the flag. */
export function urlFlag(name: string, raw: string): string {
  try {
    // Credentials stay the user's: kept in their own KV file, shown redacted everywhere. A file
    // (an SQL table) is the user's own too: only the command line may name one.
    return normalizeSourceUrl(raw, `--${name}`, { credentials: true, files: true });
  } catch (err) {
    throw new UsageError(`${errorLine(err)}: "${redactUrl(raw.trim())}"`);
  }
}

/** Checks a `--view` flag: `ddoc/view`. */
export function viewFlag(raw: string | undefined): string | undefined {
  if (raw !== undefined && !VIEW_PATTERN.test(raw)) {
    throw new UsageError(`--view must be ddoc/view (letters, digits, _ . -), got "${raw}"`);
  }
  return raw;
}

/** Parses one of a fixed set of words, or throws a {@linkcode UsageError} listing them. */
export function choiceFlag<T extends string>(
  name: string,
  raw: string | undefined,
  choices: readonly T[],
  fallback: T,
): T {
  if (raw === undefined) return fallback;
  if (!choices.includes(raw as T)) {
    throw new UsageError(`--${name} must be ${choices.join(", ")}; got "${raw}"`);
  }
  return raw as T;
}

/**
 * Parses a comma-separated list of words from `o.known`, or throws a {@linkcode UsageError} naming
 * the word that is not one of them.
 */
export function listFlag<T extends string>(
  name: string,
  raw: string,
  o: { known: readonly T[] },
): T[] {
  return raw.split(",").map((w) => {
    if (!o.known.includes(w as T)) {
      throw new UsageError(`--${name}: unknown kind "${w}" (known: ${o.known.join(",")})`);
    }
    return w as T;
  });
}

/**
 * Runs a task's main function: `--help`/`-h` prints the help; any error is printed as one line
 * (`error: ...`) on stderr and the process exits with code 1 (2 for input errors). Secrets never
 * reach this line: callers redact URLs before they are put in messages (see `redactUrl`).
 */
export async function runMain(main: () => Promise<number | void>): Promise<void> {
  try {
    const code = await main();
    Deno.exit(code ?? 0);
  } catch (err) {
    if (err instanceof InterruptedError) {
      console.error(shownText(errorLine(err)));
      Deno.exit(130);
    }
    const msg = err instanceof Error ? err.message : String(err);
    // What a registry said (in an error's reason) is shown as text, never run by the terminal.
    console.error(`error: ${shownText(errorLine(msg))}`);
    Deno.exit(err instanceof InputError ? 2 : 1);
  }
}

/** A second interrupt within this long is the first one again (forwarded), in milliseconds. */
const DOUBLE_SIGNAL_MS = 1_000;

/**
 * Calls `stop` on the first SIGINT or SIGTERM (where the platform has them), so that a task lets
 * its leases go at once instead of leaving them to go stale; a second signal a second or more later
 * exits at once (130).
 * Returns a function that removes the listeners.
 */
export function onInterrupt(stop: () => void): () => void {
  let stoppingAt: number | null = null;
  const handler = () => {
    if (stoppingAt === null) {
      stoppingAt = performance.now();
      return stop();
    }
    // Ctrl-C at a terminal reaches every process of its group: `deno task` passes its own copy on
    // to the task, so one press often arrives twice. Only a second press is the user's.
    if (performance.now() - stoppingAt < DOUBLE_SIGNAL_MS) return;
    console.error("stopped at once (a second Ctrl-C): the same command resumes where it was");
    Deno.exit(130);
  };
  const signals: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
  for (const s of signals) Deno.addSignalListener(s, handler);
  return () => {
    for (const s of signals) Deno.removeSignalListener(s, handler);
  };
}
