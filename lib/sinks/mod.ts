/**
 * Sinks: what keeps something else equal to a crawl's store, each one module on the engine's seam
 * (`engine/sinks/`): an SQLite table (`sqlite:PATH#table`) and a PostgreSQL table
 * (`postgres://USER:PASSWORD@HOST/DB#table`), with the same columns (`sink_table.ts`), opened from
 * what a user types by {@linkcode openSink}.
 *
 * @module
 */
export { checkSinkRef, type OpenedSink, openSink, parseSinkRef, SINK_FORMS } from "./open_sink.ts";
export {
  parsePostgresSink,
  PG_CONNECT_TIMEOUT_S,
  type PostgresRef,
  type PostgresSink,
  postgresSink,
} from "./postgres_sink.ts";
export { parseSqliteSink, type SqliteSink, sqliteSink } from "./sqlite_sink.ts";
export {
  SINK_COLUMNS,
  type SinkTableOptions,
  STATE_COLUMNS,
  STATE_TABLE,
  tableForCrawl,
  tableProblem,
} from "./sink_table.ts";
