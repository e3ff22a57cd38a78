/**
 * Key order and key arithmetic in the source's collation.
 *
 * CouchDB `_all_docs` collates document ids by raw UTF-8 bytes, which is the same as Unicode code
 * point order. JavaScript's `<` compares UTF-16 code units, which disagrees above U+FFFF (a
 * surrogate pair 0xD800.. sorts below U+E000..U+FFFF in UTF-16 but above it by code point), so every
 * comparison of keys in this project goes through {@linkcode compareKeys}.
 *
 * @module
 */

/** Maps a UTF-16 code unit so that plain numeric comparison gives code point order. */
function fixup(unit: number): number {
  // Surrogates (0xD800-0xDFFF) encode code points >= 0x10000, so they must sort after 0xE000-0xFFFF.
  if (unit >= 0xe000) return unit - 0x800;
  if (unit >= 0xd800) return unit + 0x2000;
  return unit;
}

/**
 * Compares two keys in Unicode code point order (= CouchDB `_all_docs` raw collation).
 * A proper prefix sorts first; `""` sorts before everything.
 * @returns negative, zero or positive like `Array.prototype.sort` expects.
 *
 * @example
 * ```ts
 * const keys = ["b", "\u{1F600}", "\uFFFD", "a"];
 * keys.sort(compareKeys); // ["a", "b", "\uFFFD", "\u{1F600}"]: code points, not UTF-16 units
 * ```
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return fixup(x) - fixup(y);
  }
  return a.length - b.length;
}

/** True when the key contains a UTF-16 surrogate, i.e. where `<` and code point order may differ. */
export function hasAstral(key: string): boolean {
  for (let i = 0; i < key.length; i++) {
    const u = key.charCodeAt(i);
    if (u >= 0xd800 && u <= 0xdfff) return true;
  }
  return false;
}

/**
 * Sorts keys in place in code point order, using the fast native sort when no key needs care.
 *
 * @example
 * ```ts
 * sortKeys(["b", "a", "\u{1F600}", "\uFFFD"]); // ["a", "b", "\uFFFD", "\u{1F600}"]
 * ```
 */
export function sortKeys(keys: string[]): string[] {
  if (keys.some(hasAstral)) return keys.sort(compareKeys);
  return keys.sort();
}

/** Index of the first key >= `key` in a code-point-sorted array (the key's rank). */
export function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(sorted[mid], key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The code points of a key, as numbers. */
export function codePoints(key: string): number[] {
  const out: number[] = [];
  for (const ch of key) out.push(ch.codePointAt(0)!);
  return out;
}

/**
 * Keys longer than this many UTF-16 units are never a cursor or a shard bound when a shorter key
 * cuts at the same place (`separator`): cursors travel in URLs (registries limit their length:
 * CouchDB to 8,000 bytes by default) and in shard records (KV values are at most 64 KiB).
 */
export const LONG_KEY_UNITS = 1_000;

/** Longest cut key, in UTF-16 units: four of them fit a shard record with room to spare. */
export const MAX_CUT_UNITS = 7_000;

/** True when `key` is too long to be a cursor or a bound unless nothing shorter cuts there. */
export function isLongKey(key: string): boolean {
  return key.length > LONG_KEY_UNITS;
}

/**
 * The shortest prefix of `key` (in whole code points) that sorts after `lower`: listing from it
 * starts at `key` wherever nothing lies strictly between `lower` and `key`, as between two
 * neighbouring rows. A prefix sorts at or before its key in any collation. `lower` null: the first
 * code point. Returns `key` itself when no prefix does (`lower` is `key` or above).
 */
export function separator(lower: string | null, key: string): string {
  let out = "";
  for (const ch of key) {
    out += ch;
    if (lower === null || compareKeys(out, lower) > 0) return out;
  }
  return key;
}

/** A short, stable name for a long key (53-bit hash of its UTF-16 units, and its length). */
export function keyHash(key: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  const n = 4294967296 * (2097151 & h2) + (h1 >>> 0);
  return `${key.length}:${n.toString(36)}`;
}

function isSurrogate(cp: number): boolean {
  return cp >= 0xd800 && cp <= 0xdfff;
}

/**
 * The characters seen in a registry's keys, in code point order, with a model of how often each
 * follows each other character. Key arithmetic works over this alphabet rather than the whole code
 * point range: a midpoint over all 1.1M code points wastes ~20 bisection steps per character on keys
 * that use a few dozen characters. The model turns keys into numbers the way arithmetic coding does
 * (each character owns a slice of [0, 1) as wide as its probability after the previous character,
 * backing off to its overall frequency), so that equal steps in number are close to equal steps in
 * rank even in lumpy regions such as `po…`.
 */
export class Alphabet {
  #points: number[] = [];
  #slotOf = new Map<number, number>(); // code point -> slot (1-based; 0 = end of key)
  #uni = new Map<number, number>(); // code point -> count; END for ends of keys
  #bi = new Map<number, Map<number, number>>(); // previous code point (START at 0) -> next -> count
  #tables = new Map<number, Float64Array>();

  /** Builds an alphabet from the characters of some keys. */
  constructor(keys: Iterable<string> = []) {
    for (const k of keys) this.addKey(k);
  }

  /** Counts every character of `key`, each after its predecessor, and its end. */
  addKey(key: string): void {
    let prev = START;
    for (const ch of key) {
      const cp = ch.codePointAt(0)!;
      this.#count(prev, cp);
      prev = cp;
    }
    this.#count(prev, END);
    this.#tables.clear();
  }

  #count(prev: number, cp: number): void {
    if (cp !== END && !this.#uni.has(cp)) {
      this.#points = [...this.#points, cp].sort((a, b) => a - b);
      this.#slotOf = new Map(this.#points.map((p, i) => [p, i + 1]));
    }
    this.#uni.set(cp, (this.#uni.get(cp) ?? 0) + 1);
    let m = this.#bi.get(prev);
    if (!m) this.#bi.set(prev, m = new Map());
    m.set(cp, (m.get(cp) ?? 0) + 1);
  }

  /** Number of distinct characters. */
  get size(): number {
    return this.#points.length;
  }

  /** The characters as code points, ascending. */
  get points(): readonly number[] {
    return this.#points;
  }

  /** Cumulative probabilities of the slots (0 = end, then each char) after `prev`. */
  #table(prev: number): Float64Array {
    let low = this.#tables.get(prev);
    if (low) return low;
    const pts = this.#points;
    const n = pts.length + 1;
    const w = new Float64Array(n);
    let uniTotal = 0;
    for (let i = 0; i < n; i++) {
      w[i] = (this.#uni.get(i === 0 ? END : pts[i - 1]) ?? 0) + 1;
      uniTotal += w[i];
    }
    const m = this.#bi.get(prev);
    // Weight of the overall frequencies behind the per-predecessor counts: a predecessor needs
    // about this many keys of its own before they outweigh the overall shape. Few keys are ever
    // seen (the ends of the answers), and heavier smoothing measured better: 8.5 requests per
    // boundary at 2, 8.1 at 16, 8.4 at 32 (4M synthetic names, N = 56, mean of 3 seeds).
    const alpha = 16;
    let total = 0;
    for (let i = 0; i < n; i++) {
      const c = m?.get(i === 0 ? END : pts[i - 1]) ?? 0;
      w[i] = c + (alpha * w[i]) / uniTotal;
      total += w[i];
    }
    low = new Float64Array(n + 1);
    for (let i = 0; i < n; i++) low[i + 1] = low[i] + w[i] / total;
    low[n] = 1;
    this.#tables.set(prev, low);
    return low;
  }

  #slot(cp: number): number {
    const s = this.#slotOf.get(cp);
    if (s === undefined) throw new RangeError(`code point ${cp} not in alphabet`);
    return s;
  }

  /** True when every code point is in the alphabet. */
  knows(cps: readonly number[]): boolean {
    return cps.every((cp) => this.#slotOf.has(cp));
  }

  /** Reads `cps[from..]` (after the context `cps[from-1]`) as a number in [0, 1); null = 1. */
  encode(cps: readonly number[] | null, from: number): number {
    if (cps === null) return 1;
    let x = 0;
    let width = 1;
    let prev = from > 0 ? cps[from - 1] : START;
    for (let i = from; i <= cps.length && width > 1e-300; i++) {
      const low = this.#table(prev);
      const s = i < cps.length ? this.#slot(cps[i]) : 0;
      x += width * low[s];
      width *= low[s + 1] - low[s];
      if (s === 0) break;
      prev = cps[i];
    }
    return x;
  }

  /** The chars (after context `prev`) whose number is the largest at most `x`, up to `depth`. */
  decode(x: number, depth: number, prev: number = START): number[] {
    const pts = this.#points;
    const out: number[] = [];
    for (let i = 0; i < depth; i++) {
      const low = this.#table(prev);
      let lo = 0;
      let hi = low.length - 2;
      while (lo < hi) {
        const mid = (lo + hi + 1) >>> 1;
        if (low[mid] <= x) lo = mid;
        else hi = mid - 1;
      }
      if (lo === 0) break; // end of key
      out.push(pts[lo - 1]);
      x = (x - low[lo]) / (low[lo + 1] - low[lo]);
      prev = pts[lo - 1];
      if (!(x > 0)) break;
    }
    return out;
  }
}

/**
 * The characters package names are made of (npm: lowercase letters, digits, `-`, `.`, `_`, and `@`
 * for scopes), a weak prior for a registry's {@linkcode Alphabet}: each counts as one one-character
 * key until the registry's own keys outweigh it. Without it the model knows only the characters of
 * the first page and the last key, and cannot aim a probe at a subtree behind a character it has
 * not seen: the first page of npm is all digits, and `@` scopes hold half of its names. Measured
 * on 4M synthetic names (3 seeds), it cut planning requests by 15-18% at N = 16, 56 and 256.
 */
export const NAME_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789@-._";

const START = -1;
const END = -2;

/** How many characters after the common prefix a generated key may have. */
const DEPTH = 12;

/**
 * Returns a key strictly between `lo` and `hi` (code point order), placed at about `fraction` of the
 * way from `lo` to `hi` when both are read as numbers over `alphabet` (see {@linkcode Alphabet}).
 * Characters of `lo` and `hi` must have been added to the alphabet, or are added here.
 *
 * Edge cases: `hi === null` means "above every key"; returns `null` when no key lies strictly between
 * (e.g. `lo = "a"`, `hi = "a\u0000"`), or when `lo >= hi`. The result never contains a lone
 * surrogate, so it is always valid UTF-8.
 */
export function keyBetween(
  lo: string,
  hi: string | null,
  fraction: number,
  alphabet: Alphabet,
): string | null {
  if (hi !== null && compareKeys(lo, hi) >= 0) return null;
  const a = codePoints(lo);
  const b = hi === null ? null : codePoints(hi);
  if (!alphabet.knows(a) || (b !== null && !alphabet.knows(b))) {
    alphabet.addKey(lo);
    if (hi !== null) alphabet.addKey(hi);
  }
  if (alphabet.size === 0) alphabet.addKey("a");
  const f = Math.min(Math.max(Number.isFinite(fraction) ? fraction : 0.5, 0), 1);
  let p = 0;
  if (b) { while (p < a.length && p < b.length && a[p] === b[p]) p++; }
  const x = alphabet.encode(a, p);
  const y = alphabet.encode(b, p);
  const context = p > 0 ? a[p - 1] : undefined;
  // At an extreme fraction, or where float precision runs out, the decoded key can land on an end;
  // the model's midpoint is tried next, and a structural midpoint last.
  for (const g of [f, 0.5]) {
    const z = x + (y - x) * g;
    const candidate = String.fromCodePoint(...a.slice(0, p), ...alphabet.decode(z, DEPTH, context));
    if (between(lo, candidate, hi)) return candidate;
  }
  return fallbackBetween(a, b, alphabet);
}

function between(lo: string, k: string, hi: string | null): boolean {
  return compareKeys(lo, k) < 0 && (hi === null || compareKeys(k, hi) < 0);
}
/**
 * A key strictly between two keys whatever their shape (`b === null` = above every key). `lo + c` is
 * above `lo` for any char `c`, and below `hi` whenever `lo` is not a prefix of `hi`, or `c` is below
 * the next char of `hi`. Returns null when nothing lies between (`hi` = `lo` + U+0000s).
 */
function fallbackBetween(a: number[], b: number[] | null, alphabet: Alphabet): string | null {
  const lo = String.fromCodePoint(...a);
  const min = alphabet.points[0] ?? 0x61;
  if (b === null) return lo + String.fromCodePoint(min);
  let p = 0;
  while (p < a.length && p < b.length && a[p] === b[p]) p++;
  if (p === b.length) return null; // hi is a prefix of lo: lo >= hi
  if (p < a.length) {
    // lo[p] < hi[p]: a char strictly between them, or else anything appended to lo.
    const c = pickBetween(a[p], b[p], alphabet);
    if (c !== null) return String.fromCodePoint(...a.slice(0, p), c);
    return lo + String.fromCodePoint(min);
  }
  // lo is a proper prefix of hi: append a char below hi[p], or U+0000 and a key below hi's rest.
  const c = pickBetween(-1, b[p], alphabet);
  if (c !== null) return lo + String.fromCodePoint(c);
  const rest = fallbackBetween([], b.slice(p + 1), alphabet);
  return rest === null ? null : lo + "\u0000" + rest;
}

/**
 * A code point c with `floor < c < ceiling` near the middle of that range, preferring the median
 * alphabet char inside it; null if the range is empty. Never a surrogate.
 */
function pickBetween(floor: number, ceiling: number, alphabet: Alphabet): number | null {
  const inside = alphabet.points.filter((cp) => cp > floor && cp < ceiling);
  if (inside.length > 0) return inside[inside.length >> 1];
  let c = Math.floor((floor + ceiling) / 2);
  if (c <= floor) return null;
  if (isSurrogate(c)) c = c - 0xd800 > 0x400 ? 0xe000 : 0xd7ff;
  return c > floor && c < ceiling ? c : null;
}
