/**
 * What every SQL sink's table is, whatever the database: its columns, the rule its name follows,
 * the name derived from a crawl when the sink's reference names none, the table that says what a
 * sink's tables are current at and how proven, and a sink's name (where its position is kept)
 * made from where it writes, never from a credential.
 *
 * @module
 */
import { PermanentError } from "../base/errors.ts";
import type { ExportedItem, SinkBatch } from "../engine/mod.ts";
import { shownKey } from "../plan/shown_key.ts";
import { isValueDigest, splitValueBlob } from "../plan/view/mod.ts";

/**
 * A sink table's columns, in order (`id` the primary key). `deleted_at` is null but for rows kept
 * as tombstones ({@linkcode SinkTableOptions.tombstones}): when the store stopped holding them.
 */
export const SINK_COLUMNS = [
  "id",
  "rev",
  "doc",
  "error",
  "too_large",
  "seq",
  "updated_at",
  "deleted_at",
];

/**
 * A view crawl's table: `row_key` (primary key: the row's key and document id as the store orders
 * them), `key` (the row's key, JSON), `id` (its document's id), `value` (JSON), then as
 * {@linkcode SINK_COLUMNS}.
 */
export const VIEW_COLUMNS = ["row_key", "key", "id", "value", ...SINK_COLUMNS.slice(2)];

/** A table's form: its columns, the one ranges and deletions go by, which hold JSON. */
export interface TableShape {
  /** Every column, in order. */
  columns: string[];
  /** The columns a row's values fill (the rest: `seq`, `updated_at`, `deleted_at`). */
  data: string[];
  /** The primary key, in the store's order. */
  key: string;
  /** Data columns holding JSON. */
  json: string[];
}

const DOC_SHAPE: TableShape = {
  columns: SINK_COLUMNS,
  data: SINK_COLUMNS.slice(0, 5),
  key: "id",
  json: ["doc", "error"],
};
const VIEW_SHAPE: TableShape = {
  columns: VIEW_COLUMNS,
  data: VIEW_COLUMNS.slice(0, 7),
  key: "row_key",
  json: ["key", "value", "doc", "error"],
};

/**
 * The table a batch's items go to, by what their ids are.
 * @throws PermanentError for ids carried in UTF-16 order (pouchdb-server's), not kept in SQL yet.
 */
export function shapeOf(ref: string, keys: SinkBatch["keys"]): TableShape {
  if (keys === "utf16-keys") {
    throw new PermanentError(
      `--sink ${ref}: the crawl's registry orders ids by UTF-16 unit (pouchdb-server); ` +
        "a sink's table keeps code-point order only (export it instead)",
    );
  }
  return keys === "view-rows" ? VIEW_SHAPE : DOC_SHAPE;
}

/**
 * An item as its table's data columns (see {@linkcode TableShape.data}): text, JSON text (null
 * when absent) and `too_large`. A view's row is read as the export reads it: its key and document
 * id from the stored key, its value from the revision (or, for a long one, the stored blob).
 */
export function rowOf(shape: TableShape, it: ExportedItem): (string | boolean | null)[] {
  const error = it.error ? JSON.stringify(it.error) : null;
  const tooLarge = it.tooLarge === true;
  if (shape.key === "id") return [it.id, it.rev, it.doc ?? null, error, tooLarge];
  const shown = shownKey(it.id, { view: true });
  const { value, doc } = isValueDigest(it.rev) && it.doc !== undefined
    ? splitValueBlob(it.doc)
    : { value: it.rev, doc: it.doc };
  return [it.id, JSON.stringify(shown.key ?? null), shown.id, value, doc ?? null, error, tooLarge];
}

/** How a sink keeps its table. */
export interface SinkTableOptions {
  /**
   * Rows the store no longer holds are kept, marked with `deleted_at`, instead of deleted (a row
   * that comes back loses its mark). @default false
   */
  tombstones?: boolean;
}

/**
 * The table beside a sink's tables, a row per table: the crawl it holds, the registry's sequence
 * the crawl's store was at when the table last held all of it (`seq`), the crawl's `status`, how
 * its end was `checked` (`exact`, `total`, ...) with the `detail`, and when that was written.
 */
export const STATE_TABLE = "rankcrawl_state";

/** Columns of {@linkcode STATE_TABLE}, in order. */
export const STATE_COLUMNS = [
  "table_name",
  "crawl_id",
  "seq",
  "status",
  "checked",
  "detail",
  "updated_at",
];

const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * What is wrong with `table` as a sink's table name (letters, digits and _, up to 63, not a digit
 * first, not the sinks' own table), or null when nothing is.
 */
export function tableProblem(table: string): string | null {
  if (!TABLE.test(table)) {
    return `the table must be letters, digits and _ (up to 63, not a digit first), got ${table}`;
  }
  if (table.toLowerCase() === STATE_TABLE) {
    return `${STATE_TABLE} is the sinks' own table; name another`;
  }
  return null;
}

/** `table` when it is a table name a sink takes (see {@linkcode tableProblem}). */
export function checkTable(ref: string, table: string): string {
  const why = tableProblem(table);
  if (why !== null) throw new PermanentError(`--sink ${ref}: ${why}`);
  return table;
}

/**
 * The table a crawl's rows go to when the sink's reference names none: its id in lower case with
 * every other character `_` (`npm-names.2` → `npm_names_2`), `crawl_` before it when it starts
 * with a digit, at most 63 characters.
 */
export function tableForCrawl(crawlId: string): string {
  const t = crawlId.toLowerCase().replace(/[^a-z0-9_]/g, "_");
  return (/^[a-z_]/.test(t) ? t : `crawl_${t}`).slice(0, 63);
}

/** FNV-1a of `s`, 8 hex digits: a sink's name from where it writes, within what a KV name holds. */
export function shortHash(s: string): string {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(s)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/**
 * A sink's name: its kind, a hash of where it writes (a file, or a server and database without the
 * password), its table (`*`: the crawl's own) and `:tombstones` when it keeps them, so that its
 * position in KV is found again by the same reference and by no other.
 */
export function sinkName(
  kind: string,
  where: string,
  table: string | null,
  o: SinkTableOptions = {},
): string {
  // Another way of keeping deletions is another sink: switched, it is given the whole crawl again.
  return `${kind}:${shortHash(where)}:${table ?? "*"}${o.tombstones ? ":tombstones" : ""}`;
}
