/**
 * The store: the only module that knows Deno KV key layouts (the items room builds every item key
 * through {@linkcode keys}). Every multi-key update is one atomic operation guarded by versionstamp
 * checks, every `{ ok: false }` is reported to the caller, and every operation stays inside KV's
 * limits by construction (`kv_limits.ts`).
 *
 * Layout (crawl ids and shard ids are the only variable parts besides item ids):
 *
 *     ["crawl", crawlId]                  CrawlRecord
 *     ["planning", crawlId]               PlanningState (who plans it, failed attempts)
 *     ["feed", crawlId]                   DriftState (its change feed: sequence, counts, lease)
 *     ["shard", crawlId, shardId]         ShardRecord (range, cursor, counters, lease, failures)
 *     ["item", crawlId, idKeyPart]        item record bytes (see item_codec.ts)
 *     ["block", crawlId, firstId]         a keys-only page's rows, packed (see item_blocks.ts)
 *     ["chunk", crawlId, idKeyPart, n]    Uint8Array, part n of a large document
 *     ["dead", crawlId, shardId]          a wake-up message the KV queue gave up on
 *     ["split", crawlId, seq]             SplitRecord (dynamic rebalancing log)
 *     ["pending", crawlId, shardId]       1: the shard is not done (the index lease workers look in)
 *     ["beat", processId]                 Beat: a working process's heartbeat (see leases.ts)
 *     ["rdrift", crawlId, shardId, dir]   Deno.KvU64: changes applied in a shard's range since it
 *                                         was listed, `in` (items added) or `out` (items removed)
 *
 * Nothing else in the project reads or writes KV keys: planning, the runners and the status
 * readers call these functions. KV failures are sorted here: `database is locked` (several
 * processes on one file) is retried; a full disk becomes a {@linkcode StorageError}.
 *
 * @module
 */
import { KV_LOCKED_RETRY } from "../../base/retry_policy.ts";
import { ConflictError, FatalError, StorageError } from "../../base/errors.ts";
import { AtomicBudget, keySize, kvFailureKind, valueSizeBound } from "./kv_limits.ts";

export type {
  CrawlRecord,
  CrawlStatus,
  DriftState,
  InFlight,
  Lease,
  PlanningState,
  ShardRecord,
  SplitRecord,
  Verification,
} from "./records.ts";
export { newShard, relisted } from "./records.ts";
import type {
  CrawlRecord,
  DriftState,
  PlanningState,
  ShardRecord,
  SplitRecord,
} from "./records.ts";

/** Key builders, exported for the item part and for tests that need to look underneath. */
export const keys = {
  crawl: (crawlId: string): Deno.KvKey => ["crawl", crawlId],
  crawls: (): Deno.KvKey => ["crawl"],
  planning: (crawlId: string): Deno.KvKey => ["planning", crawlId],
  feed: (crawlId: string): Deno.KvKey => ["feed", crawlId],
  shard: (crawlId: string, shard: number): Deno.KvKey => ["shard", crawlId, shard],
  shards: (crawlId: string): Deno.KvKey => ["shard", crawlId],
  item: (crawlId: string, part: Deno.KvKeyPart): Deno.KvKey => ["item", crawlId, part],
  items: (crawlId: string): Deno.KvKey => ["item", crawlId],
  block: (crawlId: string, first: string): Deno.KvKey => ["block", crawlId, first],
  blocks: (crawlId: string): Deno.KvKey => ["block", crawlId],
  chunk: (
    crawlId: string,
    part: Deno.KvKeyPart,
    n: number,
  ): Deno.KvKey => ["chunk", crawlId, part, n],
  chunks: (crawlId: string, part?: Deno.KvKeyPart): Deno.KvKey =>
    part === undefined ? ["chunk", crawlId] : ["chunk", crawlId, part],
  dead: (crawlId: string, shard: number): Deno.KvKey => ["dead", crawlId, shard],
  deads: (crawlId: string): Deno.KvKey => ["dead", crawlId],
  split: (crawlId: string, seq: number): Deno.KvKey => ["split", crawlId, seq],
  splits: (crawlId: string): Deno.KvKey => ["split", crawlId],
  rangeDrift: (crawlId: string, shard: number, dir: "in" | "out"): Deno.KvKey => [
    "rdrift",
    crawlId,
    shard,
    dir,
  ],
  rangeDrifts: (crawlId: string): Deno.KvKey => ["rdrift", crawlId],
  pending: (crawlId: string, shard: number): Deno.KvKey => ["pending", crawlId, shard],
  pendings: (crawlId: string): Deno.KvKey => ["pending", crawlId],
  beat: (processId: string): Deno.KvKey => ["beat", processId],
  beats: (): Deno.KvKey => ["beat"],
};

/** A key of the items layout, read back into its parts (see `keys`). */
export type ItemKey =
  | { kind: "item"; crawlId: string; part: Deno.KvKeyPart }
  | { kind: "block"; crawlId: string; first: string }
  | { kind: "chunk"; crawlId: string; part: Deno.KvKeyPart; n: number };

/**
 * The parts of an item, block or chunk key (built by `keys`); null for any other key. Readers of
 * keys go through this instead of testing tuple positions by hand.
 */
export function parseKey(key: Deno.KvKey): ItemKey | null {
  const [kind, crawlId, a, b] = key;
  if (typeof crawlId !== "string") return null;
  if (kind === "item" && key.length === 3) return { kind, crawlId, part: a };
  if (kind === "block" && key.length === 3 && typeof a === "string") {
    return { kind, crawlId, first: a };
  }
  if (kind === "chunk" && key.length === 4 && typeof b === "number") {
    return { kind, crawlId, part: a, n: b };
  }
  return null;
}

/** Items added and removed by applied changes in one shard's range since it was listed. */
export interface RangeDrift {
  /** Items added (absent before the change). */
  in: number;
  /** Items removed (present before the change). */
  out: number;
}

/** The applied changes per shard range of a crawl (shards without any are absent). */
export async function listRangeDrift(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Map<number, RangeDrift>> {
  return await kvOp(async () => {
    const out = new Map<number, RangeDrift>();
    for await (const e of kv.list<Deno.KvU64>({ prefix: keys.rangeDrifts(crawlId) })) {
      const shard = e.key[2] as number;
      const d = out.get(shard) ?? { in: 0, out: 0 };
      d[e.key[3] as "in" | "out"] = Number(e.value.value);
      out.set(shard, d);
    }
    return out;
  });
}

/**
 * Items a shard's range holds in the store: what its listing committed plus the changes applied
 * there since (exact by construction: each change is counted by whether its item was present).
 */
export function shardStored(shard: ShardRecord, drift: ReadonlyMap<number, RangeDrift>): number {
  const d = drift.get(shard.id);
  return shard.items + (d ? d.in - d.out : 0);
}

/**
 * Commits a shard listed again from its start (`next` from `relisted`), guarded like any shard
 * commit; the changes counted in its range go in the same op (the new listing counts them).
 */
export function commitRelist(
  kv: Deno.Kv,
  crawlId: string,
  entry: Deno.KvEntry<ShardRecord>,
  next: ShardRecord,
  extra?: (op: Deno.AtomicOperation) => void,
): Promise<Deno.KvEntry<ShardRecord> | null> {
  return commitShard(kv, crawlId, entry, next, (op) => {
    op.delete(keys.rangeDrift(crawlId, next.id, "in")).delete(
      keys.rangeDrift(crawlId, next.id, "out"),
    );
    extra?.(op);
  });
}

/**
 * Runs a KV operation: `database is locked` (several processes, one file) is retried a bounded
 * number of times; a full disk becomes a {@linkcode StorageError}; anything else is rethrown.
 */
export async function kvOp<T>(fn: () => Promise<T>, options: { maxAttempts?: number } = {}) {
  const max = options.maxAttempts ?? KV_LOCKED_RETRY.maxAttempts;
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const kind = kvFailureKind(err);
      if (kind === "storage") {
        throw new StorageError(`KV: ${(err as Error).message}`, { cause: err });
      }
      if (kind !== "locked" || attempt >= max) throw err;
      const { pauseStepMs, maxPauseMs } = KV_LOCKED_RETRY;
      const pause = Math.min(maxPauseMs, pauseStepMs * attempt) * (0.5 + Math.random());
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}

/**
 * Read-modify-write of one record with bounded retries: the one loop for every such update.
 * `change` gets the record (null when absent) and returns the next one, or `undefined` to leave it
 * as it is (the entry as read is returned then). Another writer between the read and the write
 * makes it read and decide again, at most `maxAttempts` times; `change` may throw to give up.
 * @throws ConflictError when every attempt met another writer.
 */
export async function updateRecord<T>(
  kv: Deno.Kv,
  key: Deno.KvKey,
  change: (current: T | null) => T | undefined,
  options: { maxAttempts?: number } = {},
): Promise<Deno.KvEntryMaybe<T>> {
  const max = options.maxAttempts ?? 20;
  for (let attempt = 0; attempt < max; attempt++) {
    const entry = await kvOp(() => kv.get<T>(key));
    const next = change(entry.value);
    if (next === undefined) return entry;
    const res = await kvOp(() => kv.atomic().check(entry).set(key, next).commit());
    if (res.ok) return { key, value: next, versionstamp: res.versionstamp };
  }
  throw new ConflictError(`too many concurrent updates of ${JSON.stringify(key)}`);
}

/** The planning record of a crawl (absent: nobody plans it, no attempt failed). */
export async function getPlanning(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntryMaybe<PlanningState>> {
  return await kvOp(() => kv.get<PlanningState>(keys.planning(crawlId)));
}

/** Forgets how a crawl's planning went (its attempts start afresh). */
export async function clearPlanning(kv: Deno.Kv, crawlId: string): Promise<void> {
  await kvOp(() => kv.delete(keys.planning(crawlId)));
}

/** The change feed record of a crawl (absent before its first catch-up). */
export async function getFeed(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntryMaybe<DriftState>> {
  return await kvOp(() => kv.get<DriftState>(keys.feed(crawlId)));
}

/** The entry when its key holds a value, else null (one typed view of `Deno.KvEntryMaybe`). */
export function present<T>(entry: Deno.KvEntryMaybe<T>): Deno.KvEntry<T> | null {
  return entry.versionstamp === null ? null : entry as Deno.KvEntry<T>;
}

/** The crawl record with its versionstamp, or null. */
export async function getCrawl(kv: Deno.Kv, id: string): Promise<Deno.KvEntryMaybe<CrawlRecord>> {
  return await kvOp(() => kv.get<CrawlRecord>(keys.crawl(id)));
}

/** The crawl and one of its shards, read together (one round trip). */
export async function getCrawlAndShard(
  kv: Deno.Kv,
  crawlId: string,
  shard: number,
): Promise<[Deno.KvEntryMaybe<CrawlRecord>, Deno.KvEntryMaybe<ShardRecord>]> {
  const [c, s] = await kvOp(() => kv.getMany([keys.crawl(crawlId), keys.shard(crawlId, shard)]));
  return [c as Deno.KvEntryMaybe<CrawlRecord>, s as Deno.KvEntryMaybe<ShardRecord>];
}

/** Every crawl in the store, with versionstamps. */
export async function listCrawlEntries(kv: Deno.Kv): Promise<Deno.KvEntry<CrawlRecord>[]> {
  return await kvOp(async () => {
    const out: Deno.KvEntry<CrawlRecord>[] = [];
    for await (const e of kv.list<CrawlRecord>({ prefix: keys.crawls() })) out.push(e);
    return out;
  });
}

/** Every crawl in the store. */
export async function listCrawls(kv: Deno.Kv): Promise<CrawlRecord[]> {
  return await kvOp(async () => {
    const out: CrawlRecord[] = [];
    for await (const e of kv.list<CrawlRecord>({ prefix: keys.crawls() })) out.push(e.value);
    return out;
  });
}

/** One shard with its versionstamp. */
export async function getShard(
  kv: Deno.Kv,
  crawlId: string,
  shard: number,
): Promise<Deno.KvEntryMaybe<ShardRecord>> {
  return await kvOp(() => kv.get<ShardRecord>(keys.shard(crawlId, shard)));
}

/** Every shard of a crawl, in id order, with versionstamps. */
export async function listShards(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntry<ShardRecord>[]> {
  return await kvOp(async () => {
    const out: Deno.KvEntry<ShardRecord>[] = [];
    for await (const e of kv.list<ShardRecord>({ prefix: keys.shards(crawlId) })) out.push(e);
    return out;
  });
}

/**
 * Creates a crawl record unless one with that id exists. Returns the entry that now stands under
 * the id: ours, or the one another process created first.
 */
export async function createCrawlRecord(
  kv: Deno.Kv,
  crawl: CrawlRecord,
): Promise<Deno.KvEntry<CrawlRecord>> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const res = await kvOp(() =>
      kv.atomic().check({ key: keys.crawl(crawl.id), versionstamp: null })
        .set(keys.crawl(crawl.id), crawl).commit()
    );
    const entry = await getCrawl(kv, crawl.id);
    const found = present(entry);
    if (found) return found;
    if (!res.ok) continue; // created and deleted in between: try again
  }
  throw new FatalError(`crawl ${crawl.id} could not be created (it keeps being deleted)`);
}

/**
 * Writes a plan's shards while the planner still holds the crawl's planning record as `claimed`
 * (each batch checks its versionstamp), after deleting shards a crashed earlier attempt left
 * behind; batches are sized by KV's limits. Returns false as soon as the claim is lost: another
 * planner took over and nothing more is written.
 */
export async function writePlannedShards(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<PlanningState>,
  crawlId: string,
  shards: ShardRecord[],
): Promise<boolean> {
  const keep = new Set(shards.map((s) => s.id));
  const stale = (await listShards(kv, crawlId)).map((e) => e.value.id)
    .filter((sid) => !keep.has(sid));
  const muts = [
    ...stale.flatMap((sid) => [
      { key: keys.shard(crawlId, sid), value: null },
      { key: keys.pending(crawlId, sid), value: null },
    ]),
    ...shards.flatMap((s) => [
      { key: keys.shard(crawlId, s.id), value: s },
      ...(s.done ? [] : [{ key: keys.pending(crawlId, s.id), value: 1 }]),
    ]),
  ];
  const claim = keySize(claimed.key);
  for (let i = 0; i < muts.length;) {
    const budget = new AtomicBudget().check(claim);
    const op = kv.atomic().check(claimed);
    for (const first = i; i < muts.length; i++) {
      const m = muts[i];
      const bytes = keySize(m.key);
      const size = m.value === null ? null : valueSizeBound(m.value);
      if (i > first && !budget.fitsSet(bytes, size)) break;
      if (m.value === null) (op.delete(m.key), budget.delete(bytes));
      else (op.set(m.key, m.value), budget.set(bytes, size!));
    }
    const res = await kvOp(() => op.commit());
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
  const res = await kvOp(() => kv.atomic().check(entry).set(keys.crawl(next.id), next).commit());
  return res.ok ? { key: entry.key, value: next, versionstamp: res.versionstamp } : null;
}

/**
 * Commits a shard change if the shard has not changed since `entry` was read; `extra` adds the
 * caller's own mutations (the page's last item batch) to the same atomic op. Returns the new entry,
 * or null on a conflict, in which case nothing at all was written.
 */
export async function commitShard(
  kv: Deno.Kv,
  crawlId: string,
  entry: Deno.KvEntry<ShardRecord>,
  next: ShardRecord,
  extra?: (op: Deno.AtomicOperation) => void,
): Promise<Deno.KvEntry<ShardRecord> | null> {
  const res = await kvOp(() => {
    const op = kv.atomic().check(entry).set(keys.shard(crawlId, next.id), next);
    // The pending index moves in the same op as the shard: finished, or opened again.
    if (!entry.value.done && next.done) op.delete(keys.pending(crawlId, next.id));
    if (entry.value.done && !next.done) op.set(keys.pending(crawlId, next.id), 1);
    extra?.(op);
    return op.commit();
  });
  return res.ok ? { key: entry.key, value: next, versionstamp: res.versionstamp } : null;
}

/**
 * Up to `limit` shard ids of a crawl that are not done, from the pending index, starting at shard
 * `from` and going round: a bounded look, however many shards there are (lease workers start at
 * a random shard so that they spread).
 */
export async function listPending(
  kv: Deno.Kv,
  crawlId: string,
  options: { limit: number; from?: number },
): Promise<number[]> {
  const read = (selector: Deno.KvListSelector, limit: number) =>
    kvOp(async () => {
      const out: number[] = [];
      for await (const e of kv.list(selector, { limit })) out.push(e.key[2] as number);
      return out;
    });
  const prefix = keys.pendings(crawlId);
  const from = options.from ?? 0;
  const after = await read({ prefix, start: keys.pending(crawlId, from) }, options.limit);
  if (after.length >= options.limit || from === 0) return after;
  const before = await read(
    { prefix, end: keys.pending(crawlId, from) },
    options.limit - after.length,
  );
  return [...after, ...before];
}

/** The shard records of `ids` (absent ones left out), read ten at a time. */
export async function getShards(
  kv: Deno.Kv,
  crawlId: string,
  ids: readonly number[],
): Promise<Deno.KvEntry<ShardRecord>[]> {
  const out: Deno.KvEntry<ShardRecord>[] = [];
  for (let i = 0; i < ids.length; i += 10) {
    const got = await kvOp(() =>
      kv.getMany<ShardRecord[]>(ids.slice(i, i + 10).map((id) => keys.shard(crawlId, id)))
    );
    for (const e of got) if (present(e)) out.push(present(e)!);
  }
  return out;
}

/**
 * Splits a shard: in one op guarded by the victim's versionstamp (and the crawl's, which hands out
 * shard ids), the victim's end shrinks, the child is created, the crawl's id counter moves on and
 * the split is logged. Returns false on a conflict.
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
): Promise<boolean> {
  const id = args.crawl.value.id;
  // The split log's slot is checked too, so two splits can never claim one sequence number.
  const res = await kvOp(() =>
    kv.atomic()
      .check(args.crawl)
      .check(args.victim)
      .check({ key: keys.shard(id, args.child.id), versionstamp: null })
      .check({ key: keys.split(id, args.seq), versionstamp: null })
      .set(keys.crawl(id), { ...args.crawl.value, nextShardId: args.child.id + 1 })
      .set(keys.shard(id, args.shrunk.id), args.shrunk)
      .set(keys.shard(id, args.child.id), args.child)
      .set(keys.pending(id, args.child.id), 1)
      .set(keys.split(id, args.seq), args.split)
      .commit()
  );
  return res.ok;
}

/** The split log of a crawl. */
export async function listSplits(kv: Deno.Kv, crawlId: string): Promise<SplitRecord[]> {
  return await kvOp(async () => {
    const out: SplitRecord[] = [];
    for await (const e of kv.list<SplitRecord>({ prefix: keys.splits(crawlId) })) out.push(e.value);
    return out;
  });
}

/** The key a wake-up message lands under when the KV queue gives up on it. */
export function deadLetterKey(crawlId: string, shardId: number): Deno.KvKey {
  return keys.dead(crawlId, shardId);
}

/** Dead-lettered wake-up messages of a crawl, by shard id. */
export async function listDeadLetters(kv: Deno.Kv, crawlId: string): Promise<number[]> {
  return await kvOp(async () => {
    const out: number[] = [];
    for await (const e of kv.list({ prefix: keys.deads(crawlId) })) out.push(e.key[2] as number);
    return out;
  });
}

/** Forgets a shard's dead letter (it was dispatched again). */
export async function clearDeadLetter(kv: Deno.Kv, crawlId: string, shard: number): Promise<void> {
  await kvOp(() => kv.delete(keys.dead(crawlId, shard)));
}

/**
 * Deletes everything of a crawl in bounded batches (items, blocks, chunks, shards, splits, dead
 * letters), the crawl record last, guarded so that a crawl revived meanwhile is not deleted.
 * Returns the number of keys deleted, or null when the record changed under us.
 */
export async function deleteCrawlData(
  kv: Deno.Kv,
  entry: Deno.KvEntry<CrawlRecord>,
  options: { batch?: number } = {},
): Promise<number | null> {
  const id = entry.value.id;
  // A key is at most 2,048 bytes and a delete counts it once: 350 of them stay under 819,200.
  const batch = Math.max(1, Math.min(options.batch ?? 300, 350));
  let deleted = 0;
  const prefixes = [
    keys.items(id),
    keys.blocks(id),
    keys.chunks(id),
    keys.rangeDrifts(id),
    keys.pendings(id),
    keys.shards(id),
    keys.splits(id),
  ];
  for (const prefix of prefixes) {
    for (;;) {
      const found: Deno.KvKey[] = [];
      for await (const e of kv.list({ prefix }, { limit: batch })) found.push(e.key);
      if (found.length === 0) break;
      const res = await kvOp(() => {
        const op = kv.atomic().check(entry);
        for (const k of found) op.delete(k);
        return op.commit();
      });
      if (!res.ok) return null;
      deleted += found.length;
    }
  }
  const own = (await kvOp(() => kv.getMany([keys.planning(id), keys.feed(id)])))
    .filter((e) => e.versionstamp !== null).map((e) => e.key);
  deleted += own.length;
  const res = await kvOp(async () => {
    const op = kv.atomic().check(entry).delete(keys.crawl(id));
    for (const k of own) op.delete(k);
    for await (const e of kv.list({ prefix: keys.deads(id) })) op.delete(e.key);
    return await op.commit();
  });
  return res.ok ? deleted + 1 : null;
}
