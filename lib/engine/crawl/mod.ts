/**
 * The crawl room: a crawl's life as a whole, working with its slice of the engine's environment
 * (`context.ts`: each function takes the `Pick` of `CrawlContext` it needs). Creation and
 * planning (`planning.ts`), resuming, pausing, cancelling, failing and deleting (`lifecycle.ts`),
 * splitting stragglers (`rebalance.ts`), documents behind their revision asked again
 * (`pending_ask.ts`) and pages listed ahead while a crawl is planned (`_prefetch.ts`); in sub-rooms,
 * the registry's change feed read, claimed and applied (`feed/`) and what readers see (`reads/`).
 * The sources a crawl reads are opened outside the engine (`lib/sources/open_source.ts`). Whether
 * a crawl is done is the verify room's to say.
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
  FEED_BATCH,
  feedAnchor,
  feedQuiet,
  FeedReader,
  peekChanges,
  reanchor,
  RegistryReplacedError,
  releaseFeed,
  seqNumber,
  sinceUnknown,
  SinceUnknownError,
} from "./feed/mod.ts";
export type {
  CatchUpResult,
  FeedBatch,
  FeedClaim,
  FeedClaimContext,
  FeedContext,
} from "./feed/mod.ts";
export { splitStraggler } from "./rebalance.ts";
export type { RebalanceOptions, SplitContext } from "./rebalance.ts";
export {
  crawlDocErrors,
  crawlItem,
  crawlItemBatches,
  crawlItemCount,
  crawlItems,
  crawlItemsBetween,
  crawlItemsPage,
  crawlNdjsonBlocks,
  crawlPicture,
  crawlRank,
  crawlsOldestFirst,
  crawlStatus,
  findCrawl,
  listCrawlListings,
  listCrawlSummaries,
  listCrawlVersions,
  requireCrawl,
} from "./reads/mod.ts";
export type {
  CrawlListing,
  CrawlStatusReport,
  CrawlSummary,
  PendingDocsReport,
  ShardStatus,
} from "./reads/mod.ts";
export { askPendingDocs, pendingPassLine } from "./pending_ask.ts";
export type { PendingAskContext, PendingPass } from "./pending_ask.ts";
