/**
 * A table in an SQLite file as a source: any table with a text key is a rank oracle, since a page
 * from `k` is `select … where id >= k order by id limit n` and its offset is
 * `select count(*) … where id < k`. SQLite compares text by its UTF-8 bytes, which is code point
 * order: the registry's own. Read through `node:sqlite` (built into Deno), read-only.
 *
 * The table has an `id` column (text, the key: a primary key or an index makes ranks cheap), and
 * optionally `rev` (an item's revision; without it every item is at revision `1`) and `doc` (its
 * document as JSON text; without it documents are `{"_id": id}`). Such a table is what the SQL sink
 * writes, so one rankcrawl can crawl another's copy. No change feed: a crawl of it is proven as the
 * table stands.
 *
 * Referenced as `sqlite:PATH#table` (`#table` optional: `items`).
 *
 * @module
 */
import { DatabaseSync, type StatementSync } from "node:sqlite";
import { FatalError, PermanentError } from "../../base/errors.ts";
import type { ChangeRow, DocResult, ListOptions, Page, Row, Source } from "../../plan/source.ts";

/** A table name SQLite takes unquoted (and that cannot smuggle SQL in). */
const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** The file and table a `sqlite:PATH#table` reference names. */
export function parseSqliteRef(ref: string): { path: string; table: string } {
  const m = /^sqlite:([^#]+)(?:#(.*))?$/.exec(ref);
  if (!m || m[1].trim() === "") throw new PermanentError(`${ref} is not sqlite:PATH#table`);
  const table = m[2] ?? "items";
  if (!TABLE.test(table)) {
    throw new PermanentError(`the table name in ${ref} must be letters, digits and _ (up to 64)`);
  }
  return { path: m[1], table };
}

/**
 * A table in an SQLite file as a rank-aware source (see the module comment).
 *
 * @example
 * ```ts
 * const source = new SqliteSource("sqlite:npm.db#packages");
 * const plan = await planShards(source, 16); // 16 shards of equal item count
 * source.close();
 * ```
 */
export class SqliteSource implements Source {
  readonly description: string;
  readonly capabilities = { skip: true, maxPage: 10_000 };
  #db: DatabaseSync;
  #table: string;
  #hasRev: boolean;
  #hasDoc: boolean;
  #requests = 0;
  #stmts = new Map<string, StatementSync>();

  /**
   * Opens `ref` (`sqlite:PATH#table`) read-only.
   * @throws FatalError when the file cannot be opened or the table has no `id` column.
   */
  constructor(ref: string) {
    const { path, table } = parseSqliteRef(ref);
    this.description = `sqlite:${path}#${table}`;
    this.#table = table;
    try {
      this.#db = new DatabaseSync(path, { readOnly: true });
    } catch (err) {
      throw new FatalError(`cannot open ${path} as SQLite: ${(err as Error).message}`);
    }
    const cols = this.#db.prepare(`pragma table_info(${table})`).all()
      .map((r) => String((r as { name: unknown }).name));
    if (!cols.includes("id")) {
      throw new FatalError(`${this.description} has no table ${table} with an id column`);
    }
    this.#hasRev = cols.includes("rev");
    this.#hasDoc = cols.includes("doc");
  }

  /** Listing requests made. */
  get requests(): number {
    return this.#requests;
  }

  /** Closes the file. */
  close(): void {
    this.#db.close();
  }

  #stmt(sql: string): StatementSync {
    let s = this.#stmts.get(sql);
    if (!s) this.#stmts.set(sql, s = this.#db.prepare(sql));
    return s;
  }

  #count(where: string, ...args: string[]): number {
    const row = this.#stmt(`select count(*) as n from ${this.#table}${where}`).get(...args);
    return Number((row as { n: number | bigint }).n);
  }

  /** See {@linkcode Source.list}. */
  list(o: ListOptions): Promise<Page> {
    this.#requests++;
    const t = this.#table;
    const rev = this.#hasRev ? "rev" : "'1'";
    const doc = o.includeDocs && this.#hasDoc ? ", doc" : "";
    const total = this.#count("");
    const args: string[] = [];
    const where: string[] = [];
    let offset: number;
    if (o.descending) {
      if (o.start != null) (where.push("id <= ?"), args.push(o.start));
      if (o.end != null) (where.push("id > ?"), args.push(o.end));
      const above = o.start == null ? 0 : this.#count(" where id > ?", o.start);
      offset = above + (o.skip ?? 0);
    } else {
      if (o.start != null) (where.push("id >= ?"), args.push(o.start));
      if (o.end != null) (where.push("id < ?"), args.push(o.end));
      offset = (o.start == null ? 0 : this.#count(" where id < ?", o.start)) + (o.skip ?? 0);
    }
    const sql = `select id, ${rev} as rev${doc} from ${t}` +
      (where.length ? ` where ${where.join(" and ")}` : "") +
      ` order by id ${o.descending ? "desc" : "asc"} limit ? offset ?`;
    const got = this.#stmt(sql).all(...args, o.limit, o.skip ?? 0) as {
      id: string;
      rev: string;
      doc?: string | null;
    }[];
    const rows = got.map((r): Row => {
      const row: Row = { id: String(r.id), rev: String(r.rev) };
      if (o.includeDocs) row.doc = this.#docOf(row.id, row.rev, r.doc);
      return row;
    });
    return Promise.resolve({ offset: Math.min(offset, total), total, rows });
  }

  #docOf(id: string, rev: string, doc: string | null | undefined): DocResult {
    if (!this.#hasDoc) return { kind: "doc", json: JSON.stringify({ _id: id }), docRev: null };
    if (doc === null || doc === undefined) return { kind: "error", status: 404, reason: "no doc" };
    return { kind: "doc", json: doc, docRev: this.#hasRev ? rev : null };
  }

  /** See {@linkcode Source.doc}. */
  doc(id: string): Promise<DocResult> {
    const rev = this.#hasRev ? "rev" : "'1'";
    const doc = this.#hasDoc ? ", doc" : "";
    const r = this.#stmt(`select ${rev} as rev${doc} from ${this.#table} where id = ?`).get(id) as
      | { rev: string; doc?: string | null }
      | undefined;
    if (!r) return Promise.resolve({ kind: "error", status: 404, reason: "not found" });
    return Promise.resolve(this.#docOf(id, String(r.rev), r.doc));
  }

  /** See {@linkcode Source.revs}. */
  revs(ids: string[]): Promise<(string | null)[]> {
    this.#requests++;
    const rev = this.#hasRev ? "rev" : "'1'";
    const stmt = this.#stmt(`select ${rev} as rev from ${this.#table} where id = ?`);
    return Promise.resolve(ids.map((id) => {
      const r = stmt.get(id) as { rev: string } | undefined;
      return r ? String(r.rev) : null;
    }));
  }

  /** See {@linkcode Source.updateSeq}: none (a table has no change feed). */
  updateSeq(): Promise<string | null> {
    return Promise.resolve(null);
  }

  /** See {@linkcode Source.changes}: never asked (no feed). */
  changes(): Promise<{ rows: ChangeRow[]; lastSeq: string }> {
    return Promise.reject(new PermanentError(`${this.description} has no change feed`));
  }
}
