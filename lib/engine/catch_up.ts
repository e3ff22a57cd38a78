/**
 * Registry drift: items inserted, updated and deleted while a crawl runs. The registry's
 * `update_seq` is recorded when the crawl starts; once every shard is done, `_changes` is read from
 * there and applied (inserts, updates with fresh revisions and documents, deletions), so that the
 * final KV equals the registry at catch-up time. `--follow` keeps doing it, as npm mirrors do.
 *
 * One process applies changes at a time (a lease on the crawl record); each batch and the sequence
 * it reaches are committed in one guarded op, so a crash or a second runner neither skips nor
 * double-counts a change.
 *
 * @module
 */
import { mapPool } from "../base/pool.ts";
import type { Source } from "../plan/source.ts";
import { applyDrift, type DriftChange } from "./drift_store.ts";
import { type CrawlRecord, getCrawl, updateCrawl } from "./store.ts";

/** Options of {@linkcode catchUp}. */
export interface CatchUpOptions {
  /** Changes read per request. @default 200 */
  batch?: number;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** This runner's name in the lease. @default a random UUID */
  owner?: string;
  /** Lease length (how long a crashed runner blocks others), in milliseconds. @default 30000 */
  leaseMs?: number;
}

/** What a catch-up pass did. */
export interface CatchUpResult {
  /** Changes applied in this pass. */
  applied: number;
  /** The sequence reached, or null when the crawl has no change feed. */
  seq: string | null;
  /** False when another runner holds the lease (nothing was done). */
  ran: boolean;
}

/**
 * Reads `_changes` from where the crawl stands until the feed has nothing more, applying each
 * batch. Documents are fetched for changed items when the crawl fetches documents.
 */
export async function catchUp(
  deps: { kv: Deno.Kv; source: Source },
  crawlId: string,
  options: CatchUpOptions = {},
): Promise<CatchUpResult> {
  const now = options.now ?? Date.now;
  const owner = options.owner ?? crypto.randomUUID();
  const batch = options.batch ?? 200;
  const first = await getCrawl(deps.kv, crawlId);
  const crawl = first.value;
  if (!crawl || crawl.startSeq === null) return { applied: 0, seq: null, ran: false };
  const drift = crawl.drift;
  if (drift?.lease && drift.lease.owner !== owner && drift.lease.untilMs > now()) {
    return { applied: 0, seq: drift.seq, ran: false };
  }
  let entry = await updateCrawl(deps.kv, first as Deno.KvEntry<CrawlRecord>, {
    ...crawl,
    drift: {
      seq: drift?.seq ?? crawl.startSeq,
      inserted: drift?.inserted ?? 0,
      updated: drift?.updated ?? 0,
      deleted: drift?.deleted ?? 0,
      caughtUpAt: drift?.caughtUpAt ?? null,
      lease: { owner, untilMs: now() + (options.leaseMs ?? 30_000) },
    },
  });
  if (!entry) return { applied: 0, seq: drift?.seq ?? crawl.startSeq, ran: false };
  let applied = 0;
  let conflicts = 0;
  try {
    for (;;) {
      const since = entry.value.drift!.seq;
      const { rows, lastSeq } = await deps.source.changes(since, batch);
      const changes: DriftChange[] = await mapPool(rows, async (r): Promise<DriftChange> => {
        if (r.deleted) return { seq: r.seq, id: r.id, deleted: true };
        if (!crawl.docs) return { seq: r.seq, id: r.id, rev: r.rev };
        // A document deleted again since this change keeps its error; a later row says so.
        return { seq: r.seq, id: r.id, rev: r.rev, doc: await deps.source.doc(r.id) };
      }, { concurrency: crawl.concurrency });
      const done = rows.length < batch;
      const next = await applyDrift(deps.kv, entry, changes, {
        lastSeq,
        nowMs: now(),
        caughtUp: done,
      });
      if (!next) {
        // Another writer changed the crawl record (its completion, a shard's end): if the lease is
        // still ours, go on from what is committed; if not, another runner has the feed now.
        const fresh = await getCrawl(deps.kv, crawlId);
        if (fresh.value?.drift?.lease?.owner !== owner || ++conflicts > 20) {
          return { applied, seq: since, ran: true };
        }
        entry = fresh as Deno.KvEntry<CrawlRecord>;
        continue;
      }
      entry = next;
      applied += rows.length;
      if (done) break;
    }
  } catch (err) {
    // Let the next runner start at once from the committed sequence (a crash waits for expiry).
    await releaseLease(deps.kv, crawlId, owner).catch(() => null);
    throw err;
  }
  const released = await releaseLease(deps.kv, crawlId, owner);
  return { applied, seq: (released ?? entry).value.drift!.seq, ran: true };
}

/**
 * Clears this runner's drift lease. The crawl record may have changed since this runner last
 * wrote it (its completion, another shard's end): the lease is cleared on a fresh read, so it is
 * never left behind to block the next runner until it expires.
 */
async function releaseLease(
  kv: Deno.Kv,
  crawlId: string,
  owner: string,
): Promise<Deno.KvEntry<CrawlRecord> | null> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const e = await getCrawl(kv, crawlId);
    if (!e.value?.drift || e.value.drift.lease?.owner !== owner) return null;
    const done = await updateCrawl(kv, e as Deno.KvEntry<CrawlRecord>, {
      ...e.value,
      drift: { ...e.value.drift, lease: null },
    });
    if (done) return done;
  }
  return null;
}
