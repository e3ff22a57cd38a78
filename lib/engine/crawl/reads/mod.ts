/**
 * What readers see of crawls: the status report and its shape (`status.ts`, `status_report.ts`),
 * crawls listed, found and read page by page or as NDJSON blocks (`crawl_reads.ts`), and the
 * mirror's reads of items by key and rank (`mirror_reads.ts`). Readers (the HTTP app, the CLI,
 * export, the mirror) go through here, never to the store directly.
 *
 * @module
 */
export { crawlStatus } from "./status.ts";
export type { CrawlStatusReport, PendingDocsReport, ShardStatus } from "./status_report.ts";
export {
  crawlDocErrors,
  crawlItemBatches,
  crawlItemsPage,
  crawlNdjsonBlocks,
  crawlPicture,
  crawlsOldestFirst,
  findCrawl,
  listCrawlListings,
  listCrawlSummaries,
  listCrawlVersions,
  requireCrawl,
} from "./crawl_reads.ts";
export type { CrawlListing, CrawlSummary } from "./crawl_reads.ts";
export {
  crawlItem,
  crawlItemCount,
  crawlItems,
  crawlItemsBetween,
  crawlRank,
} from "./mirror_reads.ts";
