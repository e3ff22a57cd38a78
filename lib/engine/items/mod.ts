/**
 * The items room: how a crawl's items are stored and read back. Most rows go in blocks of a page's
 * rows (`item_blocks.ts`, their bytes in `_block_codec.ts`), the rest in compact records
 * (`_item_codec.ts`, `item_store.ts`), large documents in chunks; readers merge both layouts in key
 * order (`item_read.ts`); changes from the registry's feed are applied with exact counts
 * (`drift_store.ts`); documents behind their item's revision wait as pending (`pending_docs.ts`);
 * a range's items are counted and cut into parts for the final check
 * (`stored_parts.ts`). Keys come from the store room.
 *
 * @module
 */
export {
  blockable,
  blockRow,
  checkItemLayout,
  ITEM_LAYOUT,
  keysIn,
  packBlocks,
} from "./item_blocks.ts";
export type { Position } from "./item_blocks.ts";
export {
  DEFAULT_MAX_DOC_BYTES,
  INLINE_DOC_BYTES,
  nextAskMs,
  prepareWrites,
  setInBatches,
  spillDocument,
  tallyItems,
} from "./item_store.ts";
export type { ItemInput, PendingDoc } from "./item_store.ts";
export {
  duePendingDocs,
  emptyPendingDocsState,
  notePendingCount,
  pendingDocsState,
  settlePending,
  stillPending,
} from "./pending_docs.ts";
export type { DuePending, PendingOutcome } from "./pending_docs.ts";
export {
  blockNdjsonBatches,
  chunkKeys,
  hasRecords,
  itemBatches,
  iterateItems,
  pageItems,
  sampleStored,
  storedRevision,
} from "./item_read.ts";
export type { ExportedItem } from "./item_read.ts";
export { countItemsBetween, itemsBetween, itemsByIds } from "./item_lookup.ts";
export { applyDrift } from "./drift_store.ts";
export type { DriftChange, ShardRange } from "./drift_store.ts";
export { pageDocErrors } from "./doc_errors.ts";
export type { DocError } from "./doc_errors.ts";
export { cutStored, storedItems } from "./stored_parts.ts";
export type { CutOptions, StoredPart, StoredRow } from "./stored_parts.ts";
