/**
 * How an item is stored: the KV key part of its id, and its record as compact bytes.
 *
 * Key part. A KV string key part is stored as UTF-8, so two ids that differ only in lone
 * surrogates (`"s\ud800"`, `"s\ud801"`: valid JSON escapes a registry can send) would become the
 * same key. The key part is therefore the id itself only when it is well-formed UTF-16 and short
 * enough for a KV key; otherwise it is bytes: tag 0 followed by the id's UTF-16 code units (exact,
 * for short ill-formed ids), or tag 1 followed by its first code units and a SHA-256 of all of
 * them (for ids too long for a key). Strings and byte strings are different KV key types and the
 * tags differ, so no id's key part can equal another's (short of a SHA-256 collision); export
 * reads the exact id back from the record whenever the key part is not the id.
 *
 * Record. A `Uint8Array` (stored raw, the cheapest value KV has): a flags byte, the revision, then
 * only the fields the item has. A keys-only item is 2 bytes plus its revision.
 *
 * @module
 */

/** Key parts of ids no longer than this (encoded, with NUL escapes) are the id itself. */
export const MAX_PLAIN_ID_KEY_BYTES = 1_900;
/** UTF-16 code units of a long id kept at the front of its hashed key part. */
const HASHED_PREFIX_UNITS = 400;

const enc = new TextEncoder();
const dec = new TextDecoder();

/** True when `s` has no lone surrogate (so UTF-8 represents it exactly). */
export function isWellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return false;
  }
  return true;
}

function plainKeyBytes(id: string): number {
  let n = 0;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    n += c === 0 ? 2 : c < 0x80 ? 1 : c < 0x800 ? 2 : c >= 0xd800 && c <= 0xdfff ? 2 : 3;
  }
  return n;
}

function units(id: string, count = id.length): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(2 * count);
  for (let i = 0; i < count; i++) {
    const c = id.charCodeAt(i);
    out[2 * i] = c >> 8;
    out[2 * i + 1] = c & 0xff;
  }
  return out;
}

/** True when the id is stored under a byte-string key part (so its record carries the id). */
export function needsBytesKey(id: string): boolean {
  return plainKeyBytes(id) > MAX_PLAIN_ID_KEY_BYTES || !isWellFormed(id);
}

/**
 * The encoded size of the id as a plain string key part, or -1 when its key part must be bytes
 * (see {@linkcode idKeyPart}); one pass over the id, for the hot path.
 */
export function plainPartSize(id: string): number {
  let n = 2;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    if (c < 0x80) n += c === 0 ? 2 : 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff) {
      const d = id.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return -1;
      n += 4;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) return -1;
    else n += 3;
  }
  return n - 2 > MAX_PLAIN_ID_KEY_BYTES ? -1 : n;
}

/** The record of a keys-only item whose key part is its id: a flags byte, then the revision. */
export function encodeRevOnly(rev: string): Uint8Array | null {
  if (rev.length > 127) return null;
  const out = new Uint8Array(2 + rev.length);
  out[1] = rev.length;
  for (let i = 0; i < rev.length; i++) {
    const c = rev.charCodeAt(i);
    if (c > 0x7f) return null;
    out[2 + i] = c;
  }
  return out;
}

/**
 * The KV key part of an item id (see the module comment). Injective over all strings, up to a
 * SHA-256 collision between two ids longer than ~1,900 bytes.
 */
export async function idKeyPart(id: string): Promise<string | Uint8Array> {
  if (!needsBytesKey(id)) return id;
  if (2 * id.length + 1 <= MAX_PLAIN_ID_KEY_BYTES / 2) {
    const u = units(id);
    const out = new Uint8Array(1 + u.length);
    out.set(u, 1); // tag 0
    return out;
  }
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", units(id) as BufferSource));
  const head = units(id, Math.min(id.length, HASHED_PREFIX_UNITS));
  const out = new Uint8Array(1 + head.length + digest.length);
  out[0] = 1;
  out.set(head, 1);
  out.set(digest, 1 + head.length);
  return out;
}

/** What an item record holds. */
export interface ItemRecord {
  /** The item's revision. */
  rev: string;
  /** The id, kept only when the key part is not the id itself. */
  id?: string;
  /** The whole id's length in UTF-16 units, when `id` holds only its start (too long to keep). */
  idLength?: number;
  /** The document's JSON text as UTF-8, when stored inline. */
  doc?: Uint8Array;
  /** Size of the fetched document in bytes (inline, chunked or too large). */
  docBytes?: number;
  /** Chunks under the item's chunk keys holding the document. */
  chunks?: number;
  /** The document was over the size limit: recorded, not stored. */
  tooLarge?: boolean;
  /** Why the document could not be had. */
  error?: { status: number; reason: string };
  /**
   * The document is pending, not an error: its host served an older revision than the item's
   * (or none yet), and it is asked again (`pending_docs.ts`); `error` says what it answered.
   */
  pending?: true;
}

const HAS_ID = 1;
const DOC_INLINE = 2;
const CHUNKED = 4;
const TOO_LARGE = 8;
const ERROR = 16;
const DOC_SIZE = 32;
const ID_CUT = 64;
const PENDING = 128;

class Writer {
  bytes: Uint8Array;
  at = 0;
  constructor(size: number) {
    this.bytes = new Uint8Array(size);
  }
  varint(n: number): void {
    while (n >= 0x80) {
      this.bytes[this.at++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    this.bytes[this.at++] = n;
  }
  text(s: string): void {
    const b = enc.encode(s);
    this.varint(b.length);
    this.raw(b);
  }
  raw(b: Uint8Array): void {
    this.bytes.set(b, this.at);
    this.at += b.length;
  }
}

class Reader {
  at = 0;
  constructor(readonly bytes: Uint8Array) {}
  varint(): number {
    let n = 0;
    let scale = 1;
    for (;;) {
      const b = this.bytes[this.at++];
      if (b === undefined) throw new RangeError("item record is cut short");
      n += (b & 0x7f) * scale;
      if (b < 0x80) return n;
      scale *= 128;
    }
  }
  text(): string {
    const n = this.varint();
    const s = ascii(this.bytes, this.at, n) ??
      dec.decode(this.bytes.subarray(this.at, this.at + n));
    this.at += n;
    return s;
  }
}

/** Decodes short ASCII without TextDecoder (revisions are ASCII); null when not ASCII. */
function ascii(b: Uint8Array, from: number, n: number): string | null {
  if (n > 64) return null;
  let s = "";
  for (let i = from; i < from + n; i++) {
    if (b[i] > 0x7f) return null;
    s += String.fromCharCode(b[i]);
  }
  return s;
}

/** The record as bytes. */
export function encodeItem(r: ItemRecord): Uint8Array {
  const idUnits = r.id === undefined ? null : units(r.id);
  const reason = r.error ? enc.encode(r.error.reason) : null;
  const size = 1 + 5 + 3 * r.rev.length + (idUnits ? 5 + idUnits.length : 0) + 15 +
    (reason ? 10 + reason.length : 0) + (r.doc?.length ?? 0);
  const w = new Writer(size);
  const flags = (r.id !== undefined ? HAS_ID : 0) | (r.doc ? DOC_INLINE : 0) |
    (r.chunks ? CHUNKED : 0) | (r.tooLarge ? TOO_LARGE : 0) | (r.error ? ERROR : 0) |
    (r.docBytes !== undefined ? DOC_SIZE : 0) | (r.idLength !== undefined ? ID_CUT : 0) |
    (r.pending && r.error ? PENDING : 0);
  w.bytes[w.at++] = flags;
  w.text(r.rev);
  if (idUnits) {
    w.varint(idUnits.length / 2);
    w.raw(idUnits);
  }
  if (r.idLength !== undefined) w.varint(r.idLength);
  if (r.docBytes !== undefined) w.varint(r.docBytes);
  if (r.chunks) w.varint(r.chunks);
  if (r.error) {
    w.varint(r.error.status);
    w.varint(reason!.length);
    w.raw(reason!);
  }
  if (r.doc) w.raw(r.doc);
  // The exact length, so that KV stores no slack (a subarray would carry its whole buffer).
  return w.at === w.bytes.length ? w.bytes : w.bytes.slice(0, w.at);
}

/** The record back from bytes. @throws RangeError for bytes that are not a record. */
export function decodeItem(bytes: Uint8Array): ItemRecord {
  const r = new Reader(bytes);
  const flags = bytes[r.at++];
  const out: ItemRecord = { rev: r.text() };
  if (flags & HAS_ID) {
    const n = r.varint();
    let id = "";
    for (let i = 0; i < n; i++) {
      id += String.fromCharCode((bytes[r.at] << 8) | bytes[r.at + 1]);
      r.at += 2;
    }
    out.id = id;
  }
  if (flags & ID_CUT) out.idLength = r.varint();
  if (flags & DOC_SIZE) out.docBytes = r.varint();
  if (flags & CHUNKED) out.chunks = r.varint();
  if (flags & TOO_LARGE) out.tooLarge = true;
  if (flags & ERROR) {
    const status = r.varint();
    const n = r.varint();
    out.error = { status, reason: dec.decode(bytes.subarray(r.at, r.at + n)) };
    r.at += n;
    if (flags & PENDING) out.pending = true;
  }
  if (flags & DOC_INLINE) out.doc = bytes.subarray(r.at);
  if (r.at > bytes.length) throw new RangeError("item record is cut short");
  return out;
}
