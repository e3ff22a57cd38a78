/**
 * Reading a listing answer that carries documents (`include_docs`) without parsing the documents:
 * one scan of the answer's text finds each row's document, and only the rest (ids, keys, values,
 * counts: about a tenth of the bytes) goes through `JSON.parse`. Each document stays the text the
 * registry served, a slice of the answer, which is what the crawl stores and exports; parsing it
 * into objects and serialising it again cost a crawl with documents about a third of its CPU
 * (30,000 documents: 56 ms parsing, 23 ms re-serialising, and the collection of millions of
 * short-lived objects, on a process that waits on its CPU).
 *
 * What is checked: the answer outside the documents by `JSON.parse` (its shape, then by the
 * listing's own checks); each document's structure by the scan (it is one object, its strings and
 * brackets close where they should, as an answer cut on the way would not). Tokens inside a
 * document are not parsed again: they are the registry's own JSON, copied.
 *
 * @module
 */

/**
 * A document as a listing carried it: its JSON text on one line, and its top-level `_id` and
 * `_rev` as read by the scan (undefined when it has none or they are not strings).
 */
export class ListedDoc {
  /**
   * @param json The document's JSON text, one line.
   * @param id Its top-level `_id`, when a string.
   * @param rev Its top-level `_rev`, when a string.
   */
  constructor(
    readonly json: string,
    readonly id: string | undefined,
    readonly rev: string | undefined,
  ) {}
}

const QUOTE = 0x22, BACKSLASH = 0x5c, COMMA = 0x2c, CR = 0x0d, LF = 0x0a;
const OPEN_OBJ = 0x7b, CLOSE_OBJ = 0x7d, OPEN_ARR = 0x5b, CLOSE_ARR = 0x5d;
const OBJECT = 1, ARRAY = 2;
/** Depths the scan follows: the answer (1), `rows` (2), a row (3), a row's document (4). */
const ROWS = 2, ROW = 3, DOC = 4;

/** A row's document found by the scan: where it lies in the text and what it says of itself. */
interface Cut {
  row: number;
  start: number;
  end: number;
  lineBreaks: boolean;
  id: string | undefined;
  rev: string | undefined;
}

/**
 * Parses a listing answer's text as `JSON.parse` would, except that each row's document (a row's
 * `doc` member whose value is an object) is a {@linkcode ListedDoc} holding its text. Null when the
 * text is not a well-formed answer of that shape (not JSON, cut short, no object at the top): the
 * caller parses it plainly then, which says what is wrong with it.
 */
export function parseDocsListing(text: string): unknown {
  const cuts = cutDocs(text);
  if (cuts === null) return null;
  let body: unknown;
  try {
    body = JSON.parse(skeleton(text, cuts));
  } catch {
    return null;
  }
  if (cuts.length === 0) return body;
  const rows = (body as { rows?: unknown }).rows;
  if (!Array.isArray(rows)) return null;
  for (const c of cuts) {
    const row = rows[c.row];
    if (typeof row !== "object" || row === null) return null;
    const json = text.slice(c.start, c.end);
    // Line breaks can only be whitespace between tokens in JSON: dropping them keeps the value.
    row.doc = new ListedDoc(c.lineBreaks ? json.replace(/[\r\n]+/g, "") : json, c.id, c.rev);
  }
  return body;
}

/** The text with each cut document replaced by `0` (its row's `doc` is set after the parse). */
function skeleton(text: string, cuts: readonly Cut[]): string {
  if (cuts.length === 0) return text;
  const parts: string[] = [];
  let from = 0;
  for (const c of cuts) {
    parts.push(text.slice(from, c.start), "0");
    from = c.end;
  }
  parts.push(text.slice(from));
  return parts.join("");
}

/**
 * The documents of the answer's rows, in order, each the last `doc` member of its row (JSON.parse
 * keeps the last of repeated names). Null when the brackets and strings do not close, the answer
 * is not an object, or it names `rows` twice.
 */
function cutDocs(text: string): Cut[] | null {
  const kinds = [0, 0, 0, 0, 0];
  const expectKey = [false, false, false, false, false];
  const cuts: Cut[] = [];
  let depth = 0, topKey = "", rowKey = "", docKey = "", inRows = false, rowsSeen = false;
  let row = 0, doc: Cut | null = null, lastRow = -1;
  const n = text.length;
  let i = 0;
  while (i < n && text.charCodeAt(i) <= 0x20) i++;
  if (text.charCodeAt(i) !== OPEN_OBJ) return null;
  for (; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end < 0) return null;
      if (depth <= DOC && kinds[depth] === OBJECT && expectKey[depth]) {
        expectKey[depth] = false;
        const key = end - i < 12 ? name(text, i, end) : "";
        if (depth === 1) topKey = key;
        else if (depth === ROW && inRows) {
          rowKey = key;
          // A later `doc` member replaces an earlier one (as in JSON.parse): the earlier stays
          // in the text parsed, and its value is overwritten there.
          if (key === "doc" && lastRow === row) (cuts.pop(), lastRow = -1);
        } else if (depth === DOC && doc) docKey = key;
      } else if (depth === DOC && doc && (docKey === "_id" || docKey === "_rev")) {
        const value = name(text, i, end);
        if (docKey === "_id") doc.id = value;
        else doc.rev = value;
      }
      i = end;
      continue;
    }
    if (c === OPEN_OBJ || c === OPEN_ARR) {
      depth++;
      if (depth <= DOC) {
        kinds[depth] = c === OPEN_OBJ ? OBJECT : ARRAY;
        expectKey[depth] = c === OPEN_OBJ;
      }
      if (depth === ROWS && c === OPEN_ARR && topKey === "rows") {
        if (rowsSeen) return null;
        (rowsSeen = inRows = true, row = 0);
      } else if (depth === ROW) rowKey = ""; // a row starts: nothing named in it yet
      else if (depth === DOC && c === OPEN_OBJ && inRows && rowKey === "doc") {
        doc = { row, start: i, end: -1, lineBreaks: false, id: undefined, rev: undefined };
        docKey = "";
      }
    } else if (c === CLOSE_OBJ || c === CLOSE_ARR) {
      if (depth <= DOC && kinds[depth] !== (c === CLOSE_OBJ ? OBJECT : ARRAY)) return null;
      if (depth === DOC && doc) {
        doc.end = i + 1;
        cuts.push(doc);
        (lastRow = row, doc = null);
      } else if (depth === ROWS && inRows) inRows = false;
      depth--;
      if (depth === 0) return trailingSpace(text, i + 1) ? cuts : null;
    } else if (c === COMMA) {
      if (depth <= DOC && kinds[depth] === OBJECT) expectKey[depth] = true;
      if (depth === ROWS && inRows) row++;
    } else if ((c === CR || c === LF) && doc) doc.lineBreaks = true;
  }
  return null;
}

/** The index of the quote that ends the string opened at `open`; -1 when it never ends. */
function stringEnd(text: string, open: number): number {
  let j = open;
  for (;;) {
    j = text.indexOf('"', j + 1);
    if (j < 0) return -1;
    let slashes = 0;
    while (text.charCodeAt(j - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return j;
  }
}

/** The string between the quotes at `open` and `end`, unescaped. */
function name(text: string, open: number, end: number): string {
  const raw = text.slice(open + 1, end);
  if (!raw.includes("\\")) return raw;
  try {
    return JSON.parse(text.slice(open, end + 1));
  } catch {
    return "";
  }
}

/** True when nothing but whitespace follows `from`. */
function trailingSpace(text: string, from: number): boolean {
  for (let i = from; i < text.length; i++) if (text.charCodeAt(i) > 0x20) return false;
  return true;
}
