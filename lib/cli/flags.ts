/**
 * Command-line plumbing shared by the tasks: flag parsing with `node:util` parseArgs (stands in for
 * `@std/cli/parse-args`), numeric validation, and the one-line error exit.
 *
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { InputError, UsageError } from "../base/errors.ts";

/** Parses `args` strictly: unknown flags and missing values become a {@linkcode UsageError}. */
export function parseFlags<T extends NonNullable<ParseArgsConfig["options"]>>(
  args: string[],
  options: T,
): ReturnType<typeof parseArgs<{ options: T; strict: true; allowPositionals: false }>>["values"] {
  // `--shards -2` would read as a missing value followed by a flag; a negative number is a value,
  // so that the range check can say what is wrong with it.
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const name = args[i].startsWith("--") ? args[i].slice(2) : "";
    const next = args[i + 1];
    if (options[name]?.type === "string" && next !== undefined && /^-\d/.test(next)) {
      joined.push(`${args[i]}=${next}`);
      i++;
    } else joined.push(args[i]);
  }
  try {
    return parseArgs({ args: joined, options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new UsageError((err as Error).message.split("\n")[0]);
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

/** Parses an http(s) URL flag, or throws a {@linkcode UsageError} naming the flag. */
export function urlFlag(name: string, raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new UsageError(`--${name} is not a URL: "${raw}"`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new UsageError(`--${name} must be an http(s) URL, got "${raw}"`);
  }
  return raw.replace(/\/+$/, "");
}

/**
 * Runs a task's main function: any error is printed as one line (`error: ...`) on stderr and the
 * process exits with code 1 (2 for usage errors). Secrets never reach this line: callers redact
 * URLs before they are put in messages (see `redactUrl`).
 */
export async function runMain(main: () => Promise<number | void>): Promise<void> {
  try {
    const code = await main();
    Deno.exit(code ?? 0);
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err);
    console.error(`error: ${msg.split("\n")[0]}`);
    Deno.exit(err instanceof InputError ? 2 : 1);
  }
}
