/**
 * A sink from what a user types (`--sink REF`, `SINKS`): `sqlite:PATH#table` or
 * `postgres://USER:PASSWORD@HOST/DB#table`, each behind one shape the CLI and the server use.
 *
 * @module
 */
import { PermanentError } from "../base/errors.ts";
import type { Sink } from "../engine/mod.ts";
import { parsePostgresSink, postgresSink } from "./postgres_sink.ts";
import { parseSqliteSink, sqliteSink } from "./sqlite_sink.ts";
import type { SinkTableOptions } from "./sink_table.ts";

/** A sink opened from its reference. */
export interface OpenedSink extends Sink {
  /** The reference as it may be shown (no password). */
  readonly shown: string;
  /**
   * Checks now that it can write.
   * @throws PermanentError when it never will as it is; TransientError when it cannot now
   */
  probe(): Promise<void>;
  /** Lets go of its file or connection. */
  close(): Promise<void>;
}

/** The kinds of sink a reference may name, as help text shows them. */
export const SINK_FORMS = "sqlite:PATH#table or postgres://USER:PASSWORD@HOST/DB#table";

/**
 * The sink `ref` names, keeping deletions as `o` says. An SQLite file is opened now; a PostgreSQL server is not connected until
 * `probe` or the first batch.
 * @throws PermanentError when `ref` is no sink, or an SQLite file cannot be written.
 *
 * @example
 * ```ts
 * const sink = openSink("sqlite:npm.db#packages");
 * await sink.probe();
 * await sink.close();
 * ```
 */
export function openSink(ref: string, o: SinkTableOptions = {}): OpenedSink {
  const kind = parseSinkRef(ref)?.kind;
  if (kind === undefined) throw notASink(ref);
  if (kind === "sqlite") {
    const s = sqliteSink(ref, o);
    return {
      name: s.name,
      shown: ref.replace(/#.*/, ""),
      apply: (b) => s.apply(b),
      state: (st) => s.state!(st),
      probe: () => Promise.resolve(),
      close: () => Promise.resolve(s.close()),
    };
  }
  return postgresSink(ref, o);
}

/**
 * Checks what `ref` names without opening anything (no file made, no server asked): what a command
 * line is read for before any work starts. {@linkcode openSink} still checks the rest.
 * @throws PermanentError when `ref` is no sink, or its path, URL or table is malformed.
 *
 * @example
 * ```ts
 * checkSinkRef("sqlite:npm.db#packages"); // fine
 * ```
 */
export function checkSinkRef(ref: string): void {
  if (parseSinkRef(ref) === null) throw notASink(ref);
}

/**
 * The kind of sink `ref` names and the table it names (null: none), read without opening
 * anything; null when its scheme is no sink's.
 * @throws PermanentError when it is a sink's scheme with a malformed path, URL or table.
 */
export function parseSinkRef(
  ref: string,
): { kind: "sqlite" | "postgres"; table: string | null } | null {
  if (ref.startsWith("sqlite:")) return { kind: "sqlite", table: parseSqliteSink(ref).table };
  if (/^postgres(ql)?:/.test(ref)) {
    return { kind: "postgres", table: parsePostgresSink(ref).table };
  }
  return null;
}

function notASink(ref: string): PermanentError {
  return new PermanentError(
    `--sink ${ref.replace(/\/\/[^@/]*@/, "//…@")}: a sink is ${SINK_FORMS}`,
  );
}
