/**
 * Shard notices: what this process committed to a shard that the worker running it here should
 * know before its next read of KV. A straggler split shrinks its victim's end in one atomic op;
 * the victim's worker used to learn the new end only at its next heartbeat or write (up to a
 * second), and went on starting documents past the split key in that window, which the child then
 * fetched again. When the split is made in the process that runs the victim (the usual local
 * case), the committed entry is posted here and the victim's page reads it at its next row.
 * Across processes the heartbeat stays the bound.
 *
 * A notice is the shard's committed KV entry: a reader takes it only when its versionstamp is
 * newer than the entry it holds (versionstamps of one database only grow), so a notice never takes
 * a shard back, and one left over from a deleted crawl of the same id is older than the new
 * crawl's entries. One board belongs to one KV database. Bounded: at most `maxNotices`, the oldest
 * dropped first (a dropped notice only costs the heartbeat's delay).
 *
 * @module
 */
import type { ShardRecord } from "./shard_record.ts";
import { crawlOfKey } from "./keys.ts";

/** Notices kept at most. */
const MAX_NOTICES = 4096;

/** See the module comment. */
export class ShardNotices {
  #byShard = new Map<string, Deno.KvEntry<ShardRecord>>();
  #max: number;

  /** An empty board keeping at most `maxNotices` notices. @default 4096 */
  constructor(options: { maxNotices?: number } = {}) {
    this.#max = Math.max(1, options.maxNotices ?? MAX_NOTICES);
  }

  /** Notices kept now. */
  get size(): number {
    return this.#byShard.size;
  }

  /** Posts a shard entry just committed (replacing an older notice of that shard). */
  post(entry: Deno.KvEntry<ShardRecord>): void {
    const key = noticeKey(crawlOfKey(entry.key), entry.value.id);
    const held = this.#byShard.get(key);
    if (held && held.versionstamp >= entry.versionstamp) return;
    this.#byShard.delete(key);
    this.#byShard.set(key, entry);
    if (this.#byShard.size > this.#max) {
      this.#byShard.delete(this.#byShard.keys().next().value!);
    }
  }

  /**
   * The notice of shard `held`'s crawl and id committed after `held`, if any (it stays posted
   * until a newer one replaces it or it is dropped: several readers may hold the shard's entry).
   */
  newer(held: Deno.KvEntry<ShardRecord>): Deno.KvEntry<ShardRecord> | undefined {
    const notice = this.#byShard.get(noticeKey(crawlOfKey(held.key), held.value.id));
    return notice && notice.versionstamp > held.versionstamp ? notice : undefined;
  }
}

function noticeKey(crawlId: string, shardId: number): string {
  return `${crawlId}\u0000${shardId}`;
}
