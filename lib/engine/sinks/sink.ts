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
  /**
   * The registry's sequence the store had applied when the batch was read (the feed's, else the
   * crawl's start): its items are current at this sequence or later. Null: the registry has none.
   */
  seq: string | null;
  /**
   * What the items' ids are: `ids` (document ids), `view-rows` (a view's rows, each id the row's
   * stored key: `shownKey` reads its key and document id, and `rev` is its value) or `utf16-keys`
   * (document ids carried as keys that sort as the registry's UTF-16 order: `idOfKey`).
   */
  keys: "ids" | "view-rows" | "utf16-keys";
}

/**
 * What a sink is told once it holds every note the ledger had: what the store it now equals is
 * current at, and how far that store was proven. Told again only when it changed.
 */
export interface SinkState {
  /** The crawl. */
  crawlId: string;
  /** The registry's sequence the store had applied (see {@linkcode SinkBatch.seq}). */
  seq: string | null;
  /** The crawl's status (`done` once its end was checked). */
  status: string;
  /** How its end was checked (`exact`, `total`, `counts`, ...) and what was compared, once done. */
  verification: { status: string; detail: string } | null;
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
  /**
   * Told what the store it holds all of is current at and how it was proven (see
   * {@linkcode SinkState}), after the batches that made it so. @default not told
   */
  state?(state: SinkState): Promise<void>;
}
