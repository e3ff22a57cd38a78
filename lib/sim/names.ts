/**
 * Key sets for the simulated registry: a names file (plain or gzip, one key a line), the bundled npm
 * names, and a deterministic synthetic generator with the bundled names' skew.
 *
 * @module
 */
import { sortKeys } from "../plan/keys.ts";

/** Path of the bundled 226,995 real npm package names (gzip, raw byte order). */
export const BUNDLED_NAMES_URL = new URL("../../fixtures/npm-names.txt.gz", import.meta.url);

/**
 * Reads a names file: one key a line, blank lines ignored, `.gz` decompressed. Returns the keys
 * sorted in code point order with duplicates removed, whatever order the file had.
 * @throws Error with a one-line message when the file is missing or unreadable.
 */
export async function readNames(path: string | URL): Promise<string[]> {
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(path);
  } catch (err) {
    throw new Error(`cannot read names file ${String(path)}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const gz = String(path).endsWith(".gz");
  const text = gz ? await gunzipText(bytes) : new TextDecoder().decode(bytes);
  const keys = text.split("\n").map((l) => l.replace(/\r$/, "")).filter((l) => l.length > 0);
  return dedupeSorted(sortKeys(keys));
}

async function gunzipText(bytes: Uint8Array): Promise<string> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(
    new DecompressionStream("gzip"),
  );
  return await new Response(stream).text();
}

function dedupeSorted(keys: string[]): string[] {
  let w = 0;
  for (let i = 0; i < keys.length; i++) {
    if (i === 0 || keys[i] !== keys[w - 1]) keys[w++] = keys[i];
  }
  keys.length = w;
  return keys;
}

/** The bundled real npm names, sorted. */
export function bundledNames(): Promise<string[]> {
  return readNames(BUNDLED_NAMES_URL);
}

/** A small deterministic PRNG (mulberry32); returns floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * `count` distinct synthetic keys with the skew of real npm names: each is a bundled name, or a
 * bundled name with a short suffix (`-x7`), so dense prefixes (`@types/`, `eslint-`) stay dense as
 * the registry grows. Deterministic for a given `base`, `count` and `seed`. Returns sorted keys.
 */
export function syntheticNames(
  base: readonly string[],
  count: number,
  options: { seed?: number } = {},
): string[] {
  if (base.length === 0) throw new Error("synthetic names need a non-empty base");
  const rand = prng(options.seed ?? 1);
  const seen = new Set<string>();
  const out: string[] = [];
  for (let i = 0; out.length < count; i++) {
    const name = base[Math.floor(rand() * base.length)];
    const key = i < base.length && rand() < 0.5
      ? name
      : `${name}-${Math.floor(rand() * 1e6).toString(36)}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(key);
    }
  }
  return sortKeys(out);
}
