/**
 * The engine: crawls of rank-balanced shards with all state in Deno KV. This face holds the names
 * the HTTP and CLI layers use; the engine's rooms, each with its own `mod.ts`, stand on one another:
 *
 *     store/     KV layout, records, leases and their owners, KV's limits
 *     items/     item blocks and records, reading them back, applying the change feed
 *     sinks/     the seam: what is kept equal to a crawl's store is told what changed, from the
 *                ledger's notes
 *     page/      one page of one shard: listing, documents, the guarded write
 *     crawl/     planning, lifecycle, the change feed, rebalancing, status, sources
 *     verify/    the one room that says done: a shard's end, the final check, following
 *     dispatch/  shard runners, lease workers, the KV queue, the watchdog, the runtime
 *
 * A room imports only the rooms above it in this list, through their `mod.ts`, which names what
 * it hands on (files named `_x.ts` are the room's own); HTTP and CLI import only this face.
 *
 * @module
 */
export {
  cancelCrawl,
  catchUp,
  type CatchUpResult,
  crawlDocErrors,
  crawlItem,
  crawlItemBatches,
  crawlItemCount,
  crawlItems,
  crawlItemsBetween,
  crawlItemsPage,
  type CrawlLimits,
  type CrawlListing,
  crawlNdjsonBlocks,
  crawlPicture,
  crawlRank,
  crawlsOldestFirst,
  crawlStatus,
  type CrawlStatusReport,
  type CrawlSummary,
  createCrawl,
  deleteCrawl,
  type Dispatcher,
  findCrawl,
  listCrawlListings,
  listCrawlSummaries,
  listCrawlVersions,
  type OpenAction,
  openCrawl,
  pauseCrawl,
  type PendingDocsReport,
  type PendingPass,
  pendingPassLine,
  type RebalanceOptions,
  resumeCrawl,
  type ShardStatus,
} from "./crawl/mod.ts";
export {
  type FollowContext,
  type FollowTick,
  followTick,
  VERIFY_EVERY_MS,
  VERIFY_ROWS_EVERY_MS,
} from "./verify/mod.ts";
export {
  crawlContext,
  createRuntime,
  DEFAULT_WORKERS,
  type DispatchMode,
  engineEnv,
  type Env,
  type FollowConfig,
  MAX_WORKERS,
  type Runtime,
  type RuntimeOptions,
  SINK_POLL_MS,
  type SinkLoopOptions,
  type WorkEvent,
} from "./dispatch/mod.ts";
export {
  deliver,
  deliverAll,
  type Delivered,
  type Sink,
  type SinkBatch,
  type SinkLag,
  sinkLag,
  type SinkState,
} from "./sinks/mod.ts";
export type { ExportedItem } from "./items/mod.ts";
export { rowsPerPage } from "./page/mod.ts";
export { type CrawlRecord, feedUsable, kvFailureKind, kvOp, storageCause } from "./store/mod.ts";
export {
  appendMirrorChanges,
  getMirrorLocal,
  MAX_MIRROR_LOCALS,
  type MirrorChange,
  mirrorChangesBefore,
  mirrorChangesSince,
  mirrorEntriesBetween,
  mirrorEntriesOf,
  type MirrorEntry,
  mirrorEntry,
  mirrorHead,
  mirrorHeadEntry,
  putMirrorLocal,
} from "./store/mod.ts";
