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
import { blockHolding } from "./item_blocks.ts";
import { type BlockRow, encodeBlock } from "./_block_codec.ts";
import { chunkKeys, itemPresence } from "./item_read.ts";
import { type ItemInput, prepareWrites, setInBatches } from "./item_store.ts";
import { compareKeys } from "../../plan/keys.ts";
import {
  addNote,
  commitPlan,
  crawlOfKey,
  type DriftState,
  FEED_STREAM,
  idsNote,
  keys,
  MAX_CHECKS,
  OpPlan,
  parseKey,
} from "../store/mod.ts";

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

/** What the store holds of a group's ids: their records, and the blocks that hold them. */
interface Held {
  /** Each id's record key and versionstamp (null: no record). */
  records: Map<string, { key: Deno.KvKey; versionstamp: string | null }>;
  /** The blocks holding some of the ids, by key. */
  blocks: Map<string, { entry: Deno.KvEntry<Uint8Array>; rows: BlockRow[] }>;
  /** The ids held in those blocks. */
  inBlock: Set<string>;
}

async function readHeld(kv: Deno.Kv, crawlId: string, ids: string[]): Promise<Held> {
  const presence = await itemPresence(kv, crawlId, ids);
  const held: Held = {
    records: new Map(ids.map((id, j) => [id, presence[j]])),
    blocks: new Map(),
    inBlock: new Set(),
  };
  const read: { entry: Deno.KvEntry<Uint8Array>; rows: BlockRow[]; ids: Set<string> }[] = [];
  for (const id of ids) {
    // Changes often touch neighbours: a block already read answers for every id it holds.
    let hit = read.find((b) => b.ids.has(id));
    if (!hit) {
      const found = await blockHolding(kv, crawlId, id);
      if (!found || found.index < 0) continue;
      hit = { ...found, ids: new Set(found.rows.map((r) => r.id)) };
      read.push(hit);
    }
    held.inBlock.add(id);
    held.blocks.set(JSON.stringify(hit.entry.key), hit);
  }
  return held;
}

/** Changes counted by whether their items were present, in all and per shard range. */
class Counts {
  inserted = 0;
  updated = 0;
  deleted = 0;
  /** `${shard}\0${dir}` -> items. */
  perRange = new Map<string, number>();
  constructor(readonly ranges?: readonly ShardRange[]) {}
  add(id: string, kind: "inserted" | "updated" | "deleted"): void {
    this[kind]++;
    if (kind === "updated" || !this.ranges) return;
    const shard = rangeOf(this.ranges, id);
    if (shard === null) return;
    const k = `${shard}\0${kind === "inserted" ? "in" : "out"}`;
    this.perRange.set(k, (this.perRange.get(k) ?? 0) + 1);
  }
}

/**
 * Applies one group in one op (halved while it does not fit one): the blocks holding changed
 * items rewritten without them, each item's record set or deleted (with its chunks), the per-range
 * counters summed, and the feed moved on, all guarded by versionstamps.
 */
async function applyGroup(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<DriftState>,
  changes: readonly DriftChange[],
  next: DriftNext & { seq: string },
): Promise<Deno.KvEntry<DriftState> | null> {
  const crawl = crawlOfKey(claimed.key); // the feed record is ["feed", crawlId]
  const latest = new Map<string, DriftChange>();
  for (const c of changes) latest.set(c.id, c); // the latest change per id wins
  const ids = [...latest.keys()];
  const held = await readHeld(kv, crawl, ids);
  const upserts = ids.map((id) => latest.get(id)!).filter((c) => !c.deleted) as ItemInput[];
  // Documents go to chunks (idempotent, written first) so that records stay small in the op.
  const writes = await prepareWrites(crawl, upserts, {
    maxDocBytes: next.maxDocBytes,
    inline: false,
    nowMs: next.nowMs,
  });
  const chunks = writes.filter((w) => w.role === "chunk");
  await setInBatches(kv, chunks);
  const records = new Map(
    writes.filter((w) => w.role === "record").map((w) => [w.id, w]),
  );
  const plan = new OpPlan().check(claimed);
  dropFromBlocks(plan, held);
  // Documents behind their change: their entries among pending documents, with their records.
  for (const w of writes) if (w.role === "pending") plan.set(w.key, w.value);
  const counts = new Counts(next.ranges);
  for (const id of ids) {
    const record = held.records.get(id)!;
    plan.check(record);
    // A document shorter than before leaves chunks past its own count: they go too (all of them
    // when the item goes).
    const stale = record.versionstamp === null ? [] : await chunkKeys(kv, crawl, id);
    planChange(plan, latest.get(id)!, {
      record,
      held,
      chunks,
      stale,
      counts,
      write: records.get(id),
    });
  }
  for (const [k, n] of counts.perRange) {
    const [shard, dir] = k.split("\0");
    plan.sum(keys.rangeDrift(crawl, Number(shard), dir as "in" | "out"), BigInt(n));
  }
  // What this group made true in the store, noted for sinks in the same op (`notes.ts`).
  const notes = (claimed.value.notes ?? 0) + (ids.length > 0 ? 1 : 0);
  if (ids.length > 0) {
    addNote(plan, crawl, { stream: FEED_STREAM, n: notes, note: idsNote(ids, compareKeys) });
  }
  const value = { ...moved(claimed.value, counts, next), notes };
  if (!plan.fitsSet(claimed.key, value)) {
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
  const res = await commitPlan(kv, plan.set(claimed.key, value));
  return res.ok ? { key: claimed.key, value, versionstamp: res.versionstamp } : null;
}

/** The blocks holding changed items, rewritten without them (deleted when nothing is left). */
function dropFromBlocks(plan: OpPlan, held: Held): void {
  for (const { entry, rows } of held.blocks.values()) {
    const left = rows.filter((r) => !held.inBlock.has(r.id));
    plan.check(entry);
    if (left.length === 0) plan.delete(entry.key);
    else plan.set(entry.key, encodeBlock(left));
  }
}

/** One item's change in the op: its record set or deleted, stale chunks deleted, counted. */
function planChange(
  plan: OpPlan,
  c: DriftChange,
  o: {
    record: { key: Deno.KvKey; versionstamp: string | null };
    held: Held;
    chunks: { id: string }[];
    stale: Deno.KvKey[];
    counts: Counts;
    write?: { key: Deno.KvKey; value: unknown };
  },
): void {
  const present = o.record.versionstamp !== null || o.held.inBlock.has(c.id);
  const kept = c.deleted ? 0 : o.chunks.filter((w) => w.id === c.id).length;
  for (const k of o.stale) if ((parseKey(k) as { n: number }).n >= kept) plan.delete(k);
  if (c.deleted) {
    if (present) o.counts.add(c.id, "deleted");
    plan.delete(o.record.key);
  } else {
    o.counts.add(c.id, present ? "updated" : "inserted");
    plan.set(o.write!.key, o.write!.value);
  }
}

/** The feed after a group: its sequence, counts and caught-up time moved on, its lease renewed. */
function moved(drift: DriftState, counts: Counts, next: DriftNext & { seq: string }): DriftState {
  return {
    ...drift,
    lease: drift.lease && next.leaseUntilMs !== undefined
      ? { ...drift.lease, untilMs: next.leaseUntilMs }
      : drift.lease,
    seq: next.seq,
    inserted: drift.inserted + counts.inserted,
    updated: drift.updated + counts.updated,
    deleted: drift.deleted + counts.deleted,
    caughtUpAt: next.caughtUp ? next.nowMs : drift.caughtUpAt,
  };
}
