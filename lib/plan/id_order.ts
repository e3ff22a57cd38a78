/**
 * Registries that order ids by UTF-16 code unit (pouchdb-server; JavaScript's `<`) instead of by
 * code point (CouchDB: UTF-8 bytes). The two differ only where characters U+E000..U+FFFF meet
 * astral ones (U+10000 and up): by UTF-16 units the astral ones come first.
 *
 * Everything in rankcrawl orders keys by code point (`compareKeys` in `keys.ts`), so such a registry's
 * ids are carried as keys made by {@linkcode keyOfId}, a bijection whose code point order is the
 * ids' UTF-16 order: astral characters move down by 0x2000 (to U+E000..U+10DFFF), and U+E000..
 * U+FFFF move up to U+10E000..U+10FFFF. Ids made only of characters below U+D800, almost all,
 * are their own keys. The source maps ids to keys as rows come in and keys to ids as requests go
 * out; the crawl records the order so that exports and pages show ids.
 *
 * @module
 */
/** How a registry orders its ids: by code point (CouchDB) or by UTF-16 code unit (pouchdb). */
export type IdOrder = "codepoint" | "utf16";

const ASTRAL = 0x10000;
const PRIVATE_HIGH = 0xe000;
const SHIFT_DOWN = 0x2000;
const SHIFT_UP = 0x100000;

/**
 * The key of `id` under `order` (the id itself by code point).
 *
 * @example
 * ```ts
 * const key = keyOfId("\u{1F600}", "utf16"); // sorts by code point where pouchdb's id sorts
 * idOfKey(key, "utf16"); // "\u{1F600}" again
 * ```
 */
export function keyOfId(id: string, order: IdOrder = "codepoint"): string {
  if (order === "codepoint" || !/[\ud800-\udfff\ue000-\uffff]/.test(id)) return id;
  let out = "";
  for (const ch of id) {
    const cp = ch.codePointAt(0)!;
    if (cp >= ASTRAL) out += String.fromCodePoint(cp - SHIFT_DOWN);
    else if (cp >= PRIVATE_HIGH) out += String.fromCodePoint(cp + SHIFT_UP);
    else out += ch; // a lone surrogate stays: no order puts it anywhere certain
  }
  return out;
}

/**
 * The id of a key made by {@linkcode keyOfId} (or any string: the inverse is total).
 *
 * @example
 * ```ts
 * idOfKey(keyOfId("caf\uE000", "utf16"), "utf16"); // "caf\uE000"
 * ```
 */
export function idOfKey(key: string, order: IdOrder = "codepoint"): string {
  if (order === "codepoint" || !/[\ue000-\uffff\ud800-\udfff]/.test(key)) return key;
  let out = "";
  for (const ch of key) {
    const cp = ch.codePointAt(0)!;
    if (cp >= PRIVATE_HIGH + SHIFT_UP) out += String.fromCodePoint(cp - SHIFT_UP);
    else if (cp >= PRIVATE_HIGH) out += String.fromCodePoint(cp + SHIFT_DOWN);
    else out += ch;
  }
  return out;
}
