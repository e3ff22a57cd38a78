/**
 * The store room: the only code that knows where things live in Deno KV. The key layout
 * (`keys.ts`), records of crawls (`records.ts`), of shards and splits (`shard_record.ts`) and the operations on them
 * (`store.ts`: every multi-key update is one atomic op guarded by versionstamps, every
 * `{ ok: false }` goes back to the caller), a locked file retried and one read-modify-write loop
 * (`kv_ops.ts`), the changes counted per shard range (`range_drift.ts`), KV's limits counted
 * exactly (`kv_limits.ts`), and whether a lease is held, by whom, and whether its owner's process
 * is alive (`leases.ts`), and the shard entries this process committed that its workers should
 * know before their next read (`shard_notices.ts`).
 *
 * The engine's rooms stand on one another: `store` ← `items` ← `page` ← `crawl` ← `verify` ←
 * `dispatch`; a room imports only rooms below it, through their `mod.ts`, which names what it
 * hands on (a file whose name starts with `_` is the room's own).
 *
 * @module
 */
export { crawlOfKey, keys, parseKey, partOfKey } from "./keys.ts";
export { feedUsable, followable, lagSeconds } from "./records.ts";
export { newShard, relisted } from "./shard_record.ts";
export type {
  CrawlRecord,
  CrawlStatus,
  DriftState,
  FinishState,
  FollowState,
  FollowVerify,
  PendingDocsState,
  PlanningState,
  RowSweep,
  Verification,
} from "./records.ts";
export type { InFlight, ShardRecord, SplitRecord } from "./shard_record.ts";
export {
  clearDeadLetter,
  clearPlanning,
  commitRelist,
  commitShard,
  commitSplit,
  createCrawlRecord,
  deadLetterKey,
  deleteCrawlData,
  getCrawl,
  getCrawlAndShard,
  getFeed,
  getFollow,
  getPlanning,
  getShard,
  getShards,
  listCrawlEntries,
  listCrawls,
  listDeadLetters,
  listPending,
  listShards,
  listSplits,
  setFollow,
  updateCrawl,
} from "./store.ts";
export { commitPlan, getEntries, kvOp, present, updateRecord } from "./kv_ops.ts";
export { endPlanning, renewPlanning, takePlanning, writePlannedShards } from "./planning_ops.ts";
export { listRangeDrift, shardStored, storedCount } from "./range_drift.ts";
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
} from "./mirror_log.ts";
export {
  AtomicBudget,
  keySize,
  kvFailureKind,
  MAX_CHECKS,
  MAX_VALUE_BYTES,
  OpPlan,
  storageCause,
  utf8Length,
  valueSizeBound,
} from "./kv_limits.ts";
export {
  EXPIRY_ONLY,
  LEASE_MS,
  leaseFor,
  leaseHeld,
  ProcessBeat,
  readLiveness,
  releaseLease,
  takeLease,
} from "./leases.ts";
export type { Liveness } from "./leases.ts";
export { ShardNotices } from "./shard_notices.ts";
export {
  addNote,
  DOCS_STREAM,
  FEED_STREAM,
  idsNote,
  MAX_NOTE_ID_UNITS,
  MAX_NOTES,
  shardStream,
} from "./notes.ts";
export type { Note } from "./notes.ts";
