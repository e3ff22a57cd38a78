/**
 * The store's operations on records (the layout they use is `keys.ts`; the items room builds every
 * item key through `keys` too). Every multi-key update is one atomic operation guarded by versionstamp
 * checks, every `{ ok: false }` is reported to the caller, and every operation stays inside KV's
 * limits by construction (`kv_limits.ts`).
 *
 * Nothing else in the project reads or writes KV keys: planning, the runners and the status
 * readers call these functions. KV failures are sorted by `kvOp` (`kv_ops.ts`): `database is
 * locked` (several processes on one file) is retried; a full disk becomes a `StorageError`.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import { keys } from "./keys.ts";
import { getEntries, kvOp, present } from "./kv_ops.ts";

import type { CrawlRecord, DriftState, FollowState, PlanningState } from "./records.ts";
import type { ShardRecord, SplitRecord } from "./shard_record.ts";

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

/** How far behind a followed crawl is (absent before its first follow tick). */
export async function getFollow(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntryMaybe<FollowState>> {
  return await kvOp(() => kv.get<FollowState>(keys.follow(crawlId)));
}

/** Records what a follow tick saw (one write; the last tick's view wins). */
export async function setFollow(kv: Deno.Kv, crawlId: string, state: FollowState): Promise<void> {
  await kvOp(() => kv.set(keys.follow(crawlId), state));
}

/** The change feed record of a crawl (absent before its first catch-up). */
export async function getFeed(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntryMaybe<DriftState>> {
  return await kvOp(() => kv.get<DriftState>(keys.feed(crawlId)));
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
  const got = await getEntries<ShardRecord>(kv, ids.map((id) => keys.shard(crawlId, id)));
  return got.flatMap((e) => present(e) ?? []);
}

/**
 * Splits a shard: in one op guarded by the victim's versionstamp (and the crawl's, which hands out
 * shard ids), the victim's end shrinks, the child is created, the crawl's id counter moves on and
 * the split is logged. Returns the victim's new entry, or null on a conflict.
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
): Promise<Deno.KvEntry<ShardRecord> | null> {
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
  if (!res.ok) return null;
  return {
    key: keys.shard(id, args.shrunk.id),
    value: args.shrunk,
    versionstamp: res.versionstamp,
  };
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
    keys.notes(id),
    keys.sinksAt(id),
    keys.sinkStates(id),
    keys.mirrorSeqs(id),
    keys.mirrorDocs(id),
    keys.mirrorLocals(id),
    keys.pendingDocs(id),
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
  const owned = [
    keys.planning(id),
    keys.feed(id),
    keys.finish(id),
    keys.follow(id),
    keys.mirrorHead(id),
    keys.pendingDocsState(id),
  ];
  const own = (await kvOp(() => kv.getMany(owned)))
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
