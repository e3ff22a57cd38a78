/**
 * The crawl room: a crawl's life as a whole, working with its slice of the engine's environment
 * (`context.ts`: each function takes the `Pick` of `CrawlContext` it needs). Creation and planning (`planning.ts`), resuming,
 * pausing, cancelling, failing and deleting (`lifecycle.ts`), the registry's change feed claimed,
 * read and applied (`catch_up.ts`), splitting stragglers (`rebalance.ts`), what readers see
 * (`status.ts`, `crawl_reads.ts`), documents behind their revision asked again (`pending_ask.ts`)
 * and pages listed ahead while a crawl is planned (`_prefetch.ts`).
 * The sources a crawl reads are opened outside the engine (`lib/sources/open_source.ts`). Whether a crawl is done is the
 * verify room's to say.
 *
 * @module
 */
export { createCrawl, planCrawl } from "./planning.ts";
export type { CrawlLimits, PlanContext, PlanInput } from "./planning.ts";
export type { CrawlContext, Dispatcher } from "./context.ts";
export {
  cancelCrawl,
  deleteCrawl,
  failCrawl,
  openCrawl,
  pauseCrawl,
  rememberPageCap,
  resumeCrawl,
  transition,
} from "./lifecycle.ts";
export type { OpenAction } from "./lifecycle.ts";
export {
  applyFeed,
  applyRows,
  applyToEnd,
  catchUp,
  checkSameRegistry,
  claimFeed,
  peekChanges,
  reanchor,
  RegistryReplacedError,
  releaseFeed,
} from "./catch_up.ts";
export {
  FEED_BATCH,
  feedAnchor,
  feedQuiet,
  FeedReader,
  seqNumber,
  sinceUnknown,
  SinceUnknownError,
} from "./feed_read.ts";
export type { FeedBatch } from "./feed_read.ts";
export type { CatchUpResult, FeedClaim, FeedClaimContext, FeedContext } from "./catch_up.ts";
export { splitStraggler } from "./rebalance.ts";
export type { RebalanceOptions, SplitContext } from "./rebalance.ts";
export { crawlStatus } from "./status.ts";
export type { CrawlStatusReport, PendingDocsReport, ShardStatus } from "./status_report.ts";
export { askPendingDocs, pendingPassLine } from "./pending_ask.ts";
export type { PendingAskContext, PendingPass } from "./pending_ask.ts";
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
