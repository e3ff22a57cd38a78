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

/** Share of synthetic keys that are long generated names in clusters (the real length tail). */
export const LONG_TAIL_SHARE = 0.015;

/**
 * Clusters of long generated names, as real npm has (preview and sandbox builds published per pull
 * request under one scope): each cluster shares a prefix, and every name is 120 to 214 characters,
 * npm's limit. `count` names in all, cluster sizes 50 to 3,000.
 */
function longNames(base: readonly string[], count: number, rand: () => number): string[] {
  const out: string[] = [];
  const words = ["sandbox", "preview", "canary", "feature", "release", "staging", "build"];
  while (out.length < count) {
    const size = Math.min(count - out.length, 50 + Math.floor(rand() * 2950));
    const stem = base[Math.floor(rand() * base.length)].replace(/^@[^/]*\//, "");
    const org = `@${words[Math.floor(rand() * words.length)]}-${Math.floor(rand() * 1e4)}`;
    const prefix = `${org}/${stem}-${words[Math.floor(rand() * words.length)]}-pr-`;
    for (let j = 0; j < size; j++) {
      const target = 120 + Math.floor(rand() * 95);
      let name = `${prefix}${Math.floor(rand() * 1e6)}-${
        Math.floor(rand() * 2 ** 32).toString(16)
      }`;
      while (name.length < target) name += `-${words[Math.floor(rand() * words.length)]}`;
      out.push(name.slice(0, target));
    }
  }
  return out;
}

/**
 * `count` distinct synthetic keys with the shape of real npm names: mostly a bundled name, or a
 * bundled name with a short suffix (`-x7`), so dense prefixes (`@types/`, `eslint-`) stay dense as
 * the registry grows; and {@linkcode LONG_TAIL_SHARE} of long generated names in clusters (up to
 * 214 characters), the tail that breaks naive batching. Deterministic for a given `base`, `count`
 * and `seed`. Returns sorted keys.
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
  const add = (key: string) => {
    if (!seen.has(key)) (seen.add(key), out.push(key));
  };
  for (const key of longNames(base, Math.floor(count * LONG_TAIL_SHARE), rand)) add(key);
  for (let i = 0; out.length < count; i++) {
    const name = base[Math.floor(rand() * base.length)];
    add(
      i < base.length && rand() < 0.5 ? name : `${name}-${Math.floor(rand() * 1e6).toString(36)}`,
    );
  }
  return sortKeys(out);
}

/**
 * Ids built to break naive storage: ids that differ only in lone surrogates (UTF-8 cannot tell
 * them apart), ids that are URL path tricks (`.`, `..`, `a/b`), ids longer than a KV key, and a
 * short id shaped like a long id's hashed key. Valid JSON strings a registry can send.
 */
export function collidingIds(): string[] {
  const long = "@x/" + "ü".repeat(1500); // 3,003 bytes: over a KV key, under the 4,000 accepted
  return [
    "s",
    "s\ud800",
    "s\ud801",
    "s\udc00",
    "s\ufffd",
    "\ud800",
    ".",
    "..",
    "a/b",
    "a%2Fb",
    "%2e%2e",
    long,
    long.slice(0, -1) + "v",
    `${long.slice(0, 400)}\u0000a1b2c3d4e5f6a7b8${long.length}`,
  ];
}

/** The 2-3 character prefix whose keys number closest to `want` (to make a hot spot of that size). */
export function prefixNear(keys: string[], want: number): { prefix: string; count: number } {
  const counts = new Map<string, number>();
  for (const k of keys) {
    for (const len of [2, 3]) counts.set(k.slice(0, len), (counts.get(k.slice(0, len)) ?? 0) + 1);
  }
  let best = { prefix: "", count: 0 };
  for (const [prefix, count] of counts) {
    if (Math.abs(count - want) < Math.abs(best.count - want)) best = { prefix, count };
  }
  return best;
}
