/**
 * The bytes of one item block (see `item_blocks.ts` for how rows are cut into blocks).
 *
 * - Keys only: `[2, id, rev, id, rev, …]`, a JSON array (JSON keeps every UTF-16 string exactly,
 *   lone surrogates too).
 * - With documents (layout 3): `[4, id, rev, doc, id, rev, doc, …]` where each `doc` is the
 *   document's JSON text itself (or `null`), not a JSON string holding it: a document is stored
 *   and exported as the bytes it came as, without escaping every quote on the way in and
 *   unescaping it on the way out.
 * - Layout 2 wrote documents as JSON strings, `[3, id, rev, "{…}", …]`: no longer read (such a
 *   crawl is refused as a whole, `checkItemLayout`).
 *
 * Blocks of strides 2 and 4 are read by a scan of their bytes that finds each string's and each
 * document's end (a quote byte ends a string unless a backslash escapes it; brackets outside
 * strings nest; a quote, backslash or bracket byte never occurs inside a UTF-8 sequence), so that
 * an export copies each row's NDJSON line out of its block without decoding it.
 *
 * @module
 */
import { oneLine } from "../../sources/answers/mod.ts";

/** One row of a block: an id, its revision and its document's JSON text when fetched. */
export interface BlockRow {
  /** The item's id. */
  id: string;
  /** Its revision (for view rows, the value's JSON). */
  rev: string;
  /** The document's JSON text, when documents are fetched. */
  doc?: string;
}

const KEYS_STRIDE = 2;
const RAW_DOC_STRIDE = 4;
const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, OPEN_ARR = 0x5b, CLOSE_ARR = 0x5d;
const OPEN_OBJ = 0x7b, CLOSE_OBJ = 0x7d, LETTER_N = 0x6e, DIGIT_0 = 0x30;
const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Encodes rows as one block value: keys only, or with raw documents when any row has one. Each
 * `doc` must be one JSON value, as every document the sources hand over is (checked JSON, or
 * JSON.stringify's); line breaks between its tokens are dropped so that it stays one NDJSON value.
 */
export function encodeBlock(rows: readonly BlockRow[]): Uint8Array {
  if (!rows.some((r) => r.doc !== undefined)) {
    const flat: (string | number)[] = new Array(1 + rows.length * 2);
    flat[0] = KEYS_STRIDE;
    for (let i = 0, at = 1; i < rows.length; i++, at += 2) {
      flat[at] = rows[i].id;
      flat[at + 1] = rows[i].rev;
    }
    return enc.encode(JSON.stringify(flat));
  }
  let text = `[${RAW_DOC_STRIDE}`;
  for (const r of rows) {
    text += `,${JSON.stringify(r.id)},${JSON.stringify(r.rev)},` +
      (r.doc === undefined ? "null" : oneLine(r.doc));
  }
  return enc.encode(text + "]");
}

/**
 * Decodes a block value; with `docs: false`, ids and revisions only (documents are skipped, not
 * decoded: what counts and samples need). @throws RangeError for bytes that are not a block.
 */
export function decodeBlock(value: Uint8Array, o: { docs?: boolean } = {}): BlockRow[] {
  const docs = o.docs ?? true;
  const m = rowMarks(value);
  const out: BlockRow[] = new Array(m.length / 6);
  for (let r = 0, k = 0; k < m.length; r++, k += 6) {
    const row: BlockRow = {
      id: stringAt(value, m[k], m[k + 1]),
      rev: stringAt(value, m[k + 2], m[k + 3]),
    };
    if (docs && m[k + 4] >= 0) row.doc = dec.decode(value.subarray(m[k + 4], m[k + 5]));
    out[r] = row;
  }
  return out;
}

const LINE_ID = enc.encode('{"id":');
const LINE_REV = enc.encode(',"rev":');
const LINE_DOC = enc.encode(',"doc":');
const LINE_END = enc.encode("}\n");

/**
 * A block's rows as NDJSON lines (`{"id":…,"rev":…}`, with `"doc":…` where the row has one), copied
 * byte for byte out of the block (the same serializer wrote its strings), without decoding
 * anything. @throws RangeError for bytes that are not a block.
 */
export function blockNdjson(value: Uint8Array): { bytes: Uint8Array; rows: number } {
  if (value[1] === DIGIT_0 + KEYS_STRIDE && value[0] === OPEN_ARR) return keysNdjson(value);
  const m = rowMarks(value);
  let size = 0;
  for (let k = 0; k < m.length; k += 6) {
    size += LINE_ID.length + m[k + 1] - m[k] + LINE_REV.length + m[k + 3] - m[k + 2] +
      LINE_END.length + (m[k + 4] < 0 ? 0 : LINE_DOC.length + m[k + 5] - m[k + 4]);
  }
  const out = new Uint8Array(size);
  let at = 0;
  const put = (b: Uint8Array) => (out.set(b, at), at += b.length);
  for (let k = 0; k < m.length; k += 6) {
    put(LINE_ID);
    put(value.subarray(m[k], m[k + 1]));
    put(LINE_REV);
    put(value.subarray(m[k + 2], m[k + 3]));
    if (m[k + 4] >= 0) (put(LINE_DOC), put(value.subarray(m[k + 4], m[k + 5])));
    put(LINE_END);
  }
  return { bytes: out, rows: m.length / 6 };
}

/** Room for the lines of a keys-only block: 13 bytes more a row, a row at least 6 bytes long. */
let scratch = new Uint8Array(0);

/**
 * A keys-only block's lines in one pass over its bytes, written byte by byte: ids and revisions
 * are short, and a view and a call per piece cost more than the copying (1,000,000 names: 0.25 ->
 * 0.10 s of the export's CPU).
 */
function keysNdjson(b: Uint8Array): { bytes: Uint8Array; rows: number } {
  const n = b.length;
  const most = n + Math.ceil(n / 6) * 13;
  if (scratch.length < most) scratch = new Uint8Array(most);
  const out = scratch;
  let at = 0;
  let rows = 0;
  let i = 2;
  while (b[i] === COMMA) {
    if (b[i + 1] !== QUOTE) throw new RangeError("item block is malformed");
    // {"id":
    out[at] = OPEN_OBJ, out[at + 1] = QUOTE, out[at + 2] = 0x69, out[at + 3] = 0x64;
    out[at + 4] = QUOTE, out[at + 5] = 0x3a, at += 6;
    for (let part = 0; part < 2; part++) {
      if (part === 1) {
        if (b[i] !== COMMA || b[i + 1] !== QUOTE) throw new RangeError("item block is cut");
        // ,"rev":
        out[at] = COMMA, out[at + 1] = QUOTE, out[at + 2] = 0x72, out[at + 3] = 0x65;
        out[at + 4] = 0x76, out[at + 5] = QUOTE, out[at + 6] = 0x3a, at += 7;
      }
      let j = i + 1; // the opening quote
      out[at++] = QUOTE;
      for (j++;;) {
        if (j >= n) throw new RangeError("item block is cut");
        const c = b[j++];
        out[at++] = c;
        if (c === BACKSLASH) out[at++] = b[j++];
        else if (c === QUOTE) break;
      }
      i = j;
    }
    out[at] = CLOSE_OBJ, out[at + 1] = 0x0a, at += 2;
    rows++;
  }
  if (b[i] !== CLOSE_ARR || i !== n - 1) throw new RangeError("item block is cut");
  return { bytes: out.slice(0, at), rows };
}

/**
 * Where each row's parts lie in a block of stride 2 or 4: per row, six offsets, `[from, to)` of
 * the id's and the revision's JSON strings (quotes included) and of the document (-1 for none).
 */
function rowMarks(b: Uint8Array): number[] {
  const stride = b[1] - DIGIT_0;
  if (b[0] !== OPEN_ARR || (stride !== KEYS_STRIDE && stride !== RAW_DOC_STRIDE)) {
    throw new RangeError("item block is malformed");
  }
  const marks: number[] = [];
  let i = 2;
  while (b[i] === COMMA) {
    const id = i + 1;
    if (b[id] !== QUOTE) throw new RangeError("item block is malformed");
    const idEnd = stringEnd(b, id);
    if (b[idEnd] !== COMMA || b[idEnd + 1] !== QUOTE) throw new RangeError("item block is cut");
    const revEnd = stringEnd(b, idEnd + 1);
    if (stride === KEYS_STRIDE) {
      marks.push(id, idEnd, idEnd + 1, revEnd, -1, revEnd);
      i = revEnd;
      continue;
    }
    if (b[revEnd] !== COMMA) throw new RangeError("item block is cut");
    const doc = revEnd + 1;
    const end = docEnd(b, doc);
    marks.push(id, idEnd, idEnd + 1, revEnd, b[doc] === LETTER_N ? -1 : doc, end);
    i = end;
  }
  if (b[i] !== CLOSE_ARR || i !== b.length - 1) throw new RangeError("item block is cut");
  return marks;
}

/** The end (exclusive) of the JSON string whose opening quote is at `from`. */
function stringEnd(b: Uint8Array, from: number): number {
  for (let i = from + 1; i < b.length; i++) {
    const c = b[i];
    if (c === BACKSLASH) i++; // the escaped byte is never the end
    else if (c === QUOTE) return i + 1;
  }
  throw new RangeError("item block is cut");
}

/** The end (exclusive) of the document at `from`: `null`, or a JSON object. */
function docEnd(b: Uint8Array, from: number): number {
  if (b[from] === LETTER_N) return from + 4;
  if (b[from] !== OPEN_OBJ) throw new RangeError("item block is malformed");
  let depth = 0;
  for (let i = from; i < b.length; i++) {
    const c = b[i];
    if (c === QUOTE) i = stringEnd(b, i) - 1;
    else if (c === OPEN_OBJ || c === OPEN_ARR) depth++;
    else if ((c === CLOSE_OBJ || c === CLOSE_ARR) && --depth === 0) return i + 1;
  }
  throw new RangeError("item block is cut");
}

/** A JSON string's value from its bytes (quotes included). */
function stringAt(b: Uint8Array, from: number, to: number): string {
  const inner = b.subarray(from + 1, to - 1);
  return inner.includes(BACKSLASH)
    ? JSON.parse(dec.decode(b.subarray(from, to)))
    : dec.decode(inner);
}
