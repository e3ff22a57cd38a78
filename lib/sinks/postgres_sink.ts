/**
 * A PostgreSQL table kept equal to a crawl's store (`--sink postgres://USER:PASSWORD@HOST/DB#table`),
 * through the engine's sink seam (`engine/sinks/`), with `npm:postgres` (porsager's client). Each
 * batch is one statement, so one transaction and one round trip: the rows of a key range the batch
 * does not hold deleted, deletions deleted (data-modifying `WITH` parts), its items upserted by an
 * `INSERT … SELECT FROM unnest(…) ON CONFLICT (id) DO UPDATE`, written only where they differ (a
 * batch given twice writes nothing). Its position is
 * kept in the crawl's KV under the sink's name (made from the server, user and database, never the
 * password), so after a kill, or a server down for an hour, the same command goes on where it
 * stopped.
 *
 * The table (named after `#`, else after the crawl): `id text COLLATE "C"` (primary key; byte
 * order, the store's), `rev`, `doc jsonb`, `error jsonb`, `too_large boolean`, `seq` (the
 * registry's sequence the crawl had applied when the row was written), `updated_at timestamptz`,
 * `deleted_at timestamptz` (with `tombstones`: when the store stopped holding the row, kept).
 * A document `jsonb` cannot hold (a `\u0000` in a string) is stored with `doc` null and `error`
 * `{"status": 0, "reason": "jsonb cannot hold \\u0000; ..."}`. `rankcrawl_state` says, a row per
 * table, what the table is current at and how proven.
 *
 * @module
 */
import postgres from "postgres";
import { shownKey } from "../plan/shown_key.ts";
import { PermanentError, TransientError } from "../base/errors.ts";
import type { ExportedItem, Sink, SinkBatch, SinkState } from "../engine/mod.ts";
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

/** Seconds a connection is waited for before the attempt counts as failed. @default */
export const PG_CONNECT_TIMEOUT_S = 10;

/** Where a `postgres://` reference writes: the URL to connect with, what to show, the table. */
export interface PostgresRef {
  /** The URL without `#table` (it holds the password: never shown). */
  url: string;
  /** `postgres://USER@HOST:PORT/DB`: what messages show. */
  shown: string;
  /** The table named after `#`, or null: each crawl's own. */
  table: string | null;
}

/**
 * Reads a `postgres://` (or `postgresql://`) sink reference.
 * @throws PermanentError when it is not a URL with a host and a database.
 */
export function parsePostgresSink(ref: string): PostgresRef {
  const hash = ref.indexOf("#");
  const url = hash < 0 ? ref : ref.slice(0, hash);
  const table = hash < 0 || hash === ref.length - 1 ? null : ref.slice(hash + 1);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new PermanentError(
      `--sink ${shownRef(ref)} is not a URL (postgres://USER@HOST/DB#table)`,
    );
  }
  const shown = `${u.protocol}//${u.username ? `${u.username}@` : ""}${u.host}${u.pathname}`;
  if (!/^postgres(ql)?:$/.test(u.protocol) || u.hostname === "") {
    throw new PermanentError(`--sink ${shown}: a PostgreSQL sink is postgres://USER@HOST/DB#table`);
  }
  if (u.pathname.length <= 1) {
    throw new PermanentError(`--sink ${shown}: name the database (postgres://USER@HOST/DB#table)`);
  }
  return { url, shown, table: table === null ? null : checkTable(shown, table) };
}

/** A reference with any password cut out, for a message about a reference that does not parse. */
function shownRef(ref: string): string {
  return ref.replace(/\/\/([^:/@]*):[^@/]*@/, "//$1:***@").replace(/#.*/, "");
}

/** A PostgreSQL sink: a {@linkcode Sink} that can be probed and closed. */
export interface PostgresSink extends Sink {
  /** The table named after `#`, or null: each crawl's own. */
  readonly table: string | null;
  /** `postgres://USER@HOST:PORT/DB` (no password). */
  readonly shown: string;
  /**
   * Connects and checks that it can write (and the table's shape when the reference names one).
   * @throws PermanentError when it never will as it is (a wrong password, no such database, a
   * read-only database, no right to create, a table of another shape); TransientError when the
   * server does not answer now.
   */
  probe(): Promise<void>;
  /** Closes its connection. */
  close(): Promise<void>;
}

/** SQLSTATE classes and codes that no retry mends. */
const REFUSED = new Set(["28000", "28P01", "3D000", "25006", "42501", "3F000", "42P07"]);

/** The error a failed statement or connection means to the caller (see the module comment). */
function meaning(shown: string, err: unknown): Error {
  if (err instanceof PermanentError || err instanceof TransientError) return err;
  const e = err as { code?: string; message?: string };
  const msg = `--sink ${shown}: ${e.message ?? String(err)}`;
  if (e.code && (REFUSED.has(e.code) || e.code.startsWith("42"))) {
    return new PermanentError(msg, { cause: err });
  }
  return new TransientError(msg, { cause: err });
}

/**
 * A sink keeping a table of the PostgreSQL database `ref` names equal to the crawl it is given
 * (each crawl's own table when the reference names none; created when missing). Nothing is
 * connected until `probe` or the first batch.
 * @throws PermanentError when `ref` is not a PostgreSQL URL.
 *
 * @example
 * ```ts
 * const sink = postgresSink("postgres://me:secret@127.0.0.1/npm#packages");
 * await sink.probe(); // a wrong password: PermanentError, one line
 * // createRuntime({ ..., sinks: { sinksFor: () => [sink] } }); then: await sink.close();
 * ```
 */
export function postgresSink(
  ref: string,
  o: SinkTableOptions & { connectTimeoutS?: number } = {},
): PostgresSink {
  const { url, shown, table } = parsePostgresSink(ref);
  const sql = postgres(url, {
    max: 1,
    connect_timeout: o.connectTimeoutS ?? PG_CONNECT_TIMEOUT_S,
    idle_timeout: 60,
    onnotice: () => {},
    connection: { application_name: "rankcrawl" },
  });
  const ready = new Set<string>();
  let stateReady = false;
  const ensureState = async () => {
    if (!stateReady) {
      await sql.unsafe(
        `CREATE TABLE IF NOT EXISTS ${STATE_TABLE} (table_name text PRIMARY KEY, ` +
          "crawl_id text NOT NULL, seq text, status text, checked text, detail text, " +
          "updated_at timestamptz NOT NULL)",
      );
      await checkShape(STATE_TABLE, [STATE_COLUMNS]);
      stateReady = true;
    }
  };
  const ensure = async (t: string, sh: TableShape) => {
    await ensureState();
    if (ready.has(t)) return;
    const type = (c: string) =>
      c === sh.key
        ? 'text COLLATE "C" PRIMARY KEY'
        : sh.json.includes(c)
        ? "jsonb"
        : c === "too_large"
        ? "boolean NOT NULL DEFAULT false"
        : c === "updated_at"
        ? "timestamptz NOT NULL"
        : c === "deleted_at"
        ? "timestamptz"
        : "text";
    await sql.unsafe(
      `CREATE TABLE IF NOT EXISTS "${t}" (${sh.columns.map((c) => `${c} ${type(c)}`).join(", ")})`,
    );
    await checkShape(t, [sh.columns]);
    ready.add(t);
  };
  /** Refuses a table `t` there with columns other than one of `wants` (none there: fine). */
  const checkShape = async (t: string, wants: string[][]) => {
    const cols = (await sql<{ column_name: string }[]>`
      SELECT column_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ${t} ORDER BY ordinal_position`)
      .map((c) => c.column_name);
    if (cols.length > 0 && !wants.some((w) => cols.join(",") === w.join(","))) {
      throw new PermanentError(
        `--sink ${shown}: table ${t} exists with other columns (${cols.join(", ")}); ` +
          `name another table after # (it would hold ${wants[0].join(", ")})`,
      );
    }
  };
  const apply = async (b: SinkBatch) => {
    const t = table ?? tableForCrawl(b.crawlId);
    const sh = shapeOf(shown, b.keys);
    await ensure(t, sh);
    const k = sh.key;
    // Text in PostgreSQL cannot hold U+0000. A view's row keys hold it between key and id: they
    // are kept escaped in an order-kept form (`rowKey`). A document id with one is left out (the
    // store and the export hold it), and a bound with one is cut there (see `bound`).
    const view = k === "row_key";
    const items = b.items.filter((it) => !(view ? shownId(it.id) : it.id).includes("\0"));
    const from = view
      ? { at: b.range?.from == null ? null : rowKey(b.range.from), inclusive: true }
      : bound(b.range?.from ?? null, true);
    const to = view
      ? { at: b.range?.to == null ? null : rowKey(b.range.to), inclusive: false }
      : bound(b.range?.to ?? null, false);
    const deleted = view ? b.deleted.map(rowKey) : b.deleted.filter((id) => !id.includes("\0"));
    // The batch goes as one JSON text (no escaping on this side: documents and values are joined
    // in as the JSON they are), read into rows by the server.
    let batch = "[";
    for (const it of items) {
      const row = rowOf(sh, jsonbSafe(it));
      if (view) row[0] = rowKey(row[0] as string);
      batch += `${batch.length > 1 ? "," : ""}{${
        sh.data.map((c, i) => {
          const v = row[i];
          const json = v === null
            ? "null"
            : typeof v === "boolean" || sh.json.includes(c)
            ? String(v)
            : JSON.stringify(v);
          return `"${c}":${json}`;
        }).join(",")
      }}`;
    }
    batch += "]";
    const types = sh.data.map((c) =>
      `${c} ${sh.json.includes(c) ? "jsonb" : c === "too_large" ? "boolean" : "text"}`
    ).join(", ");
    const picked = sh.data.map((c) =>
      sh.json.includes(c) && c !== "key" && c !== "value"
        ? `NULLIF(u.${c}, 'null'::jsonb)`
        : `u.${c}`
    ).join(", ");
    const compared = [...sh.data.filter((c) => c !== k), "deleted_at"];
    // What leaves the store leaves the table, or stays in it marked (tombstones).
    const remove = (where: string) =>
      o.tombstones
        ? `UPDATE "${t}" SET deleted_at = now(), updated_at = now() WHERE deleted_at IS NULL ` +
          `AND ${where}`
        : `DELETE FROM "${t}" WHERE ${where}`;
    await sql.unsafe(
      `WITH u AS MATERIALIZED (SELECT * FROM jsonb_to_recordset($1::text::jsonb) AS x(${types})), ` +
        `gone AS (${
          remove(
            `$3::boolean AND ($4::text IS NULL OR ${k} > $4 OR ($7::boolean AND ${k} = $4)) AND ` +
              `($5::text IS NULL OR ${k} < $5 OR ($8::boolean AND ${k} = $5)) AND ` +
              `${k} NOT IN (SELECT ${k} FROM u)`,
          )
        }), dropped AS (${remove(`${k} = ANY($6::text[])`)}) ` +
        `INSERT INTO "${t}" AS t (${sh.data.join(", ")}, seq, updated_at, deleted_at) ` +
        `SELECT ${picked}, $2, now(), NULL FROM u ON CONFLICT (${k}) DO UPDATE SET ` +
        sh.data.filter((c) => c !== k).map((c) => `${c} = excluded.${c}`).join(", ") +
        ", seq = excluded.seq, updated_at = excluded.updated_at, deleted_at = NULL WHERE " +
        `(${compared.map((c) => `t.${c}`).join(", ")}) IS DISTINCT FROM (${
          compared.map((c) => c === "deleted_at" ? "NULL::timestamptz" : `excluded.${c}`).join(", ")
        })`,
      [
        batch,
        b.seq,
        b.range !== null,
        from.at,
        to.at,
        deleted,
        from.inclusive,
        to.inclusive,
      ],
    );
  };
  const state = async (s: SinkState) => {
    const t = table ?? tableForCrawl(s.crawlId);
    await ensureState();
    await sql.unsafe(
      `INSERT INTO ${STATE_TABLE} (${STATE_COLUMNS.join(", ")}) ` +
        "VALUES ($1, $2, $3, $4, $5, $6, now()) ON CONFLICT (table_name) DO UPDATE SET " +
        "crawl_id = excluded.crawl_id, seq = excluded.seq, status = excluded.status, " +
        "checked = excluded.checked, detail = excluded.detail, updated_at = excluded.updated_at",
      [
        t,
        s.crawlId,
        s.seq,
        s.status,
        s.verification?.status ?? null,
        s.verification?.detail ?? null,
      ],
    );
  };
  const named = new URL(url);
  return {
    name: sinkName("postgres", `${named.username}@${named.host}${named.pathname}`, table, o),
    table,
    shown,
    apply: (b) => apply(b).catch((err) => Promise.reject(meaning(shown, err))),
    state: (s) => state(s).catch((err) => Promise.reject(meaning(shown, err))),
    probe: async () => {
      try {
        const [ro] = await sql<
          { ro: string }[]
        >`SELECT current_setting('transaction_read_only') AS ro`;
        if (ro.ro === "on") {
          throw new PermanentError(`--sink ${shown}: the database is read-only`);
        }
        await ensureState();
        // A table named after # that is there with another form is refused now (it is made at
        // the first batch: a view's rows and documents make other tables).
        if (table !== null) await checkShape(table, [SINK_COLUMNS, VIEW_COLUMNS]);
        else {
          // The crawl's own table is made at its first batch: the right to make one is checked now.
          await sql.begin(async (tx) => {
            await tx.unsafe("CREATE TEMP TABLE rankcrawl_probe (x int) ON COMMIT DROP");
            await tx.unsafe(`CREATE TABLE IF NOT EXISTS ${STATE_TABLE}_probe (x int)`);
            await tx.unsafe(`DROP TABLE ${STATE_TABLE}_probe`);
          });
        }
      } catch (err) {
        throw meaning(shown, err);
      }
    },
    close: () => sql.end({ timeout: 5 }),
  };
}

/**
 * A range bound as PostgreSQL can take it: `at`, and whether an id equal to it is inside the range
 * (a `from` is, a `to` is not). A bound holding U+0000 (a key just past
 * another, `k\0`) is cut before it: no id PostgreSQL holds has one, so `id >= "k\0…"` is `id > "k"`
 * and `id < "k\0…"` is `id <= "k"`.
 */
function bound(b: string | null, isFrom: boolean): { at: string | null; inclusive: boolean } {
  if (b === null) return { at: null, inclusive: isFrom };
  const nul = b.indexOf("\0");
  return nul < 0 ? { at: b, inclusive: isFrom } : { at: b.slice(0, nul), inclusive: !isFrom };
}

/**
 * A view row's stored key in a form PostgreSQL's text holds, in the same order (under `COLLATE
 * "C"`): U+0000 as U+0001 U+0001 and U+0001 as U+0001 U+0002, every other character as it is.
 */
function rowKey(key: string): string {
  if (!key.includes("\0") && !key.includes("\x01")) return key;
  let out = "";
  for (const c of key) out += c === "\0" ? "\x01\x01" : c === "\x01" ? "\x01\x02" : c;
  return out;
}

/** The document id a view row's stored key holds. */
function shownId(key: string): string {
  return shownKey(key, { view: true }).id;
}

/**
 * The item as `jsonb` can hold it: a document holding `\u0000` (which `jsonb` refuses) is given no
 * document and an error saying so (the store and the export keep it whole).
 */
function jsonbSafe(it: ExportedItem): ExportedItem {
  if (it.doc === undefined || !it.doc.includes("\\u0000")) return it;
  return {
    ...it,
    doc: undefined,
    error: {
      status: 0,
      reason: "jsonb cannot hold \\u0000; the document is in the crawl's store and its export",
    },
  };
}
