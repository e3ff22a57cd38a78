/**
 * The page room: one page of one shard, by the worker holding the shard's lease. List from the
 * cursor, proving the end only from an empty answer, a row past the end or ranks (`page_listing.ts`),
 * the first pages perhaps listed while the plan was searched (`early_pages.ts`); fetch documents
 * the best way the registry allows (`page_docs.ts`); write the items and the shard's new state in
 * one guarded op (`page_write.ts`, `page_guard.ts`); check a shard at its end (`shard_end.ts`).
 *
 * @module
 */
export * from "./page.ts";
export * from "./page_docs.ts";
export * from "./doc_memory.ts";
export * from "./doc_slots.ts";
export * from "./early_pages.ts";
export * from "./page_listing.ts";
export * from "./shard_end.ts";
