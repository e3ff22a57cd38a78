/**
 * A crawl exported as a table file: Parquet (`--format parquet`, with hyparquet-writer: row groups
 * written as the items are read, so memory stays flat at millions of rows) or an SQLite file
 * (`--format sqlite`, through the SQLite sink's own table, `lib/sinks/`). Both hold a row per
 * item: `id`, `rev`, `doc` (the document's JSON text, as the registry served it), `error`
 * (`{"status","reason"}`), `too_large`; the Parquet file's metadata and the SQLite file's
 * `rankcrawl_state` say which crawl, at which sequence, and how it was proven.
 *
 * @module
 */
import { fileWriter, ParquetWriter } from "hyparquet-writer";
import { SYSTEM_CLOCK } from "../base/clock.ts";
import { UsageError } from "../base/errors.ts";
import { crawlItemBatches, crawlStatus, type ExportedItem, findCrawl } from "../engine/mod.ts";
import { shownKey } from "../plan/shown_key.ts";
import { sqliteSink } from "../sinks/mod.ts";

/** Rows a Parquet row group holds at most. @default */
export const PARQUET_GROUP_ROWS = 10_000;
/** Document bytes a Parquet row group holds at most (then it is written out). @default */
export const PARQUET_GROUP_BYTES = 16 << 20;

/** What the export says it holds: the crawl, its sequence, how it was proven. */
interface Provenance {
  crawlId: string;
  source: string;
  seq: string | null;
  status: string;
  checked: string | null;
  detail: string | null;
}

/**
 * The crawl's items with ids as the registry spells them; a view's rows as stored (with `views`),
 * else refused.
 */
async function* itemsOf(
  kv: Deno.Kv,
  id: string,
  o: { format: string; concurrency: number; views?: boolean },
) {
  const { format, concurrency } = o;
  const crawl = await findCrawl(kv, id);
  if (crawl?.view !== undefined && !o.views) {
    throw new UsageError(
      `--format ${format} writes documents and their revisions; crawl ${id} holds a view's ` +
        "rows (--format ndjson or sqlite writes them)",
    );
  }
  const idOrder = crawl?.view !== undefined ? "codepoint" : crawl?.idOrder ?? "codepoint";
  for await (const batch of crawlItemBatches(kv, id, { concurrency })) {
    yield idOrder === "codepoint"
      ? batch
      : batch.map((it) => ({ ...it, id: shownKey(it.id, { view: false, idOrder }).id }));
  }
}

async function provenance(kv: Deno.Kv, id: string): Promise<Provenance> {
  const r = await crawlStatus(kv, id, { clock: SYSTEM_CLOCK });
  const crawl = await findCrawl(kv, id);
  return {
    crawlId: id,
    source: r.source,
    seq: r.drift?.seq ?? crawl?.startSeq ?? null,
    status: r.status,
    checked: r.verification?.status ?? null,
    detail: r.verification?.detail ?? null,
  };
}

/** Refuses to write over a file that is there: an export never replaces what someone kept. */
async function mustBeNew(path: string): Promise<void> {
  try {
    await Deno.lstat(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return;
    throw err;
  }
  throw new UsageError(`--out ${path} is there already; remove it or name another file`);
}

/**
 * Writes every item of crawl `id` to the Parquet file `path` (which must not exist); returns the
 * rows written. Columns: `id`, `rev` (strings), `doc` and `error` (JSON text, null when absent:
 * DuckDB reads them with its JSON functions, `doc->>'name'`), `too_large` (boolean). The file's
 * key-value metadata holds `rankcrawl.crawl_id`, `.source`, `.seq`, `.status`, `.checked`.
 * @throws UsageError when `path` exists or the crawl holds a view's rows
 *
 * @example
 * ```ts
 * using kv = await Deno.openKv("crawl.kv");
 * const rows = await exportParquet(kv, "c6a984ac0266", { path: "npm.parquet" });
 * ```
 */
export async function exportParquet(
  kv: Deno.Kv,
  id: string,
  o: { path: string; groupRows?: number; groupBytes?: number },
): Promise<number> {
  await mustBeNew(o.path);
  // One range read at a time: the encoder is the slower side, and memory stays lower.
  const items = itemsOf(kv, id, { format: "parquet", concurrency: 1 });
  const p = await provenance(kv, id);
  const text = (name: string, required: boolean) => ({
    name,
    type: "BYTE_ARRAY" as const,
    converted_type: "UTF8" as const,
    repetition_type: required ? "REQUIRED" as const : "OPTIONAL" as const,
  });
  const json = (name: string) => ({
    ...text(name, false),
    logical_type: { type: "JSON" as const },
  });
  const writer = new ParquetWriter({
    writer: fileWriter(o.path),
    schema: [
      { name: "root", num_children: 5 },
      text("id", true),
      text("rev", true),
      json("doc"),
      json("error"),
      { name: "too_large", type: "BOOLEAN", repetition_type: "REQUIRED" },
    ],
    createdBy: "rankcrawl",
    kvMetadata: Object.entries(p).map(([k, v]) => ({
      key: `rankcrawl.${k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`,
      value: v ?? "",
    })),
  });
  let rows = 0;
  let group: ExportedItem[] = [];
  let bytes = 0;
  const flush = () => {
    if (group.length === 0) return;
    writer.write({
      columnData: [
        { name: "id", data: group.map((it) => it.id) },
        { name: "rev", data: group.map((it) => it.rev) },
        { name: "doc", data: group.map((it) => it.doc ?? null) },
        { name: "error", data: group.map((it) => it.error ? JSON.stringify(it.error) : null) },
        { name: "too_large", data: group.map((it) => it.tooLarge === true) },
      ],
      rowGroupSize: group.length,
    });
    rows += group.length;
    group = [];
    bytes = 0;
  };
  for await (const batch of items) {
    for (const it of batch) {
      group.push(it);
      bytes += it.doc?.length ?? 0;
      if (
        group.length >= (o.groupRows ?? PARQUET_GROUP_ROWS) ||
        bytes >= (o.groupBytes ?? PARQUET_GROUP_BYTES)
      ) flush();
    }
  }
  flush();
  writer.finish();
  return rows;
}

/**
 * Writes every item of crawl `id` to the table `table` of a new SQLite file `path` (the SQLite
 * sink's columns and its `rankcrawl_state` row; a view's rows as the sink keeps them: `row_key`,
 * `key`, `id`, `value`, ...); returns the rows written.
 * @throws UsageError when `path` exists
 *
 * @example
 * ```ts
 * using kv = await Deno.openKv("crawl.kv");
 * const rows = await exportSqlite(kv, "c6a984ac0266", { path: "npm.db", table: "packages" });
 * ```
 */
export async function exportSqlite(
  kv: Deno.Kv,
  id: string,
  o: { path: string; table?: string },
): Promise<number> {
  await mustBeNew(o.path);
  const items = itemsOf(kv, id, { format: "sqlite", concurrency: 1, views: true });
  const keys = (await findCrawl(kv, id))?.view !== undefined ? "view-rows" : "ids";
  const p = await provenance(kv, id);
  const sink = sqliteSink(`sqlite:${o.path}${o.table ? `#${o.table}` : ""}`);
  let rows = 0;
  try {
    for await (const batch of items) {
      await sink.apply({
        crawlId: id,
        range: null,
        items: batch,
        deleted: [],
        seq: p.seq,
        keys,
      });
      rows += batch.length;
    }
    await sink.state!({
      crawlId: id,
      seq: p.seq,
      status: p.status,
      verification: p.checked === null ? null : { status: p.checked, detail: p.detail ?? "" },
    });
  } finally {
    sink.close();
  }
  return rows;
}
