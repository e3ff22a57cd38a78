/**
 * The sink seam: what the engine tells whatever is kept equal to a crawl's store (a database, the
 * served mirror, a test's counter). The engine never calls a sink from a commit: every commit
 * notes what it made true in the ledger, in its own atomic op (`store/notes.ts`), and a sink is
 * given those notes afterwards, as batches of what the store holds where it changed
 * (`deliver.ts`), from a position kept in KV under its name. So a sink that is slow, down or
 * killed never holds the crawl, and catches up from the ledger when it is back.
 *
 * @module
 */
import type { ExportedItem } from "../items/mod.ts";

/** What a sink is told: what the store holds now in a key range, or for some ids. */
export interface SinkBatch {
  /** The crawl. */
  crawlId: string;
  /**
   * A key range `[from, to)` (null bounds: open) whose content is now exactly `items`: the sink
   * drops whatever else it holds there. Null: only the ids of `items` and `deleted` changed.
   */
  range: { from: string | null; to: string | null } | null;
  /** Items as the store holds them now (documents read back), in key order. */
  items: ExportedItem[];
  /** Ids the store does not hold now: a sink that holds them drops them. */
  deleted: string[];
}

/**
 * Something kept equal to what a crawl stores. It is told at least once, in order per stream,
 * what the store holds where it changed; the same batch twice must change nothing (items are
 * whole, keyed by id, at a revision: idempotent). Its position is kept in KV under `name`, so the
 * name must stay the same from run to run.
 *
 * @example
 * ```ts
 * const held = new Map<string, string>();
 * const counting: Sink = {
 *   name: "count",
 *   apply(b) {
 *     for (const it of b.items) held.set(it.id, it.rev);
 *     for (const id of b.deleted) held.delete(id);
 *     return Promise.resolve();
 *   },
 * };
 * ```
 */
export interface Sink {
  /** Its name: where its position is kept (letters, digits, `-`, `_`, `.`, `:`). */
  readonly name: string;
  /** Makes what it holds agree with `batch` (see {@linkcode SinkBatch}). */
  apply(batch: SinkBatch): Promise<void>;
}
