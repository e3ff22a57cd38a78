/**
 * An SQLite table kept equal to a crawl's store (`--sink sqlite:PATH#table`), through the engine's
 * sink seam (`engine/sinks/`): each batch of what the store holds where it changed is applied in
 * one transaction (a key range's rows replaced, items upserted by id, deletions deleted), so the
 * table is never half a batch, and a batch given twice changes nothing. Its position is kept in the
 * crawl's KV under the sink's name, so after a kill the same command goes on where it stopped.
 * Through `node:sqlite` (built into Deno; nothing to install).
 *
 * The table: `id` (primary key), `rev`, `doc` (the document's JSON text, when fetched), `error`
 * (`{"status","reason"}` when the document could not be had), `too_large` (1 when over the cap),
 * `updated_at` (when the row was written, ISO 8601). A table of another shape is refused.
 *
 * @module
 */
import { resolve } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { PermanentError } from "../base/errors.ts";
import type { Sink, SinkBatch } from "../engine/mod.ts";

/** The table a `sqlite:` sink writes when its reference names none. */
export const DEFAULT_SINK_TABLE = "items";

const COLUMNS = ["id", "rev", "doc", "error", "too_large", "updated_at"];

/** The file and table of a `sqlite:PATH#table` sink reference (the path made absolute). */
export function parseSqliteSink(ref: string): { path: string; table: string } {
  const m = /^sqlite:([^#]+)(?:#(.*))?$/.exec(ref.trim());
  if (!m || m[1].trim() === "") throw new PermanentError(`--sink ${ref} is not sqlite:PATH#table`);
  const table = m[2] || DEFAULT_SINK_TABLE;
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(table)) {
    throw new PermanentError(
      `--sink ${ref}: the table must be letters, digits and _ (up to 64), got ${table}`,
    );
  }
  return { path: resolve(m[1]), table };
}

/** FNV-1a of `s`, 8 hex digits: a sink's name from its file, within what a KV name may hold. */
function shortHash(s: string): string {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(s)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

/**
 * A sink keeping `table` of the SQLite file `path` equal to the crawl it is given: created when
 * missing. `close` ends it.
 * @throws PermanentError when the file cannot be opened or written, or the table has another shape.
 *
 * @example
 * ```ts
 * const sink = sqliteSink("sqlite:npm.db#packages");
 * // createRuntime({ ..., sinks: { sinksFor: () => [sink] } }); then: sink.close();
 * ```
 */
export function sqliteSink(ref: string): Sink & { close(): void; readonly table: string } {
  const { path, table } = parseSqliteSink(ref);
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path);
    db.exec("PRAGMA journal_mode = WAL");
    db.exec(
      `CREATE TABLE IF NOT EXISTS "${table}" (id TEXT PRIMARY KEY, rev TEXT NOT NULL, doc TEXT, ` +
        "error TEXT, too_large INTEGER NOT NULL DEFAULT 0, updated_at TEXT NOT NULL)",
    );
  } catch (err) {
    throw new PermanentError(`--sink ${ref}: cannot write ${path}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const columns = (db.prepare(`PRAGMA table_info("${table}")`).all() as { name: string }[])
    .map((c) => c.name);
  if (columns.join(",") !== COLUMNS.join(",")) {
    db.close();
    throw new PermanentError(
      `--sink ${ref}: table ${table} exists with other columns (${columns.join(", ")}); ` +
        `name another table after # (it would hold ${COLUMNS.join(", ")})`,
    );
  }
  const upsert = db.prepare(
    `INSERT INTO "${table}" (id, rev, doc, error, too_large, updated_at) VALUES (?, ?, ?, ?, ?, ?) ` +
      "ON CONFLICT(id) DO UPDATE SET rev = excluded.rev, doc = excluded.doc, " +
      "error = excluded.error, too_large = excluded.too_large, updated_at = excluded.updated_at",
  );
  const drop = db.prepare(`DELETE FROM "${table}" WHERE id = ?`);
  // Ids compare as UTF-8 bytes (SQLite's BINARY collation): code point order, the store's.
  const dropRange = {
    both: db.prepare(`DELETE FROM "${table}" WHERE id >= ? AND id < ?`),
    from: db.prepare(`DELETE FROM "${table}" WHERE id >= ?`),
    to: db.prepare(`DELETE FROM "${table}" WHERE id < ?`),
    all: db.prepare(`DELETE FROM "${table}"`),
  };
  const apply = (b: SinkBatch) => {
    const at = new Date().toISOString();
    db.exec("BEGIN IMMEDIATE");
    try {
      if (b.range) {
        const { from, to } = b.range;
        if (from !== null && to !== null) dropRange.both.run(from, to);
        else if (from !== null) dropRange.from.run(from);
        else if (to !== null) dropRange.to.run(to);
        else dropRange.all.run();
      }
      for (const it of b.items) {
        upsert.run(
          it.id,
          it.rev,
          it.doc ?? null,
          it.error ? JSON.stringify(it.error) : null,
          it.tooLarge ? 1 : 0,
          at,
        );
      }
      for (const id of b.deleted) drop.run(id);
      db.exec("COMMIT");
    } catch (err) {
      db.exec("ROLLBACK");
      throw err;
    }
  };
  return {
    name: `sqlite:${shortHash(path)}:${table}`,
    table,
    apply: (b) => Promise.resolve().then(() => apply(b)),
    close: () => db.close(),
  };
}
