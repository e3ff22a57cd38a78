/**
 * Checking what a CouchDB-like registry answers, strictly: a listing's shape and order against
 * what was asked, a document's body, `_bulk_get` results, `_changes`. Anything of the wrong shape
 * for a listing is a {@linkcode FatalError} naming the problem (never guessed around); a bad
 * document is that document's own error, recorded on its item.
 *
 * @module
 */
import { FatalError, TransientError } from "../base/errors.ts";
import { compareKeys } from "../plan/keys.ts";
import type { ChangeRow, DocResult, ListOptions, Page, Row } from "../plan/source.ts";

/** Longest id accepted, in UTF-8 bytes (it must fit in a URL and in a shard record's cursor). */
export const MAX_ID_BYTES = 4_000;

const dec = new TextDecoder();
const enc = new TextEncoder();

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
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
 * {@linkcode TransientError} (retried, and recorded only if it keeps happening).
 */
export function docFromBody(body: Uint8Array, type: string | null): DocResult {
  if (body.length === 0) return { kind: "error", status: 200, reason: "empty body" };
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
  return { kind: "doc", json: text };
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
  if (r.id.length > MAX_ID_BYTES / 3 && enc.encode(r.id).length > MAX_ID_BYTES) {
    throw bad(`an id of over ${MAX_ID_BYTES} bytes (not supported)`);
  }
  const row: Row = { id: r.id, rev };
  if (includeDocs) {
    row.doc = isObject(r.doc)
      ? { kind: "doc", json: JSON.stringify(r.doc) }
      : { kind: "error", status: 200, reason: `no document in the listing (${jsonType(r.doc)})` };
  }
  return row;
}

/**
 * Validates a parsed `_all_docs` answer against what was asked: numbers are counts, `offset` is at
 * most `total_rows`, rows are `{id, key, value: {rev}}` with `id === key`, strictly ordered, within
 * the requested bounds and no more than `limit`. Anything else is a FatalError naming the problem.
 */
export function checkPage(body: unknown, options: ListOptions, description: string): Page {
  const bad = (why: string) => new FatalError(`${description} answered garbage: ${why}`);
  if (!isObject(body)) throw bad("not a JSON object");
  if (!Array.isArray(body.rows)) throw bad("no rows array (not a CouchDB listing?)");
  if (!isCount(body.total_rows)) throw bad("total_rows is not a count");
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
  return { offset: body.offset, total: body.total_rows, rows };
}

/**
 * The documents of a `_bulk_get` answer, in the order of `ids`. An id the answer leaves out, or
 * answers with an error, gets that as its own error.
 */
export function checkBulkGet(body: unknown, ids: string[], description: string): DocResult[] {
  if (!isObject(body) || !Array.isArray(body.results)) {
    throw new FatalError(`${description}/_bulk_get answered garbage: no results array`);
  }
  const byId = new Map<string, DocResult>();
  for (const r of body.results as unknown[]) {
    if (!isObject(r) || typeof r.id !== "string" || !Array.isArray(r.docs)) continue;
    const d = r.docs[0];
    if (isObject(d) && isObject(d.ok)) {
      byId.set(r.id, { kind: "doc", json: JSON.stringify(d.ok) });
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

/** Rows of a `_changes` answer. */
export function checkChanges(
  body: unknown,
  description: string,
): { rows: ChangeRow[]; lastSeq: string } {
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
  return { rows, lastSeq: String(body.last_seq) };
}
