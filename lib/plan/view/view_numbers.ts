/**
 * Numbers of view keys as fixed-width text whose order is their value's order (the float64's bits,
 * made unsigned-comparable), and the least number at or above any text: a part of
 * `view_keys.ts`, which carries view rows as string keys.
 *
 * @module
 */

/**
 * What is at `s[i..]`: exactly a value's encoding (and where it ends), or the least value whose
 * encoding is above the rest of `s` (then whatever follows is at its minimum), or nothing: the
 * rest of `s` is above every value's encoding. `T` is the type of values parsed.
 */
export type Parsed<T> =
  | { kind: "exact"; value: T; next: number }
  | { kind: "above"; value: T }
  | { kind: "over" };

// Numbers: the float64's bits, made unsigned-comparable (flip the sign bit of positives, every bit
// of negatives), as 16 lower-case hex digits.
const view = new DataView(new ArrayBuffer(8));
const SIGN = 1n << 63n;
export const ALL = (1n << 64n) - 1n;

export function numberCode(x: number): bigint {
  view.setFloat64(0, x === 0 ? 0 : x);
  const u = view.getBigUint64(0);
  return u & SIGN ? ~u & ALL : u | SIGN;
}

export function codeNumber(c: bigint): number {
  view.setBigUint64(0, c & SIGN ? c & ~SIGN : ~c & ALL);
  return view.getFloat64(0);
}

export const hex = (c: bigint) => c.toString(16).padStart(16, "0");

export const HEX = "0123456789abcdef";

export function parseNumber(s: string, i: number): Parsed<number> {
  const digits = s.slice(i, i + 16);
  let exactDigits = true;
  let code = 0n;
  let j = 0;
  for (; j < 16; j++) {
    const c = digits[j];
    const d = c === undefined ? -1 : HEX.indexOf(c);
    if (d >= 0) {
      code = code * 16n + BigInt(d);
      continue;
    }
    exactDigits = false;
    if (c === undefined || c < "0") {
      code = code << BigInt(4 * (16 - j)); // the rest at its least
    } else if (c < "a") {
      code = (code * 16n + 10n) << BigInt(4 * (15 - j)); // between '9' and 'a': 'a', then zeros
    } else {
      // Above 'f': the prefix + 1, then zeros; past the last prefix, no number is high enough.
      code = (code + 1n) << BigInt(4 * (16 - j));
      if (code > ALL) return { kind: "over" };
    }
    break;
  }
  return numberAt(code, exactDigits, i + 16);
}

/** The least number whose code is at or above `code` (`exact`: `code` is all of the input). */
export function numberAt(code: bigint, exact: boolean, next: number): Parsed<number> {
  const least = numberCode(-Number.MAX_VALUE);
  if (code < least) return { kind: "above", value: -Number.MAX_VALUE };
  if (code > numberCode(Number.MAX_VALUE)) return { kind: "over" };
  let x = codeNumber(code);
  if (Object.is(x, -0)) {
    x = 0; // one zero: the code of -0 sits just below 0's
    exact = false;
  }
  if (numberCode(x) !== code) exact = false;
  return exact ? { kind: "exact", value: x, next } : { kind: "above", value: x };
}
