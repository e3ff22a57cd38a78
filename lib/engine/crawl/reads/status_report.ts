/**
 * The shape of what readers see of a crawl (`status.ts` fills it): the report behind
 * `GET /crawls/:id`, each shard's progress, the follower's state and the pending documents.
 *
 * @module
 */
import type { LearnedCaps } from "../../../plan/source.ts";
import type { SinkLag } from "../../sinks/mod.ts";
import type { CrawlStatus, InFlight, SplitRecord, Verification } from "../../store/mod.ts";

/** Progress of one shard, as status reports it. */
export interface ShardStatus {
  /** Shard id. */
  id: number;
  /** First key; null = open. */
  start: string | null;
  /** End key (exclusive); null = open. */
  end: string | null;
  /** Items committed. */
  items: number;
  /** Items planned for it (after splits). */
  expected: number;
  /** Finished. */
  done: boolean;
  /** Pages committed. */
  pages: number;
  /** Items per second since the shard started (until it finished). */
  rate: number;
  /** A worker holds it now. */
  leased: boolean;
  /** The page in flight, when a worker published one. */
  inflight: InFlight | null;
  /** Document errors recorded on its items. */
  docErrors: number;
  /** Failed attempts over its life. */
  retries: number;
  /** The latest failure, if any. */
  lastError: string | null;
  /** When it is tried again after a failure (ISO 8601), if it waits. */
  retryAt: string | null;
  /**
   * Proven to hold what the registry lists in its range (`exact`), not yet (null), or found to
   * disagree after being listed again (`unproven`, why in `unproven`).
   */
  verified: "exact" | "unproven" | null;
  /** Why the range could not be proven, if so. */
  unproven: string | null;
  /** The shard it was split from, if any. */
  parent: number | null;
}

/** Pending documents of a crawl (see {@linkcode CrawlStatusReport.pendingDocs}). */
export interface PendingDocsReport {
  /** Documents pending now. */
  pending: number;
  /** Documents that landed at their item's revision after waiting. */
  landed: number;
  /** Documents still behind after the window, recorded as errors. */
  expired: number;
  /** Asks made again. */
  asked: number;
  /** Of those, answered 304 (no body sent). */
  notModified: number;
}

/** How far behind its registry a followed crawl is, and what was last proven of it. */
export interface FollowReport {
  /**
   * Seconds behind: since the registry was first seen ahead, or the last catch-up's; while looks
   * fail, at least the time since the last look that got an answer.
   */
  lagSeconds: number;
  /** Changes behind (null: unknown, as while looks fail or every row is being compared). */
  changesBehind: number | null;
  /** Changes applied by following. */
  applied: number;
  /** The sequence the crawl stands at, or the registry's head as last read. */
  head: string | null;
  /** When a follower last looked (ISO 8601). */
  checkedAt: string;
  /** When a look last got its answers (ISO 8601). */
  lastGoodAt: string | null;
  /** Looks are failing: since when (ISO 8601) and why (the latest failure); null when not. */
  failing: { since: string; reason: string } | null;
  /**
   * When every range's count was last proven against the registry's ranks (the final check, or a
   * whole round of re-proofs while following).
   */
  verifiedAt: string | null;
  /** Ranges of the count re-proof round under way checked so far, of `shardCount`. */
  roundChecked: number;
  /** Ranges found wrong while following and listed again, and the last such finding. */
  repaired: number;
  lastRepair: string | null;
  /** Changes that reached the feed late, under a sequence already passed, applied so. */
  lateApplied: number;
  /** The row sweep: every row compared with the registry's (`row_sweep.ts`). */
  rows: {
    /** When the last whole sweep ended (ISO 8601), and what it repaired. */
    comparedAt: string | null;
    lastRepaired: number;
    /** When a whole sweep last found every row equal: the copy proven whole by its rows. */
    provenAt: string | null;
    /** The sweep under way: rows compared and repaired so far, and why it runs now if forced. */
    compared: number;
    repaired: number;
    forced: string | null;
  } | null;
  /**
   * The last time the feed did not know where the crawl stood and was taken up again at its head
   * (a registry that numbered its changes anew): when, from, to, why.
   */
  resync: { at: string; from: string; to: string; why: string } | null;
}

/** A crawl's status: what `GET /crawls/:id` and the CLI show. */
export interface CrawlStatusReport {
  /** Crawl id. */
  id: string;
  /** Lifecycle state. */
  status: CrawlStatus;
  /** The source, without credentials. */
  source: string;
  /** Whether documents are fetched, and how (`include_docs`, `bulk_get`, `get`). */
  docs: boolean;
  /** How documents are fetched, once known. */
  docMode: string | null;
  /** Items in the registry when planned. */
  total: number;
  /** Items stored (shard counters plus drift inserts minus deletions). */
  itemsStored: number;
  /** Pages committed. */
  pages: number;
  /** Documents fetched. */
  documents: number;
  /**
   * Documents that could not be had (recorded on their items; with those still behind after the
   * pending window).
   */
  docErrors: number;
  /**
   * Documents behind their item's revision on the document host (npm's CDN lags its feed), stored
   * pending and asked again (`pending_ask.ts`): how many wait now (as of the last pass of the asker,
   * at most a second old while a process runs it), and what asking again did in all. Null for a
   * crawl without documents.
   */
  pendingDocs: PendingDocsReport | null;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Shards, including split-off ones. */
  shardCount: number;
  /** Shards finished. */
  shardsDone: number;
  /** Failed attempts of shards, over the crawl (each was retried). */
  retries: number;
  /** The latest failures still on record, newest first (shard and one line each). */
  recentErrors: { shard: number; error: string }[];
  /** Items per second between start and finish (or now). */
  rate: number;
  /** Seconds to completion at the current rate; null unless running with a rate. */
  etaSeconds: number | null;
  /** How ranks were found (`rank`, `skip`, `listing`). */
  planMethod: string;
  /** The registry's page cap, once learned. */
  pageCap: number | null;
  /**
   * What the registry was seen to serve of what is optional and what the crawl did instead, in
   * one line (`registry: …`), once its final check ran; null before.
   */
  registry: string | null;
  /** The same, field by field (`LearnedCaps`). */
  learned: LearnedCaps | null;
  /**
   * How far behind the registry a followed crawl is, as its last follow tick saw it (see
   * {@linkcode FollowReport}); present from the moment a crawl created with `follow` is done, or
   * once any follower looked. Null otherwise.
   */
  follow: FollowReport | null;
  /** When the crawl was created (ISO 8601). */
  createdAt: string;
  /** When its shards started (ISO 8601), once planned. */
  startedAt: string | null;
  /** When it finished, failed or was cancelled. */
  finishedAt: string | null;
  /** Why it failed, if it did (or, while planning, the last planning error). */
  error: string | null;
  /** Wake-up messages the KV queue gave up on, not yet revived. */
  deadLetters: number;
  /** Dynamic splits so far. */
  splits: SplitRecord[];
  /** Registry drift applied from `_changes` after the shards finished. */
  drift: { seq: string; inserted: number; updated: number; deleted: number } | null;
  /** Why drift catch-up could not run, if it could not. */
  driftError: string | null;
  /** How the end was checked against the registry, once done. */
  verification: Verification | null;
  /**
   * How each stored document was tied to the revision its item holds: `checked` (its `_rev`
   * against the listed one: a document behind is asked again, never stored as current),
   * `unverified` (npm's abbreviated metadata carries no `_rev`, so a cache behind the registry
   * cannot be told from the current document), or null for a crawl without documents.
   */
  docRevisions: "checked" | "unverified" | null;
  /**
   * Each sink ever given any of this crawl (by any process), with the notes of the ledger it was
   * not given yet (0: it holds what the store holds).
   */
  sinks: SinkLag[];
  /** Per-shard progress. */
  shards: ShardStatus[];
}
