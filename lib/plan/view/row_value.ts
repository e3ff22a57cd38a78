/**
 * A view row's value, however large. A row's value is its revision (`Row.rev`: what tells a
 * changed row from the same one) and is stored with the row's key; past `VALUE_REV_CHARS` its
 * JSON would not fit a KV value (64 KiB), so the revision is then the value's digest
 * (`#` and the SHA-256 of its JSON: no JSON text starts with `#`) and the value itself travels with
 * the row (`Row.value`) and is stored like a document, in chunks: its JSON, then, when the row's
 * document was fetched too, a line break and the document's JSON (neither holds a raw line break).
 *
 * @module
 */
import { createHash } from "node:crypto";

/** Longest value JSON kept as a row's revision, in UTF-16 units; longer ones are digested. */
export const VALUE_REV_CHARS = 4096;

/** A row's revision for its value's JSON, and the JSON itself when the revision is its digest. */
export function valueRev(json: string): { rev: string; value?: string } {
  if (json.length <= VALUE_REV_CHARS) return { rev: json };
  return { rev: `#${createHash("sha256").update(json).digest("hex")}`, value: json };
}

/** True for a revision that is a value's digest: the value is stored in the item's chunks. */
export function isValueDigest(rev: string): boolean {
  return rev.startsWith("#");
}

const enc = new TextEncoder();
const NEWLINE = 0x0a;

/** The bytes stored for a row with a large value: its JSON, then a line break and the document. */
export function valueBlob(value: string, doc?: Uint8Array | string): Uint8Array {
  const v = enc.encode(value);
  if (doc === undefined) return v;
  const d = typeof doc === "string" ? enc.encode(doc) : doc;
  const out = new Uint8Array(v.length + 1 + d.length);
  out.set(v, 0);
  out[v.length] = NEWLINE;
  out.set(d, v.length + 1);
  return out;
}

/** A stored blob's value JSON and document JSON (undefined when none was stored with it). */
export function splitValueBlob(text: string): { value: string; doc?: string } {
  const at = text.indexOf("\n");
  return at < 0 ? { value: text } : { value: text.slice(0, at), doc: text.slice(at + 1) };
}
