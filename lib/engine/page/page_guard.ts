/**
 * What a page needs from the worker holding its shard, and the guard it writes against: the
 * shard entry whose versionstamp every write checks, kept fresh through conflicts (a split that
 * only moved the end is adopted; a lost lease or a moved cursor drops the page) and renewed by a
 * heartbeat while documents are fetched.
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import type { AdaptiveLimit } from "../../base/adaptive_limit.ts";
import { isLongKey } from "../../plan/keys.ts";
import type { DocMemory } from "./doc_memory.ts";
import type { DocSlots } from "./doc_slots.ts";
import type { DocMode, Source } from "../../plan/source.ts";
import type { ListingCache } from "../../sources/cache/mod.ts";
import {
  commitShard,
  crawlOfKey,
  type CrawlRecord,
  getCrawl,
  getShard,
  type InFlight,
  leaseFor,
  present,
  type ShardNotices,
  type ShardRecord,
} from "../store/mod.ts";

/** What one page needs from the worker that holds the shard. */
export interface PageContext {
  /** The store. */
  kv: Deno.Kv;
  /** The crawl's source. */
  source: Source;
  /** Who holds the lease. */
  owner: string;
  /** Lease length, in milliseconds (each commit and heartbeat renews it). */
  leaseMs: number;
  /** Time: lease expiries, `updatedAt`, and the heartbeat's timer. */
  clock: Clock;
  /** Documents above this many bytes are recorded as too large. */
  maxDocBytes: number;
  /** How documents are fetched (resolved from the crawl). */
  docMode: DocMode;
  /** The shard's document concurrency (kept across its pages). */
  docLimit: AdaptiveLimit;
  /** The process's budget of document bytes in memory. @default none */
  docMemory?: DocMemory;
  /** The crawl's document slots in this process (`doc_slots.ts`). @default the shard's own */
  docSlots?: DocSlots;
  /**
   * The process's listing cache: pages listed ahead while the crawl was planned and the planner's
   * reads, which answer the shard's requests where they tell them exactly. @default none
   */
  listings?: ListingCache;
  /** Shard entries this process committed (a split's new end), read before KV. @default none */
  notices?: ShardNotices;
  /** Checks a shard whose page reached its end (the verify room's `checkShardEnd`). */
  checkEnd: ShardEndCheck;
}

/** What a shard's own end check found: proven now, to be listed again, or left to the final check. */
export type ShardCheck = "exact" | "relist" | "later";

/**
 * Checks a shard that reached its end with `items` items in all. The page does not decide a
 * shard done: the verify room does, and is handed in (`verify/shard_end.ts`).
 */
export type ShardEndCheck = (
  shard: ShardRecord,
  o: { crawl: CrawlRecord; items: number },
) => Promise<ShardCheck>;

/** The shard entry a page writes against, kept fresh through conflicts and heartbeats. */
export class Guard {
  /** The shard as last committed or adopted. */
  entry: Deno.KvEntry<ShardRecord>;
  /** Why the page was given up, once it was. */
  lost: string | null = null;
  #ctx: PageContext;
  #cursor: string | null;
  #after: boolean;
  #skip: string | null;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(ctx: PageContext, entry: Deno.KvEntry<ShardRecord>) {
    this.#ctx = ctx;
    this.entry = entry;
    this.#cursor = entry.value.cursor;
    this.#after = entry.value.after;
    this.#skip = entry.value.skip ?? null;
  }

  /** Runs KV writes one at a time (heartbeats and batches share the versionstamp). */
  serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#queue.then(fn);
    this.#queue = p.catch(() => {});
    return p;
  }

  /**
   * After a failed guard: re-reads the shard and adopts it when it is still ours at the same
   * cursor (a split moved its end, or a heartbeat raced); records why not otherwise.
   */
  async refresh(): Promise<boolean> {
    const e = await getShard(this.#ctx.kv, crawlOf(this.entry), this.entry.value.id);
    this.lost = this.#refusal(e.value);
    if (this.lost === null) this.entry = present(e)!;
    return this.lost === null;
  }

  /**
   * The shard's end as this worker knows it: its entry's, or a newer one committed in this process
   * (a split) and posted to `notices`, which is adopted as a refresh would (the next write then
   * meets no conflict). Empty when the page was given up: no row lies below it.
   */
  end(): string | null {
    const notice = this.lost === null ? this.#ctx.notices?.newer(this.entry) : undefined;
    if (notice && this.#refusal(notice.value) === null) this.entry = notice;
    return this.lost !== null ? "" : this.entry.value.end;
  }

  /** Why the page cannot go on against shard record `s` (null: it can, it is still ours). */
  #refusal(s: ShardRecord | null): string | null {
    if (!s) return "shard vanished";
    if (s.lease?.owner !== this.#ctx.owner) return "lease lost";
    if (
      s.done || s.cursor !== this.#cursor || s.after !== this.#after ||
      (s.skip ?? null) !== this.#skip
    ) {
      return "superseded";
    }
    return null;
  }

  /** Takes a part's commit as the new base: later conflicts are judged from its cursor. */
  adopt(entry: Deno.KvEntry<ShardRecord>): void {
    this.entry = entry;
    this.#cursor = entry.value.cursor;
    this.#after = entry.value.after;
    this.#skip = entry.value.skip ?? null;
  }

  /** A lease for this worker from now. */
  lease(): NonNullable<ShardRecord["lease"]> {
    return leaseFor(this.#ctx.owner, this.#ctx.clock.now(), this.#ctx.leaseMs);
  }

  /** Renews the lease and publishes progress about once a second until stopped. */
  heartbeat(
    rows: number,
  ): { progress(key: string | null, n: number): void; stop(): Promise<void> } {
    const since = this.#ctx.clock.now();
    let inflight: InFlight = { nextKey: null, started: 0, rows, since };
    const every = Math.max(50, Math.min(1000, this.#ctx.leaseMs / 3));
    const beat = () =>
      this.serial(async () => {
        // A paused or cancelled crawl stops here, not after a page of slow documents: no new
        // document is started and the page is dropped (redone on resume from the same cursor).
        const crawl = (await getCrawl(this.#ctx.kv, crawlOf(this.entry))).value;
        if (crawl?.status !== "running") {
          return void (this.lost = `crawl ${crawl?.status ?? "gone"}`);
        }
        for (let i = 0; i < 10 && !this.lost; i++) {
          const next = { ...this.entry.value, inflight, lease: this.lease() };
          const done = await commitShard(this.#ctx.kv, crawlOf(this.entry), this.entry, next);
          if (done) return void (this.entry = done);
          if (!await this.refresh()) return;
        }
      });
    const stopBeats = this.#ctx.clock.every(every, () => beat().catch(() => {}));
    return {
      progress: (nextKey, started) => {
        // A long id is no place to split at (nor worth a shard record's bytes).
        inflight = {
          nextKey: nextKey !== null && isLongKey(nextKey) ? null : nextKey,
          started,
          rows,
          since,
        };
      },
      stop: async () => {
        stopBeats();
        await this.#queue;
      },
    };
  }
}

export function crawlOf(entry: Deno.KvEntry<ShardRecord>): string {
  return crawlOfKey(entry.key);
}
