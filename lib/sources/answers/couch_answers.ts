/**
 * Checking what a CouchDB-like registry answers, strictly: a listing's shape and order against
 * what was asked, a document's body, `_bulk_get` results, `_changes`. Anything of the wrong shape
 * for a listing is a {@linkcode FatalError} naming the problem (never guessed around); a bad
 * document is that document's own error, recorded on its item.
 *
 * @module
 */
import { FatalError, TransientError } from "../../base/errors.ts";
import { compareKeys } from "../../plan/keys.ts";
import { ListedDoc } from "./docs_listing.ts";
import type { ChangeRow, DocResult, ListOptions, Page, Row } from "../../plan/source.ts";

const dec = new TextDecoder();

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A CouchDB error object answered with a 200 instead of the answer asked for (proxies and
 * overloaded clusters do this): a {@linkcode TransientError} naming it, asked again like a 5xx.
 * Anything else is returned unchanged.
 */
export function refuseErrorBody<T>(body: T, what: string, expected: string): T {
  if (isObject(body) && typeof body.error === "string" && !(expected in body)) {
    const reason = typeof body.reason === "string" ? `: ${body.reason.slice(0, 200)}` : "";
    throw new TransientError(`${what} answered an error instead: ${body.error}${reason}`, {
      status: 200,
    });
  }
  return body;
}

/**
 * The JSON text of a document on one line. Line breaks can only be whitespace between tokens in
 * JSON (inside strings they are escaped), so removing them keeps the same value, and the text can
 * be embedded in NDJSON whatever the server sent (pouchdb-server ends bodies with a newline; some
 * servers pretty-print).
 */
export function oneLine(text: string): string {
  const t = text.trim();
  return t.includes("\n") || t.includes("\r") ? t.replace(/[\r\n]+/g, "") : t;
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= 0;
}

/**
 * Parses a JSON answer: a body that is not JSON and looks like HTML (or says it is not JSON) is a
 * {@linkcode FatalError}; JSON cut short on the way is a {@linkcode TransientError} (retried).
 */
export function parseJsonAnswer(body: Uint8Array, type: string | null, what: string): unknown {
  const text = dec.decode(body);
  try {
    return JSON.parse(text);
  } catch (err) {
    if (!(type ?? "").includes("json") && /^\s*</.test(text)) {
      throw new FatalError(`${what} is not a CouchDB answer (got ${type || "non-JSON"})`);
    }
    throw new TransientError(`invalid JSON from ${what}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * A document's outcome from its body (status 2xx): a JSON object, or why it is not one. JSON that
 * does not parse under a JSON content type was most likely cut on the way: a
 * {@linkcode TransientError} (retried, and recorded only if it keeps happening). A body over
 * `rawOverBytes` (@default RAW_DOC_BYTES) is kept as bytes (`rawDocFromBody`).
 */
export function docFromBody(
  body: Uint8Array,
  type: string | null,
  expectedId?: string,
  options: { rawOverBytes?: number } = {},
): DocResult {
  if (body.length === 0) return { kind: "error", status: 200, reason: "empty body" };
  if (body.length > (options.rawOverBytes ?? RAW_DOC_BYTES) && /json/.test(type ?? "json")) {
    return rawDocFromBody(body, expectedId);
  }
  const text = dec.decode(body);
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    if ((type ?? "").includes("json") && !/^\s*</.test(text)) {
      throw new TransientError(`invalid JSON: ${(err as Error).message}`, { status: 200 });
    }
    const what = /^\s*</.test(text) ? "HTML" : (type || "non-JSON");
    return { kind: "error", status: 200, reason: `not JSON (got ${what})` };
  }
  if (!isObject(v)) {
    return { kind: "error", status: 200, reason: `not a JSON object (${jsonType(v)})` };
  }
  return checkedDoc(v, oneLine(text), expectedId);
}

/** Documents larger than this many bytes are checked and kept as bytes, never turned into text. */
export const RAW_DOC_BYTES = 1024 * 1024;

const QUOTE = 0x22, BACKSLASH = 0x5c, COLON = 0x3a, COMMA = 0x2c, CR = 0x0d, LF = 0x0a;
const OPEN_OBJ = 0x7b, CLOSE_OBJ = 0x7d, OPEN_ARR = 0x5b, CLOSE_ARR = 0x5d;

/**
 * A large document's outcome from its body, without turning it into text (a 25 MB body would be
 * held three or four times over as text, parsed object and re-encoded bytes): one pass over the
 * bytes checks that it is one JSON object whose strings and brackets all close (a body cut on the
 * way does not), reads its top-level `_id` and `_rev`, and drops line breaks between tokens (the
 * only place JSON allows raw ones) so that it stays one NDJSON value.
 */
export function rawDocFromBody(body: Uint8Array, expectedId?: string): DocResult {
  let depth = 0, inString = false, escaped = false, crlf = 0;
  let expectKey = false, keyStart = -1, key = "", valueFor = "", valueStart = -1;
  const fields: Record<string, string> = {};
  let first = -1, last = -1;
  for (let i = 0; i < body.length; i++) {
    const b = body[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (b === BACKSLASH) escaped = true;
      else if (b === QUOTE) {
        inString = false;
        if (keyStart >= 0) key = i - keyStart < 8 ? dec.decode(body.subarray(keyStart, i)) : "";
        if (valueStart >= 0 && i - valueStart < 4096) {
          fields[valueFor] = JSON.parse(dec.decode(body.subarray(valueStart - 1, i + 1)));
        }
        keyStart = valueStart = -1;
      }
      continue;
    }
    if (b === CR || b === LF) crlf++;
    if (b <= 0x20) continue;
    if (first < 0) first = b;
    last = b;
    if (b === QUOTE) {
      inString = true;
      if (depth === 1 && expectKey) (keyStart = i + 1, expectKey = false);
      else if (depth === 1 && (key === "_id" || key === "_rev")) {
        (valueStart = i + 1, valueFor = key);
      }
    } else if (b === OPEN_OBJ || b === OPEN_ARR) {
      depth++;
      if (depth === 1 && b === OPEN_OBJ) expectKey = true;
    } else if (b === CLOSE_OBJ || b === CLOSE_ARR) depth--;
    else if (b === COMMA && depth === 1) (expectKey = true, key = "");
    else if (b === COLON) continue;
    if (depth < 0) break;
  }
  if (first !== OPEN_OBJ || last !== CLOSE_OBJ || depth !== 0 || inString) {
    throw new TransientError("invalid JSON: a large document does not end where it should", {
      status: 200,
    });
  }
  const id = fields._id;
  const wrong = wrongDocument(id, expectedId);
  if (wrong) return wrong;
  const bytes = crlf === 0 ? body : body.filter((b) => b !== CR && b !== LF);
  return { kind: "raw", bytes, docRev: typeof fields._rev === "string" ? fields._rev : null };
}

/** The item's error when a body's `_id` names another document than `expectedId`, else null. */
function wrongDocument(id: unknown, expectedId: string | undefined): DocResult | null {
  if (expectedId === undefined || typeof id !== "string" || id === expectedId) return null;
  return {
    kind: "error",
    status: 200,
    reason: `the answer is the document of ${JSON.stringify(id.slice(0, 200))}, not this one`,
  };
}

/**
 * A parsed document as a result, unless its `_id` names another document than `expectedId`
 * (a cache or proxy answering the wrong document): then that is the item's error, never its
 * document. A document without `_id` cannot be checked and is taken.
 */
export function checkedDoc(
  doc: Record<string, unknown>,
  json: string,
  expectedId?: string,
): DocResult {
  const id = doc._id;
  const wrong = wrongDocument(id, expectedId);
  if (wrong) return wrong;
  return { kind: "doc", json, docRev: typeof doc._rev === "string" ? doc._rev : null };
}

/** A document as the listing carried it (its text, never parsed: `docs_listing.ts`) as a result. */
function listedDoc(doc: ListedDoc, expectedId?: string): DocResult {
  return wrongDocument(doc.id, expectedId) ??
    { kind: "doc", json: doc.json, docRev: doc.rev ?? null };
}

function jsonType(v: unknown): string {
  return Array.isArray(v) ? "an array" : v === null ? "null" : `a ${typeof v}`;
}

function checkRow(r: unknown, includeDocs: boolean, bad: (why: string) => Error): Row {
  if (!isObject(r) || typeof r.id !== "string" || r.key !== r.id) {
    throw bad("a row is not {id, key, value} with key === id");
  }
  const rev = isObject(r.value) ? r.value.rev : undefined;
  if (typeof rev !== "string") throw bad(`row ${JSON.stringify(r.id)} has no value.rev`);
  const row: Row = { id: r.id, rev };
  if (isObject(r.value) && typeof r.value.value === "string") row.value = r.value.value;
  if (includeDocs && r.doc !== undefined) {
    // A view row (reshaped by the view dialect) says which document it carries: the emitting one,
    // or null when its value links to another by `_id`.
    const docId = "docid" in r ? r.docid : r.id;
    const expected = typeof docId === "string" ? docId : undefined;
    row.doc = r.doc instanceof ListedDoc
      ? listedDoc(r.doc, expected)
      : isObject(r.doc)
      ? checkedDoc(r.doc, JSON.stringify(r.doc), expected)
      : { kind: "error", status: 200, reason: `no document in the listing (${jsonType(r.doc)})` };
  }
  return row;
}

/**
 * Validates a parsed `_all_docs` answer against what was asked: numbers are counts, `offset` is at
 * most `total_rows` (an absent or null `offset` is read as 0), rows are `{id, key, value: {rev}}`
 * with `id === key`, strictly ordered, within the requested bounds and no more than `limit`.
 * Anything else is a FatalError naming the problem.
 */
export function checkPage(body: unknown, options: ListOptions, description: string): Page {
  const bad = (why: string) => new FatalError(`${description} answered garbage: ${why}`);
  refuseErrorBody(body, description, "rows");
  if (!isObject(body)) throw bad("not a JSON object");
  if (!Array.isArray(body.rows)) throw bad("no rows array (not a CouchDB listing?)");
  if (!isCount(body.total_rows)) throw bad("total_rows is not a count");
  // A listing without `offset` (a replica that stopped serving it, a proxy, `keys` on CouchDB) is
  // read as one whose offset is always 0: not a rank, which the planner checks before trusting
  // any offset, so such a registry is planned and crawled without a rank oracle.
  if (body.offset === undefined || body.offset === null) body.offset = 0;
  if (!isCount(body.offset)) throw bad("offset is not a count");
  if (body.offset > body.total_rows) {
    throw bad(`offset ${body.offset} > total_rows ${body.total_rows}`);
  }
  if (body.rows.length > options.limit) throw bad(`more rows than limit ${options.limit}`);
  const desc = options.descending ?? false;
  const rows: Row[] = [];
  for (const r of body.rows as unknown[]) {
    const row = checkRow(r, options.includeDocs ?? false, bad);
    const prev = rows.at(-1);
    if (prev) {
      const c = compareKeys(prev.id, row.id);
      if (desc ? c <= 0 : c >= 0) {
        throw bad(`keys out of order: ${JSON.stringify(prev.id)} then ${JSON.stringify(row.id)}`);
      }
    }
    rows.push(row);
  }
  const first = rows[0]?.id;
  const last = rows.at(-1)?.id;
  const { start, end } = options;
  if (first !== undefined && start !== undefined && start !== null) {
    if (desc ? compareKeys(first, start) > 0 : compareKeys(first, start) < 0) {
      throw bad(`row ${JSON.stringify(first)} is outside the requested start`);
    }
  }
  if (last !== undefined && end !== undefined && end !== null) {
    if (desc ? compareKeys(last, end) <= 0 : compareKeys(last, end) >= 0) {
      throw bad(`row ${JSON.stringify(last)} is outside the requested end`);
    }
  }
  const seq = body.update_seq;
  return {
    offset: body.offset,
    total: body.total_rows,
    rows,
    ...(seq !== undefined && seq !== null ? { seq: String(seq) } : {}),
  };
}

/**
 * The documents of a `_bulk_get` answer, in the order of `ids`. An id the answer leaves out, or
 * answers with an error, gets that as its own error; a result for an id not asked is ignored (the
 * id asked stays without a document), and a document whose `_id` is not the id it is answered
 * for is that id's error.
 */
export function checkBulkGet(body: unknown, ids: string[], description: string): DocResult[] {
  refuseErrorBody(body, `${description}/_bulk_get`, "results");
  if (!isObject(body) || !Array.isArray(body.results)) {
    throw new FatalError(`${description}/_bulk_get answered garbage: no results array`);
  }
  const asked = new Set(ids);
  const byId = new Map<string, DocResult>();
  for (const r of body.results as unknown[]) {
    if (!isObject(r) || typeof r.id !== "string" || !Array.isArray(r.docs)) continue;
    if (!asked.has(r.id)) continue;
    const d = r.docs[0];
    if (isObject(d) && isObject(d.ok)) {
      byId.set(r.id, checkedDoc(d.ok, JSON.stringify(d.ok), r.id));
    } else if (isObject(d) && isObject(d.error)) {
      const e = d.error;
      const status = e.error === "not_found" ? 404 : 0;
      byId.set(r.id, { kind: "error", status, reason: String(e.reason ?? e.error ?? "error") });
    }
  }
  return ids.map((id) =>
    byId.get(id) ?? { kind: "error", status: 0, reason: "missing from the _bulk_get answer" }
  );
}

/**
 * The revisions of an `_all_docs` answer to `{"keys": ids}`, in the order of `ids`: null for an
 * id answered `not_found` or deleted.
 */
export function checkKeyRevs(body: unknown, ids: string[], description: string): (string | null)[] {
  refuseErrorBody(body, `${description}/_all_docs`, "rows");
  if (!isObject(body) || !Array.isArray(body.rows) || body.rows.length !== ids.length) {
    throw new FatalError(`${description}/_all_docs answered garbage to a keys lookup`);
  }
  return (body.rows as unknown[]).map((r, i) => {
    if (!isObject(r) || r.key !== ids[i]) {
      throw new FatalError(`${description}/_all_docs answered keys in another order`);
    }
    const v = r.value;
    if (r.error !== undefined || !isObject(v) || v.deleted === true) return null;
    return typeof v.rev === "string" ? v.rev : null;
  });
}

/** Rows of a `_changes` answer. */
export function checkChanges(
  body: unknown,
  description: string,
): { rows: ChangeRow[]; lastSeq: string; pending?: number } {
  refuseErrorBody(body, `${description}/_changes`, "results");
  if (!isObject(body) || !Array.isArray(body.results) || body.last_seq === undefined) {
    throw new FatalError(`${description}/_changes answered garbage`);
  }
  const rows: ChangeRow[] = body.results.map((r: unknown) => {
    if (!isObject(r) || typeof r.id !== "string" || !Array.isArray(r.changes)) {
      throw new FatalError(`${description}/_changes answered a malformed row`);
    }
    const rev = isObject(r.changes[0]) ? String(r.changes[0].rev ?? "") : "";
    return { seq: String(r.seq), id: r.id, rev, deleted: r.deleted === true };
  });
  // `pending` (CouchDB 2+): changes after last_seq; anything but a count is no pending at all.
  const pending = isCount(body.pending) ? { pending: body.pending } : {};
  return { rows, lastSeq: String(body.last_seq), ...pending };
}
