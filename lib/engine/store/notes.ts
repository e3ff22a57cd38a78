/**
 * The ledger's notes: with every commit that changes a crawl's items, one small record of what it
 * made true, written in the same atomic op, so that a sink (a database kept equal to the crawl, the
 * served mirror) learns every change at least once, in order per stream, however it crashed or fell
 * behind, and catches up from here. KV stays the ledger and the proof: a note names where the
 * store changed (a key range a shard's page covered, or the ids a feed batch touched), and a sink
 * reads what the store holds there when it is told, so a note delivered twice, or late, changes
 * nothing (idempotent by id and revision).
 *
 * Streams: `s<shardId>` (its pages, numbered by `ShardRecord.notes`), `feed` (the feed's
 * batches, repairs and windows, numbered by `DriftState.notes`) and `docs` (pending documents that
 * landed later, numbered by `PendingDocsState.notes`). Each stream keeps its last
 * {@linkcode MAX_NOTES} notes: the op that writes note n deletes note n − MAX_NOTES; a sink further
 * behind is given the whole crawl again, range by range.
 *
 * @module
 */
import { keys } from "./keys.ts";

/** Notes kept per stream (older ones are deleted by the op that writes a new one). */
export const MAX_NOTES = 10_000;

/** Ids' UTF-16 units a note of ids holds at most (a larger batch is noted as its key range). */
export const MAX_NOTE_ID_UNITS = 16_000;

/**
 * What one commit made true in the store: the key range `[from, to)` now holds exactly what the
 * store holds there (a shard's page, or a part of one; null bounds: open), or these ids now hold
 * what the store holds for them (present or not).
 */
export type Note =
  | { kind: "range"; from: string | null; to: string | null }
  | { kind: "ids"; ids: string[] };

/** The stream a shard's pages note into. */
export function shardStream(shardId: number): string {
  return `s${shardId}`;
}

/** The stream the feed's batches and repairs note into. */
export const FEED_STREAM = "feed";

/** The stream pending documents that landed note into (`PendingDocsState.notes` numbers it). */
export const DOCS_STREAM = "docs";

/**
 * The note for a batch of ids: the ids themselves, or, when they would not fit one value, the key
 * range from the least to just past the greatest.
 */
export function idsNote(ids: readonly string[], compare: (a: string, b: string) => number): Note {
  const units = ids.reduce((n, id) => n + id.length, 0);
  if (units <= MAX_NOTE_ID_UNITS) return { kind: "ids", ids: [...ids] };
  const sorted = [...ids].sort(compare);
  return { kind: "range", from: sorted[0], to: sorted.at(-1)! + "\0" };
}

/**
 * Adds the `n`-th note of `stream` to an op (and deletes the note that falls out of the kept
 * ones): `set` and `del` are the op's (or a plan's) own.
 */
export function addNote(
  op: { set(key: Deno.KvKey, value: unknown): unknown; delete(key: Deno.KvKey): unknown },
  crawlId: string,
  at: { stream: string; n: number; note: Note },
): void {
  op.set(keys.note(crawlId, at.stream, at.n), at.note);
  if (at.n > MAX_NOTES) op.delete(keys.note(crawlId, at.stream, at.n - MAX_NOTES));
}
