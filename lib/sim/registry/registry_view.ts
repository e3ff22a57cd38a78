/**
 * The simulated registry's one view, `_design/pkg/_view/by_shape`: every document emits a key of a
 * JSON type chosen by a hash of its id (null, false, true, its length as a number, its first
 * character as a string, `[first character, length % 3]`, or `{"c": first character}`), one in
 * three also emits `[first character, length]`, and one in eleven emits its first key twice (two
 * rows of one `(key, docid)` pair, as CouchDB allows). So keys repeat in long runs and mix every type the
 * view collation orders, which is what a crawler of views must get right. Rows are sorted with
 * `compareViewRows` (the collation, not the string encoding the crawler uses), and listed with
 * CouchDB's view parameters: `startkey`/`endkey` (JSON), `startkey_docid`/`endkey_docid`,
 * `inclusive_end`, `descending`, `skip`, `limit`, `include_docs`; `offset` counts the rows before
 * the first one returned (after it, descending), as in `_all_docs`.
 *
 * @module
 */
import { compareKeys } from "../../plan/keys.ts";
import {
  type Collation,
  compareJson,
  compareViewRows,
  type Json,
  type ViewRowKey,
} from "../../plan/view/mod.ts";
import type { RegistryData } from "./registry_data.ts";
import type { Hono } from "hono";
import { couchError, intParam } from "./registry_listing.ts";

/** The view the registry serves. */
export const VIEW_NAME = "pkg/by_shape";

/** One emitted row. */
export interface ViewRow extends ViewRowKey {
  /** The emitted value: the id's length. */
  value: number;
}

function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The rows a document emits (see the module comment). */
export function emit(id: string): ViewRow[] {
  const first = String.fromCodePoint(id.codePointAt(0) ?? 0x20);
  const h = hash(id);
  const keys: Json[] = [
    [null, false, true, id.length, id.length, first, first, first, [first, id.length % 3], {
      c: first,
    }][h % 10] as Json,
  ];
  if (h % 3 === 0) keys.push([first, id.length]);
  if (h % 11 === 0) keys.push(keys[0]); // the same key twice: two rows of one (key, docid) pair
  return keys.map((key) => ({ key, docid: id, value: id.length }));
}

const cache = new WeakMap<RegistryData, Map<Collation, { seq: number; rows: ViewRow[] }>>();

/**
 * Every row of the view over `data`, sorted, the repeats of a pair numbered (`dup`), recomputed
 * when the data changed.
 */
export function viewRowsOf(data: RegistryData, collation: Collation = "typed"): ViewRow[] {
  const byOrder = cache.get(data) ?? new Map();
  cache.set(data, byOrder);
  const hit = byOrder.get(collation);
  if (hit && hit.seq === data.updateSeq) return hit.rows;
  const rows = data.keys.flatMap(emit).sort((a, b) => compareViewRows(a, b, collation));
  for (let i = 1; i < rows.length; i++) {
    const p = rows[i - 1];
    if (p.docid === rows[i].docid && compareJson(p.key, rows[i].key) === 0) {
      rows[i].dup = (p.dup ?? 0) + 1;
    }
  }
  byOrder.set(collation, { seq: data.updateSeq, rows });
  return rows;
}

/** Rows before `(key, docid)`; `docid` null stands for all rows of `key` (`orEqual`: through them). */
function countBefore(
  rows: ViewRow[],
  at: { key: Json; docid: string | null; collation: Collation },
  orEqual: boolean,
): number {
  const { key, docid } = at;
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const c = compareJson(rows[mid].key, key, at.collation) ||
      (docid === null ? 0 : compareKeys(rows[mid].docid, docid));
    if (c < 0 || (orEqual && c === 0)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function jsonParam(raw: string | undefined): Json | undefined | Error {
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return new Error(`Invalid value for JSON: ${raw.slice(0, 80)}`);
  }
}

/** A view listing's answer, or an Error for a malformed parameter. */
export function listView(
  data: RegistryData,
  q: Record<string, string | undefined>,
  options: {
    maxLimit: number;
    includeDocs: boolean;
    skip: boolean;
    silentCap?: number;
    ignoresDocid?: boolean;
    collation?: Collation;
  },
): string | Error {
  const collation = options.collation ?? "typed";
  const rows = viewRowsOf(data, collation);
  const n = rows.length;
  const start = jsonParam(q.startkey ?? q.start_key);
  const end = jsonParam(q.endkey ?? q.end_key);
  const limit = intParam(q.limit, Number.MAX_SAFE_INTEGER);
  const skip = intParam(q.skip, 0);
  for (const v of [start, end, limit, skip]) if (v instanceof Error) return v;
  if (q.skip !== undefined && !options.skip) return new Error("skip is not supported");
  if ((limit as number) > options.maxLimit && q.limit !== undefined) {
    return new Error(`limit must be at most ${options.maxLimit}`);
  }
  const take = Math.min(limit as number, options.silentCap ?? Infinity);
  const docs = q.include_docs === "true";
  if (docs && !options.includeDocs) return new Error("include_docs is not supported");
  const desc = q.descending === "true";
  const inclusive = q.inclusive_end !== "false";
  const docids = !options.ignoresDocid;
  const startDoc = docids ? q.startkey_docid ?? q.start_key_doc_id ?? null : null;
  const endDoc = docids ? q.endkey_docid ?? q.end_key_doc_id ?? null : null;
  const picked: ViewRow[] = [];
  let offset: number;
  if (!desc) {
    const lo = start === undefined
      ? 0
      : countBefore(rows, { key: start as Json, docid: startDoc, collation }, false);
    const hi = end === undefined
      ? n
      : countBefore(rows, { key: end as Json, docid: endDoc, collation }, inclusive);
    offset = Math.min(lo + (skip as number), n);
    for (let i = offset; i < hi && picked.length < take; i++) picked.push(rows[i]);
  } else {
    const from = start === undefined
      ? n - 1
      : countBefore(rows, { key: start as Json, docid: startDoc, collation }, true) - 1;
    const to = end === undefined
      ? -1
      : countBefore(rows, { key: end as Json, docid: endDoc, collation }, !inclusive) - 1;
    const first = from - (skip as number);
    offset = Math.min(n - 1 - first, n);
    for (let i = first; i > to && i >= 0 && picked.length < take; i--) {
      picked.push(rows[i]);
    }
  }
  const out = picked.map((r) =>
    JSON.stringify({
      id: r.docid,
      key: r.key,
      value: r.value,
      ...(docs ? { doc: data.doc(r.docid) } : {}),
    })
  );
  // pouchdb-server's offset is the skip, not a rank.
  const at = options.ignoresDocid ? skip : offset;
  // CouchDB's `update_seq=true` on a view: the sequence the index reflects (here always current).
  const seq = q.update_seq === "true" ? `,"update_seq":${data.updateSeq}` : "";
  return `{"total_rows":${n},"offset":${at}${seq},"rows":[${out.join(",")}]}`;
}

/** Serves the view at `/<db>/_design/pkg/_view/by_shape`; any other view is `missing_named_view`. */
export function addViewRoute(
  app: Hono,
  ctx: {
    db: string;
    data: RegistryData;
    stats: { allDocs: number };
    maxLimit: number;
    options: {
      includeDocs?: boolean;
      skip?: boolean;
      silentCap?: number;
      viewIgnoresDocid?: boolean;
      viewCollation?: Collation;
    };
  },
): void {
  // The design document: the view's map, and its collation where it is not the default.
  app.get(`/${ctx.db}/_design/:ddoc`, (c) => {
    if (`${c.req.param("ddoc")}/by_shape` !== VIEW_NAME) {
      return couchError(c, 404, "not_found", "missing");
    }
    const raw = ctx.options.viewCollation === "raw";
    return c.json({
      _id: "_design/pkg",
      _rev: "1-sim",
      views: {
        by_shape: {
          map: "(see lib/sim/registry/registry_view.ts)",
          ...(raw ? { options: { collation: "raw" } } : {}),
        },
      },
    });
  });
  app.get(`/${ctx.db}/_design/:ddoc/_view/:view`, (c) => {
    ctx.stats.allDocs++;
    if (`${c.req.param("ddoc")}/${c.req.param("view")}` !== VIEW_NAME) {
      return couchError(c, 404, "not_found", "missing_named_view");
    }
    const answer = listView(ctx.data, c.req.query(), {
      maxLimit: ctx.maxLimit,
      silentCap: ctx.options.silentCap,
      includeDocs: ctx.options.includeDocs !== false,
      skip: ctx.options.skip !== false,
      ignoresDocid: ctx.options.viewIgnoresDocid,
      collation: ctx.options.viewCollation,
    });
    if (answer instanceof Error) return couchError(c, 400, "query_parse_error", answer.message);
    return c.body(answer, 200, { "content-type": "application/json" });
  });
}
