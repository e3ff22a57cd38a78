/**
 * The page room: one page of one shard, by the worker holding the shard's lease. List from the
 * cursor, proving the end only from an empty answer, a row past the end or ranks (`page_listing.ts`),
 * where the process's listing cache cannot tell the answer (pages listed ahead while the plan was
 * searched, and the planner's reads: `lib/sources/cache/`);
 * fetch documents the best way the registry allows (`page_docs.ts`, within `doc_memory.ts` and
 * `doc_slots.ts`); write the items and the shard's new state in one guarded op (`_page_write.ts`,
 * `page_guard.ts`, large view values in `_page_values.ts`). Whether a shard that reached its end
 * is done is not the page's to say: the verify room's check is handed in (`PageContext.checkEnd`).
 *
 * @module
 */
export { processPage } from "./page.ts";
export type { Held, PageContext } from "./page.ts";
export type { ShardCheck, ShardEndCheck } from "./page_guard.ts";
export { pageLimit, rowsPerPage } from "./page_listing.ts";
export type { ListedPage } from "./page_listing.ts";
export { againstListing, failedDoc } from "./page_docs.ts";
export { docsNotHereLine } from "./docs_not_here.ts";
export { againstStored } from "./against_stored.ts";
export { DocMemory } from "./doc_memory.ts";
export { CrawlSlots } from "./doc_slots.ts";
