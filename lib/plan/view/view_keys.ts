/**
 * CouchDB view rows as plain string keys, so that everything built on string keys (the planner, the
 * boundary search, shards, cursors, splits) works on views unchanged.
 *
 * A view row is `(key, docid)`: keys are JSON values, several rows may share one, and CouchDB
 * orders rows by key, then by docid (`startkey_docid` cuts inside a run of equal keys). This module
 * maps each row to a string whose code point order is the row order (an order-preserving,
 * prefix-free encoding of the key, then the docid), and back. Two collations are implemented
 * ({@linkcode Collation}), each with its own type tags, so that a row's encoding says which one
 * it was made for:
 *
 * - `typed`: CouchDB's documented view collation with strings by code point: `null` < `false` <
 *   `true` < numbers < strings < arrays < objects (the project's registry);
 * - `pouch`: the same, strings and docids by UTF-16 code unit (pouchdb-server): astral characters
 *   before U+E000..U+FFFF;
 * - `raw`: a CouchDB view declared with `"options": {"collation": "raw"}`, which compares the
 *   decoded JSON as Erlang terms: numbers < `false` < `null` < `true` < objects < arrays <
 *   strings (strings by their UTF-8 bytes, i.e. by code point).
 *
 * In both, numbers by value (`-0` is `0`); arrays element by element, a prefix first; objects pair
 * by pair in their order (key, then value), fewer pairs first. CouchDB's default collation (ICU)
 * is not implemented: a listing in another order is refused as out of order, never crawled
 * wrongly. Object keys that look like array indices (`"7"`) are not supported: JavaScript moves
 * them to the front of an object, so their order cannot be kept.
 *
 * The planner also asks for ranks of made-up keys between rows; {@linkcode ceilViewRow} gives the
 * least row at or above any string, so those are exact too.
 *
 * @module
 */
import { compareKeys } from "../keys.ts";
import { idOfKey, keyOfId } from "../id_order.ts";
import {
  HEX,
  hex,
  numberAt,
  numberCode,
  type Parsed as ParsedOf,
  parseNumber,
} from "./view_numbers.ts";

/** What a parse of an encoded value finds (see `view_numbers.ts`). */
type Parsed = ParsedOf<Json>;

/** A JSON value, as view keys are. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A view row's place: its key, its document's id, and which of that pair's rows it is. */
export interface ViewRowKey {
  /** The emitted key. */
  key: Json;
  /** The id of the document that emitted it (never holds U+0000: see {@linkcode encodeViewRow}). */
  docid: string;
  /**
   * Which row of the same `(key, docid)` pair this is, counted from 0 in row order: a document may
   * emit one key several times, and each such row is its own row. @default 0
   */
  dup?: number;
}

/** Largest {@linkcode ViewRowKey.dup}: eight hex digits. */
export const MAX_DUP = 0xffff_ffff;

/**
 * A view's order of keys (module comment): `typed` (CouchDB's documented type order, strings by
 * code point), `pouch` (the same, strings and docids by UTF-16 code unit, as pouchdb-server
 * collates) or `raw` (Erlang term order, CouchDB's `"collation": "raw"`).
 */
export type Collation = "typed" | "pouch" | "raw";

const TERM = "\u0000";
const ESC = "\u0001";

type Kind = "null" | "false" | "true" | "number" | "string" | "array" | "object";

/** A collation's types in order, and the tag letter of each (contiguous, distinct per collation). */
interface Order {
  tags: string;
  kinds: Kind[];
  /**
   * Strings (and docids) compare by UTF-16 code unit: they are encoded as the keys
   * `lib/plan/id_order.ts` makes, whose code point order is that order.
   */
  utf16?: boolean;
}

const TYPED_KINDS: Kind[] = ["null", "false", "true", "number", "string", "array", "object"];

const ORDERS: Record<Collation, Order> = {
  typed: { tags: "ABCDEFG", kinds: TYPED_KINDS },
  pouch: { tags: "QRSTUVW", kinds: TYPED_KINDS, utf16: true },
  raw: { tags: "IJKLMNO", kinds: ["number", "false", "null", "true", "object", "array", "string"] },
};

/** The least value of each type. */
const LEAST: Record<Kind, Json> = {
  null: null,
  false: false,
  true: true,
  number: -Number.MAX_VALUE,
  string: "",
  array: [],
  object: {},
};

function kindOf(v: Json): Kind {
  if (v === null) return "null";
  if (v === false) return "false";
  if (v === true) return "true";
  if (typeof v === "number") return "number";
  if (typeof v === "string") return "string";
  return Array.isArray(v) ? "array" : "object";
}

function tagOf(kind: Kind, o: Order): string {
  return o.tags[o.kinds.indexOf(kind)];
}

/** The collation a row's encoding was made for, or null when it is not an encoded value. */
export function collationOf(s: string): Collation | null {
  if (s.length === 0) return null;
  for (const c of ["typed", "pouch", "raw"] as const) if (ORDERS[c].tags.includes(s[0])) return c;
  return null;
}

/** Strings in the order of `o` (by code point, or by UTF-16 code unit). */
function compareStrings(a: string, b: string, o: Order): number {
  return o.utf16 ? (a < b ? -1 : a > b ? 1 : 0) : compareKeys(a, b);
}

/** A string (or docid) as the text its encoding orders by (see {@linkcode Order.utf16}). */
function toText(s: string, o: Order): string {
  return o.utf16 ? keyOfId(s, "utf16") : s;
}

function fromText(s: string, o: Order): string {
  return o.utf16 ? idOfKey(s, "utf16") : s;
}

/** The view collation `c` (module comment): negative, zero or positive. */
export function compareJson(a: Json, b: Json, c: Collation = "typed"): number {
  const o = ORDERS[c];
  const ta = o.kinds.indexOf(kindOf(a));
  const tb = o.kinds.indexOf(kindOf(b));
  if (ta !== tb) return ta - tb;
  if (typeof a === "number") return a === b ? 0 : a < (b as number) ? -1 : 1;
  if (typeof a === "string") return compareStrings(a, b as string, o);
  if (Array.isArray(a)) {
    const bb = b as Json[];
    for (let i = 0; i < Math.min(a.length, bb.length); i++) {
      const r = compareJson(a[i], bb[i], c);
      if (r !== 0) return r;
    }
    return a.length - bb.length;
  }
  if (a === null || typeof a === "boolean") return 0;
  const ea = Object.entries(a as Record<string, Json>);
  const eb = Object.entries(b as Record<string, Json>);
  for (let i = 0; i < Math.min(ea.length, eb.length); i++) {
    const r = compareStrings(ea[i][0], eb[i][0], o) || compareJson(ea[i][1], eb[i][1], c);
    if (r !== 0) return r;
  }
  return ea.length - eb.length;
}

/** Row order under collation `c`: by key, then by docid, then by `dup`. */
export function compareViewRows(a: ViewRowKey, b: ViewRowKey, c: Collation = "typed"): number {
  return compareJson(a.key, b.key, c) || compareStrings(a.docid, b.docid, ORDERS[c]) ||
    (a.dup ?? 0) - (b.dup ?? 0);
}

function encodeString(raw: string, o: Order): string {
  const s = toText(raw, o);
  return tagOf("string", o) + s.replaceAll(ESC, ESC + "\u0002").replaceAll(TERM, ESC + ESC) + TERM;
}

/** The order-preserving (under collation `c`), prefix-free encoding of a JSON value. */
export function encodeJson(v: Json, c: Collation = "typed"): string {
  const o = ORDERS[c];
  const kind = kindOf(v);
  const tag = tagOf(kind, o);
  if (kind === "number") {
    if (!Number.isFinite(v)) throw new RangeError(`view keys are JSON: ${v} is not`);
    return tag + hex(numberCode(v as number));
  }
  if (kind === "string") return encodeString(v as string, o);
  if (kind === "array") return tag + (v as Json[]).map((x) => encodeJson(x, c)).join("") + TERM;
  if (kind === "object") {
    const pairs = Object.entries(v as Record<string, Json>).map(([k, x]) =>
      encodeString(k, o) + encodeJson(x, c)
    );
    return tag + pairs.join("") + TERM;
  }
  return tag;
}

/**
 * A row as one string key: the key's encoding, then the docid as is, then for a repeated row
 * (`dup` > 0) U+0000 and `dup` in eight hex digits, so that the repeats of a pair sort right after
 * its first row. A docid holding U+0000 would be ambiguous: it is refused.
 *
 * @throws RangeError for a docid holding U+0000, a `dup` out of range, or a key that is not JSON
 */
export function encodeViewRow(row: ViewRowKey, c: Collation = "typed"): string {
  if (row.docid.includes(TERM)) throw new RangeError("a view row's docid holds U+0000");
  const dup = row.dup ?? 0;
  if (!Number.isInteger(dup) || dup < 0 || dup > MAX_DUP) {
    throw new RangeError(`a view row's dup ordinal is out of range: ${dup}`);
  }
  const tail = dup === 0 ? "" : TERM + dup.toString(16).padStart(8, "0");
  return encodeJson(row.key, c) + toText(row.docid, ORDERS[c]) + tail;
}

/**
 * The row a string made by {@linkcode encodeViewRow} stands for, under either collation (its tags
 * tell which). @throws RangeError otherwise.
 */
export function decodeViewRow(s: string): ViewRowKey {
  const c = collationOf(s);
  const r = c === null ? null : ceilViewRow(s, c);
  if (r === null || encodeViewRow(r, c!) !== s) throw new RangeError("not an encoded view row");
  return r;
}

/**
 * The least row of collation `c` whose encoding is at or above `s` (any string), or null when `s`
 * is above every row. For an encoded row of that collation, that row itself.
 */
export function ceilViewRow(s: string, c: Collation = "typed"): ViewRowKey | null {
  const o = ORDERS[c];
  const r = parseValue(s, 0, o);
  if (r.kind === "over") return null;
  if (r.kind === "above") return { key: r.value, docid: "" };
  const rest = s.slice(r.next);
  const cut = rest.indexOf(TERM);
  if (cut < 0) return { key: r.value, docid: fromText(rest, o) };
  // A repeat of the pair `(key, docid)`, or a string between repeats: the least repeat at or above
  // it; past the last possible one, the least docid above every docid + U+0000 (none exist).
  const docid = rest.slice(0, cut);
  const dup = leastDup(rest.slice(cut + 1));
  return dup === null
    ? { key: r.value, docid: fromText(docid + ESC, o) }
    : { key: r.value, docid: fromText(docid, o), dup };
}

/** The least `dup` (1 and up) whose eight hex digits are at or above `t`, or null: none is. */
function leastDup(t: string): number | null {
  let v = 0;
  for (let j = 0; j < 8; j++) {
    const d = t[j] === undefined ? -1 : HEX.indexOf(t[j]);
    if (d >= 0) {
      v = v * 16 + d;
      continue;
    }
    const c = t[j];
    // The rest at its least; between '9' and 'a': 'a' then zeros; above 'f': carry.
    if (c === undefined || c < "0") return Math.max(1, v * 16 ** (8 - j));
    if (c < "a") return (v * 16 + 10) * 16 ** (7 - j);
    const next = (v + 1) * 16 ** (8 - j);
    return next > MAX_DUP ? null : next;
  }
  const at = t.length > 8 ? v + 1 : v;
  return at > MAX_DUP ? null : Math.max(1, at);
}

/** The least value of the type after `kind` in `o`, or undefined after the last. */
function nextTypeLeast(kind: Kind, o: Order): Json | undefined {
  const next = o.kinds[o.kinds.indexOf(kind) + 1];
  return next === undefined ? undefined : LEAST[next];
}

function parseValue(s: string, i: number, o: Order): Parsed {
  const least = LEAST[o.kinds[0]];
  if (i >= s.length) return { kind: "above", value: least };
  const t = s[i];
  const ti = o.tags.indexOf(t);
  if (ti < 0) return t < o.tags[0] ? { kind: "above", value: least } : { kind: "over" };
  const kind = o.kinds[ti];
  let r: Parsed;
  if (kind === "null" || kind === "false" || kind === "true") {
    r = { kind: "exact", value: LEAST[kind], next: i + 1 };
  } else if (kind === "number") r = parseNumber(s, i + 1);
  else if (kind === "string") {
    r = parseString(s, i + 1);
    if (r.kind !== "over") r = { ...r, value: fromText(r.value as string, o) };
  } else if (kind === "array") r = parseArray(s, i + 1, o);
  else r = parseObject(s, i + 1, o);
  if (r.kind !== "over") return r;
  // Nothing of this type is at or above the rest: the first value of the next type is.
  const next = nextTypeLeast(kind, o);
  return next === undefined ? { kind: "over" } : { kind: "above", value: next };
}

function parseString(s: string, i: number): Parsed {
  let out = "";
  for (let j = i;; j++) {
    const c = s[j];
    if (c === undefined) return { kind: "above", value: out };
    if (c === TERM) return { kind: "exact", value: out, next: j + 1 };
    if (c !== ESC) {
      const cp = s.codePointAt(j)!;
      out += String.fromCodePoint(cp);
      if (cp > 0xffff) j++;
      continue;
    }
    const d = s[j + 1];
    if (d === undefined || d === TERM) return { kind: "above", value: out + TERM };
    if (d === ESC) out += TERM;
    else if (d === "\u0002") out += ESC;
    else return { kind: "above", value: out + "\u0002" }; // no escape is higher: next plain char
    j++;
  }
}

function parseArray(s: string, i: number, o: Order): Parsed {
  const items: Json[] = [];
  for (let j = i;;) {
    if (j >= s.length) return { kind: "above", value: items };
    if (s[j] === TERM) return { kind: "exact", value: items, next: j + 1 };
    const r = parseValue(s, j, o);
    if (r.kind === "exact") {
      items.push(r.value);
      j = r.next;
    } else if (r.kind === "above") {
      return { kind: "above", value: [...items, r.value] };
    } else {
      // No element is high enough here: the previous one moves up to its successor.
      if (items.length === 0) return { kind: "over" };
      return { kind: "above", value: [...items.slice(0, -1), successor(items.at(-1)!, o)] };
    }
  }
}

function parseObject(s: string, i: number, o: Order): Parsed {
  const pairs: [string, Json][] = [];
  const least = LEAST[o.kinds[0]];
  const stringTag = tagOf("string", o);
  const obj = (extra: [string, Json][] = []) => Object.fromEntries([...pairs, ...extra]);
  for (let j = i;;) {
    if (j >= s.length) return { kind: "above", value: obj() };
    if (s[j] === TERM) return { kind: "exact", value: obj(), next: j + 1 };
    const k = s[j] < stringTag ? { kind: "above" as const, value: "" } : parseValue(s, j, o);
    if (k.kind === "over" || typeof k.value !== "string") {
      // Keys are strings: past them, the previous pair's value moves up.
      if (pairs.length === 0) return { kind: "over" };
      const [lk, lv] = pairs.pop()!;
      return { kind: "above", value: obj([[lk, successor(lv, o)]]) };
    }
    // Index-like keys are not supported (module comment): the least key above one is its + NUL.
    if (k.kind === "above" || isIndexKey(k.value)) {
      const key = isIndexKey(k.value) ? k.value + TERM : k.value;
      return { kind: "above", value: obj([[key, least]]) };
    }
    const v = parseValue(s, k.next, o);
    if (v.kind === "exact") {
      pairs.push([k.value as string, v.value]);
      j = v.next;
    } else if (v.kind === "above") {
      return { kind: "above", value: obj([[k.value as string, v.value]]) };
    } else {
      return { kind: "above", value: obj([[(k.value as string) + TERM, least]]) };
    }
  }
}

/** True for keys JavaScript orders first in an object (array indices). */
export function isIndexKey(k: string): boolean {
  return /^(0|[1-9]\d{0,9})$/.test(k) && Number(k) < 2 ** 32 - 1;
}

/** The least value whose encoding is above `v`'s and does not start with it, under `o`. */
function successor(v: Json, o: Order): Json {
  const kind = kindOf(v);
  const least = LEAST[o.kinds[0]];
  // Past the last value of a type: the first of the next (every type has one after it here,
  // since a value of the last type always has a successor of its own type).
  const after = () => nextTypeLeast(kind, o)!;
  if (kind === "null" || kind === "false" || kind === "true") return after();
  if (typeof v === "number") {
    if (v === Number.MAX_VALUE) return after();
    const r = numberAt(numberCode(v) + 1n, true, 0);
    return r.kind === "over" ? after() : (r as { value: Json }).value;
  }
  if (typeof v === "string") return v + TERM;
  if (Array.isArray(v)) return [...v, least];
  // An object: one more pair; the least key not already used (objects cannot repeat keys).
  let k = "";
  while (k in (v as Record<string, Json>)) k += TERM;
  return { ...(v as Record<string, Json>), [k]: least };
}
