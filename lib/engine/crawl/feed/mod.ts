/**
 * The crawl room's change feed: read from where a crawl stands to a proven end, every answer
 * checked, never trusted (`feed_read.ts`); claimed by one runner at a time, applied batch by batch
 * with its documents, a registry replaced behind the URL refused (`catch_up.ts`).
 *
 * @module
 */
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
