/**
 * The store: the only module that knows Deno KV key layouts. Every multi-key update is one atomic
 * operation guarded by versionstamp checks, and every `{ ok: false }` is reported to the caller.
 *
 * Layout (crawl ids and shard ids are the only variable parts besides item ids):
 *
 *     ["crawl", crawlId]                  CrawlRecord
 *     ["shard", crawlId, shardId]         ShardRecord (cursor, counters, token, lease)
 *     ["item", crawlId, itemId]           ItemRecord (document inline, chunked, or marked too large)
 *     ["chunk", crawlId, itemId, n]       Uint8Array, part n of a large document
 *     ["dead", crawlId, shardId, token]   a page message whose deliveries were exhausted
 *     ["split", crawlId, seq]             SplitRecord (dynamic rebalancing log)
 *
 * The store is this module and its private item part, `item_store.ts` (item writes, chunked
 * documents, drift batches, item reads), which builds every key with the builders below. Nothing
 * else in the project reads or writes KV keys: the coordinator, the dispatchers and the status
 * readers call these functions.
 *
 * @module
 */
import { FatalError } from "../base/errors.ts";
import type { CrawlSpec } from "../base/spec.ts";

/** Lifecycle of a crawl. */
export type CrawlStatus = "planning" | "running" | "paused" | "done" | "failed" | "cancelled";

/** A crawl, as stored. */
export interface CrawlRecord extends CrawlSpec {
  /** Crawl id (derived from the spec unless given). */
  id: string;
  /** Lifecycle state. */
  status: CrawlStatus;
  /** Items in the registry when planned. */
  total: number;
  /** Listing requests the plan took. */
  planRequests: number;
  /** How ranks were found (`rank`, `skip`, `listing`). */
  planMethod: string;
  /** Shard ids handed out so far (plan + splits); the next split gets this id. */
  nextShardId: number;
  /** The registry's update sequence when the crawl started (for `_changes` catch-up). */
  startSeq: string | null;
  /** Held by the process planning the crawl (status `planning`). */
  planLease: Lease | null;
  /** Changes applied after the shards finished (registry drift), once catch-up has run. */
  drift?: DriftState;
  /** Why drift catch-up could not run (the registry has no usable `_changes`), if so. */
  driftError?: string;
  /** Creation time, epoch ms. */
  createdAt: number;
  /** Last update, epoch ms. */
  updatedAt: number;
  /** When it finished or was cancelled, epoch ms. */
  finishedAt: number | null;
  /** Why it failed, if it did. */
  error: string | null;
}

/** Where `_changes` catch-up stands, and what it changed. */
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
}

/** A lease held by a worker on a shard. */
export interface Lease {
  /** The worker holding it. */
  owner: string;
  /** Expiry, epoch ms (from the holder's injected clock). */
  untilMs: number;
}

/** A shard, as stored: keys k with start <= k < end, read up to `cursor`. */
export interface ShardRecord {
  /** Shard id (plan order, then split order). */
  id: number;
  /** First key; null = open. */
  start: string | null;
  /** End key (exclusive); null = open. Shrinks when the shard is split. */
  end: string | null;
  /** Next key to read (inclusive); null = from the start of the key space. */
  cursor: string | null;
  /** All of [start, end) is committed. */
  done: boolean;
  /** Items committed (each counted exactly once). */
  items: number;
  /** Pages committed. */
  pages: number;
  /** Documents fetched. */
  docs: number;
  /** Documents that could not be fetched. */
  docErrors: number;
  /** Documents recorded as too large. */
  tooLarge: number;
  /** Items the plan expected (a split moves part of it to the child). */
  expected: number;
  /** Bumped by every commit; page messages carry it so stale ones are recognised. */
  token: number;
  /** Creation time, epoch ms. */
  startedAt: number;
  /** Last commit, epoch ms. */
  updatedAt: number;
  /** Items per second over recent pages (moving average); 0 before the first page. */
  recentRate?: number;
  /** The lease, in lease dispatch. */
  lease: Lease | null;
  /** The shard this one was split from, if any. */
  parent: number | null;
}

/** An item, as stored and exported. */
export interface ItemRecord {
  /** The item's id. */
  id: string;
  /** Its revision when listed (or when its change was applied). */
  rev: string;
  /** The document's JSON text as UTF-8 bytes, when fetched and small enough to sit inline. */
  doc?: Uint8Array;
  /** Number of chunks under ["chunk", crawl, id, n] holding the document. */
  chunks?: number;
  /** Document size in bytes when fetched. */
  docBytes?: number;
  /** The document was larger than allowed: recorded, not stored. */
  tooLarge?: boolean;
  /** The document could not be fetched (permanent error). */
  error?: { status: number; reason: string };
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

/** Mutations per atomic op used for batches (KV allows 1,000). */
export const BATCH_MUTATIONS = 1000;
/** Bytes per atomic op used for batches (KV allows 819,200). */
export const BATCH_BYTES = 600_000;

/** A fresh shard [start, end) with its cursor at `cursor` and zeroed counters. */
export function newShard(
  f: { id: number; start: string | null; end: string | null; cursor: string | null },
  o: { expected: number; nowMs: number; parent?: number | null },
): ShardRecord {
  return {
    ...f,
    done: false,
    items: 0,
    pages: 0,
    docs: 0,
    docErrors: 0,
    tooLarge: 0,
    expected: o.expected,
    token: 0,
    startedAt: o.nowMs,
    updatedAt: o.nowMs,
    lease: null,
    parent: o.parent ?? null,
  };
}

/** Longest item id used as a key part as it is, in UTF-8 bytes (a whole KV key holds 2,048). */
const MAX_ID_KEY_BYTES = 1_500;

/**
 * The key part for an item id: the id itself, or for an id too long for a KV key, its first 400
 * characters, a NUL and a 64-bit hash of the whole id (the record keeps the full id). Items stay
 * in id order except among such long ids.
 */
export function idKeyPart(id: string): string {
  if (
    id.length * 3 <= MAX_ID_KEY_BYTES || new TextEncoder().encode(id).length <= MAX_ID_KEY_BYTES
  ) {
    return id;
  }
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  for (let i = 0; i < id.length; i++) {
    const c = id.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193);
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15);
  }
  const hex = (x: number) => (x >>> 0).toString(16).padStart(8, "0");
  return `${id.slice(0, 400)}\u0000${hex(h1)}${hex(h2)}${id.length}`;
}

/** Key builders, exported for tests that need to look underneath. */
export const keys = {
  crawl: (id: string): Deno.KvKey => ["crawl", id],
  crawls: (): Deno.KvKey => ["crawl"],
  shard: (crawl: string, shard: number): Deno.KvKey => ["shard", crawl, shard],
  shards: (crawl: string): Deno.KvKey => ["shard", crawl],
  item: (crawl: string, id: string): Deno.KvKey => ["item", crawl, idKeyPart(id)],
  items: (crawl: string): Deno.KvKey => ["item", crawl],
  chunk: (crawl: string, id: string, n: number): Deno.KvKey => ["chunk", crawl, idKeyPart(id), n],
  chunks: (crawl: string, id: string): Deno.KvKey => ["chunk", crawl, idKeyPart(id)],
  dead: (crawl: string, shard: number, token: number): Deno.KvKey => ["dead", crawl, shard, token],
  deads: (crawl: string): Deno.KvKey => ["dead", crawl],
  split: (crawl: string, seq: number): Deno.KvKey => ["split", crawl, seq],
  splits: (crawl: string): Deno.KvKey => ["split", crawl],
};

/** Retries a KV operation that failed with `database is locked` (several processes, one file). */
export async function withLockRetry<T>(
  fn: () => Promise<T>,
  options: { maxAttempts?: number } = {},
): Promise<T> {
  const max = options.maxAttempts ?? 50;
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const locked = err instanceof Error && /database is locked|SQLITE_BUSY/i.test(err.message);
      if (!locked || attempt >= max) throw err;
      await new Promise((r) => setTimeout(r, Math.min(200, 5 * attempt) * (0.5 + Math.random())));
    }
  }
}

/** The crawl record with its versionstamp, or null. */
export async function getCrawl(kv: Deno.Kv, id: string): Promise<Deno.KvEntryMaybe<CrawlRecord>> {
  return await withLockRetry(() => kv.get<CrawlRecord>(keys.crawl(id)));
}

/** Every crawl in the store. */
export async function listCrawls(kv: Deno.Kv): Promise<CrawlRecord[]> {
  const out: CrawlRecord[] = [];
  for await (const e of kv.list<CrawlRecord>({ prefix: keys.crawls() })) out.push(e.value);
  return out;
}

/** One shard with its versionstamp. */
export async function getShard(
  kv: Deno.Kv,
  crawl: string,
  shard: number,
): Promise<Deno.KvEntryMaybe<ShardRecord>> {
  return await withLockRetry(() => kv.get<ShardRecord>(keys.shard(crawl, shard)));
}

/** Every shard of a crawl, in id order, with versionstamps. */
export async function listShards(kv: Deno.Kv, crawl: string): Promise<Deno.KvEntry<ShardRecord>[]> {
  return await withLockRetry(async () => {
    const out: Deno.KvEntry<ShardRecord>[] = [];
    for await (const e of kv.list<ShardRecord>({ prefix: keys.shards(crawl) })) out.push(e);
    return out;
  });
}

/**
 * Creates a crawl record (status `planning`) unless one with that id exists. Returns the entry
 * that now stands under the id: ours, or the one another process created first.
 */
export async function createCrawlRecord(
  kv: Deno.Kv,
  crawl: CrawlRecord,
): Promise<Deno.KvEntry<CrawlRecord>> {
  for (;;) {
    const res = await withLockRetry(() =>
      kv.atomic().check({ key: keys.crawl(crawl.id), versionstamp: null }).set(
        keys.crawl(crawl.id),
        crawl,
      ).commit()
    );
    const entry = await getCrawl(kv, crawl.id);
    if (entry.value) return entry as Deno.KvEntry<CrawlRecord>;
    if (res.ok) continue; // deleted in between: try again
  }
}

/**
 * Writes a plan's shards while the planner still holds the crawl record as `claimed` (each batch
 * checks its versionstamp), after deleting shards a crashed earlier attempt left behind. Returns
 * false as soon as the claim is lost: another planner took over and nothing more is written.
 */
export async function writePlannedShards(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<CrawlRecord>,
  shards: ShardRecord[],
): Promise<boolean> {
  const id = claimed.value.id;
  const keep = new Set(shards.map((s) => s.id));
  const stale = (await listShards(kv, id)).map((e) => e.value.id).filter((sid) => !keep.has(sid));
  const muts: ((op: Deno.AtomicOperation) => void)[] = [
    ...stale.map((sid) => (op: Deno.AtomicOperation) => op.delete(keys.shard(id, sid))),
    ...shards.map((s) => (op: Deno.AtomicOperation) => op.set(keys.shard(id, s.id), s)),
  ];
  for (let i = 0; i < muts.length; i += BATCH_MUTATIONS) {
    const res = await withLockRetry(() => {
      const op = kv.atomic().check(claimed);
      for (const m of muts.slice(i, i + BATCH_MUTATIONS)) m(op);
      return op.commit();
    });
    if (!res.ok) return false;
  }
  return true;
}

/**
 * Updates a crawl record if it has not changed since `entry` was read. Returns the new entry, or
 * null on a conflict (the caller re-reads and decides again).
 */
export async function updateCrawl(
  kv: Deno.Kv,
  entry: Deno.KvEntry<CrawlRecord>,
  next: CrawlRecord,
): Promise<Deno.KvEntry<CrawlRecord> | null> {
  const res = await withLockRetry(() =>
    kv.atomic().check(entry).set(keys.crawl(next.id), next).commit()
  );
  return res.ok ? { key: entry.key, value: next, versionstamp: res.versionstamp } : null;
}

/**
 * Commits a shard change if the shard has not changed since `entry` was read; `extra` adds the
 * caller's own mutations (the next page's message, a lease) to the same atomic op. Returns false on
 * a conflict, in which case nothing at all was written.
 */
export async function commitShard(
  kv: Deno.Kv,
  crawl: string,
  entry: Deno.KvEntry<ShardRecord>,
  next: ShardRecord,
  extra?: (op: Deno.AtomicOperation) => void,
): Promise<boolean> {
  const res = await withLockRetry(() => {
    // The page this commit completes can no longer be a dead letter.
    const op = kv.atomic().check(entry).set(keys.shard(crawl, next.id), next)
      .delete(keys.dead(crawl, next.id, entry.value.token));
    extra?.(op);
    return op.commit();
  });
  return res.ok;
}

/**
 * Splits a shard: in one op guarded by the victim's versionstamp (and the crawl's, which hands out
 * shard ids), the victim's end shrinks, the child is created, the crawl's id counter moves on and
 * the split is logged; `extra` adds the child's dispatch. Returns false on a conflict.
 */
export async function commitSplit(
  kv: Deno.Kv,
  args: {
    crawl: Deno.KvEntry<CrawlRecord>;
    victim: Deno.KvEntry<ShardRecord>;
    shrunk: ShardRecord;
    child: ShardRecord;
    split: SplitRecord;
    seq: number;
  },
  extra?: (op: Deno.AtomicOperation) => void,
): Promise<boolean> {
  const id = args.crawl.value.id;
  // The split log's slot is checked too, so two splits can never claim one sequence number.
  const res = await withLockRetry(() => {
    const op = kv.atomic()
      .check(args.crawl)
      .check(args.victim)
      .check({ key: keys.shard(id, args.child.id), versionstamp: null })
      .check({ key: keys.split(id, args.seq), versionstamp: null })
      .set(keys.crawl(id), { ...args.crawl.value, nextShardId: args.child.id + 1 })
      .set(keys.shard(id, args.shrunk.id), args.shrunk)
      .set(keys.shard(id, args.child.id), args.child)
      .set(keys.split(id, args.seq), args.split);
    extra?.(op);
    return op.commit();
  });
  return res.ok;
}

/** The split log of a crawl. */
export async function listSplits(kv: Deno.Kv, crawl: string): Promise<SplitRecord[]> {
  const out: SplitRecord[] = [];
  for await (const e of kv.list<SplitRecord>({ prefix: keys.splits(crawl) })) out.push(e.value);
  return out;
}

/** Commits an unguarded batch; an `ok: false` there is a broken invariant, so it throws. */
export async function commitOrThrow(op: Deno.AtomicOperation, what: string): Promise<void> {
  const res = await withLockRetry(() => op.commit());
  // Unguarded batches only fail on KV errors, which throw; an ok:false here is a broken invariant.
  if (!res.ok) throw new FatalError(`KV refused an unguarded batch while ${what}`);
}

/** The key a page message lands under when the queue gives up on it (`keysIfUndelivered`). */
export function deadLetterKey(
  msg: { crawlId: string; shardId: number; token: number },
): Deno.KvKey {
  return keys.dead(msg.crawlId, msg.shardId, msg.token);
}

/** Records a page message that kept failing (the page's commit deletes it again). */
export async function recordDeadLetter(
  kv: Deno.Kv,
  msg: { crawlId: string; shardId: number; token: number },
  error: string,
  atMs: number,
): Promise<void> {
  await withLockRetry(() =>
    kv.set(keys.dead(msg.crawlId, msg.shardId, msg.token), {
      message: msg,
      error,
      at: new Date(atMs).toISOString(),
    })
  );
}

/** Dead-lettered page messages of a crawl. */
export async function listDeadLetters(kv: Deno.Kv, crawl: string): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const e of kv.list({ prefix: keys.deads(crawl) })) out.push(e.value);
  return out;
}
