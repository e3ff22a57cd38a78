/**
 * Sinks: what keeps something else equal to a crawl's store, each one module on the engine's seam
 * (`engine/sinks/`). Today an SQLite table (`--sink sqlite:PATH#table`).
 *
 * @module
 */
export { DEFAULT_SINK_TABLE, parseSqliteSink, sqliteSink } from "./sqlite_sink.ts";
