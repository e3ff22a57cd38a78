/**
 * What the store holds of a crawl: its record, its planning, its feed, its follower, its pending
 * documents and its final check, and the leases they carry (its shards' records are in
 * `shard_record.ts`). `store.ts` owns where they live in KV.
 *
 * @module
 */
import type { CrawlSpec } from "../../base/spec.ts";
import type { DocMode, LearnedCaps } from "../../plan/source.ts";
import type { IdOrder } from "../../plan/id_order.ts";

/**
 * Lifecycle of a crawl. `deleting`: its items are being deleted (a delete that was interrupted is
 * finished by the next process that meets it); nothing it stored may be read as a result.
 */
export type CrawlStatus =
  | "planning"
  | "running"
  | "paused"
  | "done"
  | "failed"
  | "cancelled"
  | "deleting";

/**
 * How the end of the crawl was checked against the registry (see `verify/_verdicts.ts`):
 * - `exact`: every shard's range holds exactly what the registry lists there, proven by ranks at
 *   a moment when nothing changed in that range, with every change of the feed applied up to then;
 * - `total`: the registry's offsets are not ranks, so only the total could be held against
 *   `total_rows` (at a moment the feed shows nothing changed, when there is a feed);
 * - `counts`: every range holds as many items as the registry lists there, but the registry
 *   changed while its feed could not be read, so revisions changed meanwhile may be stale (never
 *   `exact` without the feed);
 * - `unproven`: a crawl done before and listed again while followed has ranges that still
 *   disagree with the registry after being listed again (each named in `detail`); the copy is
 *   kept, and those ranges are tried again;
 * - `pending`: every shard is done and the check is under way (it waits for moments when the
 *   ranges it has left hold still).
 */
export interface Verification {
  /** What was proven. */
  status: "exact" | "total" | "counts" | "unproven" | "pending";
  /** One line on what was compared. */
  detail: string;
}

/** A crawl, as stored. */
export interface CrawlRecord extends CrawlSpec {
  /** Crawl id (derived from the spec unless given). */
  id: string;
  /**
   * How its items are written, set when it is planned: 3 = one op per page part, blocks with raw
   * documents (see `item_blocks.ts`). Absent (1) or 2 for crawls planned by versions before 0.5,
   * which this version refuses (`checkItemLayout`).
   */
  itemLayout?: number;
  /** Lifecycle state. */
  status: CrawlStatus;
  /** Items in the registry when planned. */
  total: number;
  /** Listing requests the plan took. */
  planRequests: number;
  /** How ranks were found (`rank`, `skip`, `listing`). */
  planMethod: string;
  /**
   * How the registry orders ids, where not by code point: `utf16` (pouchdb-server) means item keys
   * are made from ids (`lib/plan/id_order.ts`) and are shown mapped back. @default "codepoint"
   */
  idOrder?: IdOrder;
  /** Shard ids handed out so far (plan + splits); the next split gets this id. */
  nextShardId: number;
  /** The registry's update sequence when the crawl started (for `_changes` catch-up). */
  startSeq: string | null;
  /**
   * A view crawl's `update_seq` when it started, where the view's answers carry one: views have
   * no catch-up, so the crawl is done only while the view still answers this one.
   */
  viewSeq?: string | null;
  /** The registry's page cap, once learned (a short page that was not the end). */
  pageCap?: number | null;
  /** How documents are fetched, once probed. */
  docMode?: DocMode | null;
  /**
   * What the registry was seen to serve of what is optional (`LearnedCaps`), as of the crawl's
   * final check: its sources ask in those forms from the start.
   */
  learned?: LearnedCaps | null;
  /** Why drift catch-up could not run (the registry has no usable `_changes`), if so. */
  driftError?: string;
  /** How the end was checked against the registry, once done. */
  verification?: Verification;
  /**
   * Its shards are indexed by `["pending", id, shardId]` while not done (crawls planned by this
   * version; lease workers scan the shards of earlier ones).
   */
  indexed?: boolean;
  /** The naive even split's cuts with their ranks, for the plan picture (rank plans only). */
  evenSplit?: { key: string; rank: number }[] | null;
  /** Creation time, epoch ms. */
  createdAt: number;
  /** When planning finished and shards started, epoch ms. */
  startedAt?: number | null;
  /** Last update, epoch ms. */
  updatedAt: number;
  /** When it finished, failed or was cancelled, epoch ms. */
  finishedAt: number | null;
  /**
   * When it was first `done`, epoch ms: a crawl done once and listed again (a repair while it is
   * followed) keeps its copy; a range it cannot prove then is `unproven`, never a failed crawl.
   */
  firstDoneAt?: number | null;
  /** Why it failed, if it did (one line). */
  error: string | null;
  /** The crawl failed because of what it was asked (more shards than items): the user's to fix. */
  failedOnInput?: boolean;
}

/**
 * Who plans a crawl in `planning`, and how its attempts went: its own record, so that planning and
 * the crawl's other writers never conflict.
 */
export interface PlanningState {
  /** Held by the process planning the crawl, renewed while it plans. */
  lease: Lease | null;
  /** Planning attempts that failed transiently; planning fails for good after a bound. */
  failures: number;
  /** Not before this time is planning tried again, epoch ms. */
  retryAt: number;
}

/**
 * Where `_changes` catch-up stands, and what it changed: the crawl's change feed, its own record
 * (written with every batch applied).
 */
export interface DriftState {
  /** Last change sequence applied (opaque, as the registry gave it). */
  seq: string;
  /** Items added by changes (absent before). */
  inserted: number;
  /** Items rewritten by changes (present before). */
  updated: number;
  /** Items removed by changes. */
  deleted: number;
  /** Held by the process applying changes. */
  lease: Lease | null;
  /** When catch-up last reached the end of the feed. */
  caughtUpAt: number | null;
  /** Notes written to the `feed` stream so far (`notes.ts`). @default 0 */
  notes?: number;
}

/**
 * What asking a crawl's pending documents again did (`["pdocs", crawlId]`, written by each pass of
 * `pending_ask.ts`, guarded: it also numbers the `docs` stream's notes).
 */
export interface PendingDocsState {
  /** Notes written to the `docs` stream (one per document that landed or was recorded). */
  notes: number;
  /** Documents pending after the last pass. */
  pending: number;
  /** Asks made again, in all. */
  asked: number;
  /** Of those, answered 304 (no body: the host still served what it served before). */
  notModified: number;
  /** Documents that landed at their item's revision (or a later one). */
  landed: number;
  /** Documents still behind after the window, recorded as their item's error. */
  expired: number;
  /** When the last pass ended, epoch ms. */
  atMs: number;
  /**
   * Held by the pass asking due documents now (one process at a time asks a crawl's documents:
   * several would send each ask as many times). @default null
   */
  lease?: Lease | null;
}

/**
 * How far behind the registry a crawl that follows its changes is (`["follow", crawlId]`), as its
 * last follow tick saw it: written by whoever ticks (one record, last writer wins).
 */
export interface FollowState {
  /** The registry's `update_seq` last read (or the feed's end, when the tick reached it). */
  head: string | null;
  /**
   * Since when the registry was seen ahead of what the crawl applied, epoch ms; null once caught
   * up to it.
   */
  behindSince: number | null;
  /**
   * Changes between what was applied and the head, where known: 0 when caught up, else the
   * difference of integer sequences (an estimate: sequences are opaque); null otherwise.
   */
  behind: number | null;
  /** How long the last catch-up took from first seeing the registry ahead, in milliseconds. */
  lastLagMs: number;
  /** Changes applied by following since the crawl was done. */
  applied: number;
  /** When the follower last looked, epoch ms. */
  checkedAt: number;
  /**
   * When a look last got its answers from the registry, epoch ms (absent: the crawl's end). While
   * looks fail, the lag grows from it.
   */
  lastGoodAt?: number;
  /** Looks are failing: since when, and why (the latest failure), or null. */
  failing?: { since: number; reason: string } | null;
  /**
   * The last time the feed was taken up again at its head because it did not know the crawl's
   * sequence (a registry that numbered its changes anew), or null: when, from and to which
   * sequence, and why. Every row is compared again after it (`verify.rows.forced`).
   */
  resync?: { at: number; from: string; to: string; why: string } | null;
  /** The copy re-proven while following (`reprove.ts`); absent before the first tick. */
  verify?: FollowVerify;
  /**
   * Where the follower stood over the last minute, newest last (`late_changes.ts`): the feed is
   * read again from there for changes that reached it late, under a sequence already passed.
   */
  trail?: { atMs: number; seq: string }[];
  /** When the feed was last read again behind where the follower stands, epoch ms. */
  lateCheckedAt?: number | null;
  /** Changes that reached the feed late and were applied so. */
  lateApplied?: number;
}

/**
 * Whether the crawl has a change feed to keep it equal to its registry: a start sequence was read
 * when it was planned. A feed that failed or was refused at the final check (`driftError`) is asked
 * again by the follower, and a failing feed shows as a follower that fails (never as a crawl that
 * is quietly no longer followed). The one test of it: the final check applies the feed only then,
 * and only then is a done crawl followed.
 */
export function feedUsable(crawl: CrawlRecord): crawl is CrawlRecord & { startSeq: string } {
  return crawl.startSeq !== null;
}

/** Whether `crawl` is a done crawl that following keeps equal to its registry. */
export function followable(
  crawl: CrawlRecord | null | undefined,
): crawl is CrawlRecord & { startSeq: string } {
  return !!crawl && crawl.status === "done" && feedUsable(crawl);
}

/**
 * The lag a follow state stands for at `nowMs`, in seconds: behind for, or the last catch-up's;
 * while looks fail, at least the time since the last look that got an answer (what happened at the
 * registry since is not known).
 */
export function lagSeconds(state: FollowState, nowMs: number): number {
  const ms = state.behindSince === null ? state.lastLagMs : nowMs - state.behindSince;
  const blind = state.failing ? nowMs - (state.lastGoodAt ?? state.failing.since) : 0;
  return Math.max(0, ms, blind) / 1000;
}

/** Where the re-proof of a followed crawl stands: a round over every range, spread in time. */
export interface FollowVerify {
  /** When this round began, epoch ms. */
  roundStartedAt: number;
  /** Ranges of this round checked so far, in shard id order. */
  next: number;
  /** Ranges left undecided (changes landed while they were counted), with their tries so far. */
  retry: { id: number; tries: number }[];
  /** Ranges this round gave up deciding (the round cannot prove the copy whole). */
  undecided: number;
  /** When every range was last proven, epoch ms: a whole round, or the final check. */
  verifiedAt: number | null;
  /** Ranges found wrong while following, and listed again. */
  repaired: number;
  /** What the last repair was about, or null. */
  lastRepair: string | null;
  /** The row sweep (`row_sweep.ts`); absent before its first tick. */
  rows?: RowSweep;
}

/**
 * Every row of a followed crawl compared with the registry's, in key order, a page at a time
 * (`verify/row_sweep.ts`): where the sweep under way stands, and how the last one ended.
 */
export interface RowSweep {
  /** When this sweep began, epoch ms. */
  startedAt: number;
  /** The key the next page starts at (null: the start of the key space). */
  cursor: string | null;
  /** Rows compared by this sweep so far. */
  compared: number;
  /** Rows this sweep found missing, extra or at another revision, and repaired. */
  repaired: number;
  /** Rows it could not compare (ids kept only by their start). */
  skipped: number;
  /** Why this sweep runs at once rather than on its schedule, or null. */
  forced: string | null;
  /** When the last whole sweep ended, epoch ms (null: none yet). */
  lastEndedAt: number | null;
  /** Rows the last whole sweep repaired. */
  lastRepaired: number;
  /** When a whole sweep last found every row equal: the copy proven whole by its rows. */
  cleanAt: number | null;
}

/** Who runs the final check of a crawl (`["finish", crawlId]`): one runner at a time. */
export interface FinishState {
  /** The check's runner and until when, or null once it gave it back. */
  lease: Lease | null;
}

/** A lease: who works on something, until when. */
export interface Lease {
  /** The worker holding it. */
  owner: string;
  /** Expiry, epoch ms (from the holder's injected clock). */
  untilMs: number;
}
