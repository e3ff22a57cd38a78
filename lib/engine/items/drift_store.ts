/**
 * The store's drift part: applying a batch of `_changes` to a crawl's items with exact counts.
 *
 * Changes are applied in groups that each fit one atomic op. Large documents' chunks are written
 * first (idempotent); then ONE op per group, guarded by the crawl's feed record's versionstamp and
 * by each changed item's own versionstamp as read just before, writes the item records, deletes removed
 * items and their chunks, and moves the feed record on to the group's last sequence with exact
 * counters (an item counts as inserted only if it was absent, as deleted only if it was present).
 * An item held in a block (keys-only crawls) leaves its block in the same op, guarded by the
 * block's versionstamp, and lives on as an item record if it was updated: every item stays in
 * exactly one layout. A crash or a competing writer between groups leaves every counted change
 * counted once.
 *
 * @module
 */
import type { DocResult } from "../../plan/source.ts";
import { blockHolding, type BlockRow, encodeBlock } from "./item_blocks.ts";
import { chunkKeys, itemPresence } from "./item_read.ts";
import { type ItemInput, prepareWrites, setInBatches } from "./item_store.ts";
import { AtomicBudget, keySize, MAX_CHECKS, valueSizeBound } from "../store/mod.ts";
import { compareKeys } from "../../plan/keys.ts";
import { type DriftState, keys, kvOp } from "../store/mod.ts";

/** A shard's range, for counting changes per range (sorted by start, the open start first). */
export interface ShardRange {
  /** Shard id. */
  id: number;
  /** First key; null = open. */
  start: string | null;
}

/** The shard whose range holds `id` (ranges sorted by start, partitioning the key space). */
export function rangeOf(ranges: readonly ShardRange[], id: string): number | null {
  let lo = 0;
  let hi = ranges.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const s = ranges[mid].start;
    if (s === null || compareKeys(s, id) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo === 0 ? null : ranges[lo - 1].id;
}

/** One change to apply, with the sequence that reaches it. */
export type DriftChange =
  & { seq: string }
  & ({ id: string; deleted: true } | { id: string; deleted?: false; rev: string; doc?: DocResult });

/**
 * Applies `changes` (oldest first) while the caller holds the crawl's change feed record as
 * `claimed`. Returns the new feed entry, or null when the claim was lost (what was committed
 * before stays counted).
 */
export async function applyDrift(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<DriftState>,
  changes: readonly DriftChange[],
  next: DriftNext & { lastSeq: string },
): Promise<Deno.KvEntry<DriftState> | null> {
  let entry = claimed;
  // Checks are the scarce resource: one per changed item and per block holding one, one for the
  // feed record.
  const group = (MAX_CHECKS - 2) >> 1;
  for (let i = 0; i < changes.length || i === 0; i += group) {
    const part = changes.slice(i, i + group);
    const last = i + group >= changes.length;
    const applied = await applyGroup(kv, entry, part, {
      ...next,
      seq: last ? next.lastSeq : part.at(-1)!.seq,
      caughtUp: last && next.caughtUp,
    });
    if (!applied) return null;
    entry = applied;
  }
  return entry;
}

/** How a batch of changes moves the crawl on. */
export interface DriftNext {
  /** Clock, epoch ms. */
  nowMs: number;
  /** Documents above this many bytes are recorded as too large. */
  maxDocBytes?: number;
  /** The batch reaches the feed's proven end. */
  caughtUp: boolean;
  /** The shards' ranges, for the per-range counters. @default no per-range counts */
  ranges?: readonly ShardRange[];
  /** The feed lease is renewed until then with every op, epoch ms. @default left as it is */
  leaseUntilMs?: number;
}

/** Applies one group in as many ops as its size needs (each op moves `drift` on by its part). */
async function applyGroup(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<DriftState>,
  changes: readonly DriftChange[],
  next: DriftNext & { seq: string },
): Promise<Deno.KvEntry<DriftState> | null> {
  const crawl = claimed.key[1] as string;
  const latest = new Map<string, DriftChange>();
  for (const c of changes) latest.set(c.id, c); // the latest change per id wins
  const ids = [...latest.keys()];
  const presence = await itemPresence(kv, crawl, ids);
  const blocks = new Map<string, { entry: Deno.KvEntry<Uint8Array>; rows: BlockRow[] }>();
  const inBlock = new Set<string>();
  const held: { entry: Deno.KvEntry<Uint8Array>; rows: BlockRow[]; ids: Set<string> }[] = [];
  for (const id of ids) {
    // Changes often touch neighbours: a block already read answers for every id it holds.
    let hit = held.find((b) => b.ids.has(id));
    if (!hit) {
      const found = await blockHolding(kv, crawl, id);
      if (!found || found.index < 0) continue;
      hit = { ...found, ids: new Set(found.rows.map((r) => r.id)) };
      held.push(hit);
    }
    inBlock.add(id);
    blocks.set(hit.entry.key[2] as string, hit);
  }
  const upserts = ids.map((id) => latest.get(id)!).filter((c) => !c.deleted) as (
    & ItemInput
    & { seq: string }
  )[];
  // Documents go to chunks (idempotent, written first) so that records stay small in the op.
  const writes = await prepareWrites(crawl, upserts, {
    maxDocBytes: next.maxDocBytes,
    inline: false,
  });
  const records = new Map(writes.filter((w) => w.key[0] === "item").map((w) => [w.id, w]));
  await setInBatches(kv, writes.filter((w) => w.key[0] !== "item"));
  const drift = claimed.value;
  const counts = { inserted: 0, updated: 0, deleted: 0 };
  const perRange = new Map<string, number>(); // `${shard}\0${dir}` -> count
  const countIn = (id: string, dir: "in" | "out") => {
    const shard = next.ranges ? rangeOf(next.ranges, id) : null;
    if (shard === null) return;
    const k = `${shard}\0${dir}`;
    perRange.set(k, (perRange.get(k) ?? 0) + 1);
  };
  const op = kv.atomic().check(claimed);
  const budget = new AtomicBudget().check(keySize(claimed.key));
  for (const { entry, rows } of blocks.values()) {
    const left = rows.filter((r) => !inBlock.has(r.id));
    const bytes = keySize(entry.key);
    op.check(entry);
    budget.check(bytes);
    if (left.length === 0) (op.delete(entry.key), budget.delete(bytes));
    else {
      const value = encodeBlock(left);
      op.set(entry.key, value);
      budget.set(bytes, value.length);
    }
  }
  for (let j = 0; j < ids.length; j++) {
    const { key, versionstamp } = presence[j];
    const c = latest.get(ids[j])!;
    op.check({ key, versionstamp });
    budget.check(keySize(key));
    const present = versionstamp !== null || inBlock.has(c.id);
    if (c.deleted) {
      if (present) (counts.deleted++, countIn(c.id, "out"));
      op.delete(key);
      budget.delete(keySize(key));
      for (const k of await chunkKeys(kv, crawl, c.id)) (op.delete(k), budget.delete(keySize(k)));
    } else {
      counts[present ? "updated" : "inserted"]++;
      if (!present) countIn(c.id, "in");
      const w = records.get(c.id)!;
      op.set(w.key, w.value);
      budget.set(w.keyBytes, w.value.length);
      if (versionstamp !== null) {
        // A shorter document than before leaves chunks past its own count: they go too.
        const used = writes.filter((x) => x.id === c.id && x.key[0] === "chunk").length;
        for (const k of await chunkKeys(kv, crawl, c.id)) {
          if ((k[3] as number) >= used) (op.delete(k), budget.delete(keySize(k)));
        }
      }
    }
  }
  for (const [k, n] of perRange) {
    const [shard, dir] = k.split("\0");
    const key = keys.rangeDrift(crawl, Number(shard), dir as "in" | "out");
    op.sum(key, BigInt(n));
    budget.set(keySize(key), 8);
  }
  const lease = drift.lease && next.leaseUntilMs !== undefined
    ? { ...drift.lease, untilMs: next.leaseUntilMs }
    : drift.lease;
  const value: DriftState = {
    ...drift,
    lease,
    seq: next.seq,
    inserted: drift.inserted + counts.inserted,
    updated: drift.updated + counts.updated,
    deleted: drift.deleted + counts.deleted,
    caughtUpAt: next.caughtUp ? next.nowMs : drift.caughtUpAt,
  };
  if (!budget.fitsSet(keySize(claimed.key), valueSizeBound(value))) {
    // Deleting many chunked documents at once: halve the group (each half counted on its own).
    if (changes.length === 1) throw new Error(`change of ${ids[0]} does not fit one atomic op`);
    const half = changes.length >> 1;
    const first = await applyGroup(kv, claimed, changes.slice(0, half), {
      ...next,
      seq: changes[half - 1].seq,
      caughtUp: false,
    });
    return first ? await applyGroup(kv, first, changes.slice(half), next) : null;
  }
  const res = await kvOp(() => op.set(claimed.key, value).commit());
  return res.ok ? { key: claimed.key, value, versionstamp: res.versionstamp } : null;
}
