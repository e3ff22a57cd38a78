/**
 * An SQLite table kept equal to a crawl's store (`--sink sqlite:PATH#table`), through the engine's
 * sink seam (`engine/sinks/`): each batch of what the store holds where it changed is applied in
 * one transaction (a key range's rows replaced, items upserted by id, deletions deleted), so the
 * table is never half a batch, and a batch given twice changes nothing. Its position is kept in the
 * crawl's KV under the sink's name, so after a kill the same command goes on where it stopped.
 * Through `node:sqlite` (built into Deno; nothing to install).
 *
 * The table (`sink_table.ts`; named after `#`, else after the crawl): `id` (primary key), `rev`,
 * `doc` (the document's JSON text, when fetched), `error` (`{"status","reason"}` when the document
 * could not be had), `too_large` (1 when over the cap), `seq` (the registry's sequence the crawl
 * had applied when the row was written), `updated_at` (ISO 8601), `deleted_at` (with `tombstones`:
 * when the store stopped holding the row, which is kept). A table of another shape is refused. `rankcrawl_state` says, a row per table, what the table is current at and how proven.
 *
 * @module
 */
import { resolve } from "node:path";
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { PermanentError } from "../base/errors.ts";
import type { Sink, SinkBatch, SinkState } from "../engine/mod.ts";
import {
  checkTable,
  rowOf,
  shapeOf,
  SINK_COLUMNS,
  sinkName,
  type SinkTableOptions,
  STATE_COLUMNS,
  STATE_TABLE,
  tableForCrawl,
  type TableShape,
  VIEW_COLUMNS,
} from "./sink_table.ts";

/** The file and table of a `sqlite:PATH#table` sink reference (the path made absolute). */
export function parseSqliteSink(ref: string): { path: string; table: string | null } {
  const m = /^sqlite:([^#]+)(?:#(.*))?$/.exec(ref.trim());
  if (!m || m[1].trim() === "") throw new PermanentError(`--sink ${ref} is not sqlite:PATH#table`);
  return { path: resolve(m[1]), table: m[2] ? checkTable(ref, m[2]) : null };
}

/** An SQLite sink: a {@linkcode Sink} with its file, and `close`. */
export interface SqliteSink extends Sink {
  /** The table named after `#`, or null: each crawl's own (`tableForCrawl`). */
  readonly table: string | null;
  /** Closes the file. */
  close(): void;
}

/** A table's statements. */
interface Writer {
  table: string;
  shape: TableShape;
  upsert: StatementSync;
  drop: Remover;
  range: Record<"both" | "from" | "to" | "all", Remover>;
}

/** A statement that deletes rows, or marks them deleted: given the condition's values only. */
interface Remover {
  run(...args: string[]): unknown;
}

/**
 * A sink keeping `table` of the SQLite file `path` equal to the crawl it is given (each crawl's
 * own table when the reference names none): created when missing. `close` ends it.
 * @throws PermanentError when the file cannot be opened or written, or the table has another shape.
 *
 * @example
 * ```ts
 * const sink = sqliteSink("sqlite:npm.db#packages");
 * // createRuntime({ ..., sinks: { sinksFor: () => [sink] } }); then: sink.close();
 * ```
 */
export function sqliteSink(ref: string, o: SinkTableOptions = {}): SqliteSink {
  const { path, table } = parseSqliteSink(ref);
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(
      `CREATE TABLE IF NOT EXISTS ${STATE_TABLE} (table_name TEXT PRIMARY KEY, ` +
        "crawl_id TEXT NOT NULL, seq TEXT, status TEXT, checked TEXT, detail TEXT, " +
        "updated_at TEXT NOT NULL)",
    );
  } catch (err) {
    throw new PermanentError(`--sink ${ref}: cannot write ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const fail = (msg: string) => {
    db.close();
    throw new PermanentError(`--sink ${ref}: ${msg}`);
  };
  const shape = (t: string) =>
    (db.prepare(`PRAGMA table_info("${t}")`).all() as { name: string }[]).map((c) => c.name);
  if (shape(STATE_TABLE).join(",") !== STATE_COLUMNS.join(",")) {
    fail(`${STATE_TABLE} exists with other columns (${shape(STATE_TABLE).join(", ")})`);
  }
  const writers = new Map<string, Writer>();
  // What leaves the store leaves the table, or stays in it marked (`deleted_at`: the time, bound
  // by `at`, set before each batch).
  let at = "";
  const remove = (t: string, where: string): Remover => {
    const st = o.tombstones
      ? db.prepare(
        `UPDATE "${t}" SET deleted_at = ?, updated_at = ? WHERE deleted_at IS NULL AND ${where}`,
      )
      : db.prepare(`DELETE FROM "${t}" WHERE ${where}`);
    return { run: (...args) => o.tombstones ? st.run(at, at, ...args) : st.run(...args) };
  };
  const writer = (t: string, sh: TableShape): Writer => {
    const known = writers.get(t);
    if (known) return known;
    const types: Record<string, string> = { too_large: "INTEGER NOT NULL DEFAULT 0" };
    db.exec(
      `CREATE TABLE IF NOT EXISTS "${t}" (${
        sh.columns.map((c) =>
          `${c} ${
            c === sh.key
              ? "TEXT PRIMARY KEY"
              : c === "updated_at"
              ? "TEXT NOT NULL"
              : types[c] ?? "TEXT"
          }`
        ).join(", ")
      })`,
    );
    refuseOther(t, sh);
    const data = sh.data.join(", ");
    const compared = [...sh.data.filter((c) => c !== sh.key), "deleted_at"];
    const w: Writer = {
      table: t,
      shape: sh,
      upsert: db.prepare(
        `INSERT INTO "${t}" (${data}, seq, updated_at, deleted_at) VALUES (` +
          `${sh.data.map(() => "?").join(", ")}, ?, ?, NULL) ON CONFLICT(${sh.key}) DO UPDATE ` +
          `SET ${
            sh.data.filter((c) => c !== sh.key).map((c) => `${c} = excluded.${c}`).join(", ")
          }, ` +
          "seq = excluded.seq, updated_at = excluded.updated_at, deleted_at = NULL " +
          `WHERE (${compared.join(", ")}) IS NOT (${
            compared.map((c) => c === "deleted_at" ? "NULL" : `excluded.${c}`).join(", ")
          })`,
      ),
      drop: remove(t, `${sh.key} = ?`),
      // Keys compare as UTF-8 bytes (SQLite's BINARY collation): code point order, the store's.
      range: {
        both: remove(t, `${sh.key} >= ? AND ${sh.key} < ?`),
        from: remove(t, `${sh.key} >= ?`),
        to: remove(t, `${sh.key} < ?`),
        all: remove(t, "1"),
      },
    };
    writers.set(t, w);
    return w;
  };
  /** Refuses a table `t` that is there with other columns than `sh`'s (any known form: `null`). */
  const refuseOther = (t: string, sh: TableShape | null) => {
    const columns = shape(t);
    const fits = (c: string[]) => columns.join(",") === c.join(",");
    if (
      columns.length === 0 || (sh ? fits(sh.columns) : fits(SINK_COLUMNS) || fits(VIEW_COLUMNS))
    ) {
      return;
    }
    if (t === table) db.close();
    throw new PermanentError(
      `--sink ${ref}: table ${t} exists with other columns (${columns.join(", ")}); ` +
        `name another table after # (it would hold ${(sh?.columns ?? SINK_COLUMNS).join(", ")})`,
    );
  };
  // A table named after # that is there with another form is refused now, before anything is
  // crawled (it is made at the first batch: a view's rows and documents make other tables).
  if (table !== null) refuseOther(table, null);
  const inTransaction = (work: () => void) => {
    db.exec("BEGIN IMMEDIATE");
    try {
      work();
      db.exec("COMMIT");
    } catch (err) {
      db.exec("ROLLBACK");
      throw err;
    }
  };
  const apply = (b: SinkBatch) => {
    const w = writer(table ?? tableForCrawl(b.crawlId), shapeOf(ref, b.keys));
    at = new Date().toISOString();
    inTransaction(() => {
      if (b.range) {
        // Rows the batch holds are kept and upserted (no churn); every other row there goes.
        const keep = new Set(b.items.map((it) => it.id));
        const { from, to } = b.range;
        const gone = from !== null && to !== null
          ? w.range.both
          : from !== null
          ? w.range.from
          : to !== null
          ? w.range.to
          : w.range.all;
        if (keep.size === 0) gone.run(...[from, to].filter((x): x is string => x !== null));
        else dropOthers(db, b.range, keep, w);
      }
      for (const it of b.items) {
        const row = rowOf(w.shape, it).map((v) => typeof v === "boolean" ? (v ? 1 : 0) : v);
        w.upsert.run(...row, b.seq, at);
      }
      for (const id of b.deleted) w.drop.run(id);
    });
  };
  const state = (s: SinkState) => {
    const t = table ?? tableForCrawl(s.crawlId);
    db.prepare(
      `INSERT INTO ${STATE_TABLE} (${STATE_COLUMNS.join(", ")}) VALUES (?, ?, ?, ?, ?, ?, ?) ` +
        "ON CONFLICT(table_name) DO UPDATE SET crawl_id = excluded.crawl_id, seq = excluded.seq, " +
        "status = excluded.status, checked = excluded.checked, detail = excluded.detail, " +
        "updated_at = excluded.updated_at",
    ).run(
      t,
      s.crawlId,
      s.seq,
      s.status,
      s.verification?.status ?? null,
      s.verification?.detail ?? null,
      new Date().toISOString(),
    );
  };
  return {
    name: sinkName("sqlite", path, table, o),
    table,
    apply: (b) => Promise.resolve().then(() => apply(b)),
    state: (s) => Promise.resolve().then(() => state(s)),
    close: () => db.close(),
  };
}

/** Deletes the rows of the batch's range that the batch does not hold. */
function dropOthers(
  db: DatabaseSync,
  range: NonNullable<SinkBatch["range"]>,
  keep: Set<string>,
  w: Writer,
): void {
  const { from, to } = range;
  const k = w.shape.key;
  const where = [from !== null ? `${k} >= ?` : "", to !== null ? `${k} < ?` : ""].filter(Boolean);
  const keys = db.prepare(
    `SELECT ${k} AS k FROM "${w.table}"${where.length ? ` WHERE ${where.join(" AND ")}` : ""}`,
  ).all(...[from, to].filter((x) => x !== null)) as { k: string }[];
  // Rows already marked deleted stay as they are (the remover skips them).
  for (const { k: key } of keys) if (!keep.has(key)) w.drop.run(key);
}
