/**
 * The items room: how a crawl's items are stored and read back. Most rows go in blocks of a page's
 * rows (`item_blocks.ts`, their bytes in `block_codec.ts`), the rest in compact records (`item_codec.ts`, `item_store.ts`), large
 * documents in chunks; readers merge both layouts in key order (`item_read.ts`); changes from the
 * registry's feed are applied with exact counts (`drift_store.ts`); a range's items are counted and cut into
 * parts for the final check (`stored_parts.ts`). Keys come from the store room.
 *
 * @module
 */
export * from "./block_codec.ts";
export * from "./item_blocks.ts";
export * from "./item_codec.ts";
export * from "./item_read.ts";
export * from "./item_store.ts";
export * from "./drift_store.ts";
export * from "./doc_errors.ts";
export * from "./stored_parts.ts";
