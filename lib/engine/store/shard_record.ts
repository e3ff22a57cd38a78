/**
 * What the store holds of a crawl's shards: a shard's record (its range, cursor, lease, page in
 * flight and verification), a split's record, a fresh shard and one listed again. `store.ts` owns
 * where they live in KV.
 *
 * @module
 */
import type { Lease } from "./records.ts";

/** What a shard's worker is doing right now (published with its heartbeat). */
export interface InFlight {
  /** The first row of the page not yet started; null when every row is started. */
  nextKey: string | null;
  /** Rows of the page whose documents are fetched or started. */
  started: number;
  /** Rows in the page. */
  rows: number;
  /** When the page's documents started, epoch ms. */
  since: number;
}

/** A shard, as stored: keys k with start <= k < end, read up to `cursor`. */
export interface ShardRecord {
  /** Shard id (plan order, then split order). */
  id: number;
  /** First key; null = open. */
  start: string | null;
  /** End key (exclusive); null = open. Shrinks when the shard is split. */
  end: string | null;
  /** Next key to read; null = from the start of the key space. */
  cursor: string | null;
  /** The cursor's own row is already committed: read strictly after it. */
  after: boolean;
  /**
   * A long id committed at the cursor (a short key before it is the cursor), as `keyHash` names
   * it: the next listing leaves that row out. See `page_listing.ts`.
   */
  skip?: string | null;
  /** All of [start, end) is committed (and, where ranks exist, its count checked). */
  done: boolean;
  /** Items committed (each counted exactly once). */
  items: number;
  /** Pages committed. */
  pages: number;
  /** Documents fetched. */
  docs: number;
  /** Documents that could not be had (recorded on their items). */
  docErrors: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Items the plan expected (a split moves part of it to the child). */
  expected: number;
  /** Creation time, epoch ms. */
  startedAt: number;
  /** Last commit, epoch ms. */
  updatedAt: number;
  /** Items per second over recent pages (moving average); 0 before the first page. */
  recentRate?: number;
  /** The worker on it, if any. */
  lease: Lease | null;
  /** The page in flight, if a worker published it. */
  inflight?: InFlight | null;
  /** Attempts in a row that failed; reset by a commit. */
  failures?: number;
  /** Failed attempts over the shard's life (retries). */
  retries?: number;
  /** The latest failure, one line. */
  lastError?: string | null;
  /** Not before this time is the shard tried again, epoch ms. */
  retryAt?: number;
  /** Times the shard was listed again because its count disagreed with the registry. */
  relists?: number;
  /**
   * Its range may still hold what an earlier listing stored (it was relisted, or split from a
   * shard that was): each page then deletes what it makes stale. Only then is the range listed a
   * second time, so only then do pages pay for that lookup.
   */
  revisit?: boolean;
  /**
   * `exact` once its range was proven to hold what the registry lists there (at its end, on a
   * registry that had not changed since the crawl started, or by the crawl's final check);
   * `unproven` when it still disagreed after being listed again, in a crawl done before (see
   * `CrawlRecord.firstDoneAt`), with why in `unproven`.
   */
  verified?: "exact" | "unproven" | null;
  /** Why the range could not be proven (see `verified`), or null. */
  unproven?: string | null;
  /** When it was last listed again, epoch ms (its relists count again after a while). */
  relistedAt?: number | null;
  /** The last page came back this short without proving the end (a possible page cap). */
  shortOf?: number | null;
  /** The shard this one was split from, if any. */
  parent: number | null;
  /** Notes written to this shard's stream so far (`notes.ts`), one a commit of items. @default 0 */
  notes?: number;
}

/** One dynamic split, for status. */
export interface SplitRecord {
  /** The shard that was split. */
  parent: number;
  /** The shard created. */
  child: number;
  /** The split key. */
  at: string;
  /** When, epoch ms. */
  atMs: number;
  /** Items moved to the child (by rank). */
  movedItems: number;
}

/**
 * The shard listed again from its start: counters zeroed, `revisit` set (pages then clear what the
 * earlier listing left), one more relist counted. Commit it with `commitRelist`.
 */
export function relisted(shard: ShardRecord, nowMs: number, lease: Lease | null): ShardRecord {
  return {
    ...shard,
    cursor: shard.start,
    after: false,
    skip: null,
    done: false,
    items: 0,
    docs: 0,
    docErrors: 0,
    tooLarge: 0,
    relists: (shard.relists ?? 0) + 1,
    relistedAt: nowMs,
    revisit: true,
    shortOf: null,
    verified: null,
    inflight: null,
    updatedAt: nowMs,
    lease,
  };
}

/** A fresh shard [start, end) with its cursor at `cursor` and zeroed counters. */
export function newShard(
  range: { id: number; start: string | null; end: string | null; cursor: string | null },
  options: { expected: number; nowMs: number; parent?: number | null },
): ShardRecord {
  return {
    ...range,
    after: false,
    done: false,
    items: 0,
    pages: 0,
    docs: 0,
    docErrors: 0,
    tooLarge: 0,
    expected: options.expected,
    startedAt: options.nowMs,
    updatedAt: options.nowMs,
    lease: null,
    parent: options.parent ?? null,
  };
}
