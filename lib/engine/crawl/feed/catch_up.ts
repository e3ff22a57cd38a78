/**
 * Registry drift: items inserted, updated and deleted while a crawl runs. The registry's
 * `update_seq` is recorded when the crawl starts; once every shard is done, `_changes` is read from
 * there and applied (inserts, updates with fresh revisions and documents, deletions), so that the
 * final KV equals the registry at catch-up time. `--follow` keeps doing it, as npm mirrors do.
 *
 * The feed is read until it is proven at its end (`feed_read.ts`: a short batch is never the end,
 * an empty one only where the feed's own head confirms it, the database info's `update_seq` only a
 * target, never a reason not to read), or to a bound; a feed that does not know the sequence the
 * crawl stands at (a registry that numbered its changes anew) is a `SinceUnknownError`, for the
 * caller to re-anchor and prove every row again.
 *
 * Sequences are opaque (a CouchDB cluster's `N-g1AAAA…`, whose N can go down when another copy
 * answers; npm tells followers not to assume they increase): they are compared for equality only.
 * One process reads a crawl's feed at a time (a lease on the crawl record, renewed with every
 * batch); each batch and the sequence it reaches are committed in one guarded op, so a crash or a
 * second runner neither skips nor double-counts a change. A database replaced behind the URL (a
 * restore from a backup) shows in the data: where `update_seq` spells a lower number than one seen
 * (a hint only), stored items are held against the registry, and when most of them differ with no
 * change explaining it, that is a {@linkcode RegistryReplacedError}, never merged into the crawl.
 *
 * @module
 */
import type { CrawlContext } from "../context.ts";
import { FatalError } from "../../../base/errors.ts";
import { type FeedBatch, FeedReader, seqNumber, type SinceUnknownError } from "./feed_read.ts";
import { mapPool } from "../../../base/pool.ts";
import { compareKeys } from "../../../plan/keys.ts";
import type { ChangeRow } from "../../../plan/source.ts";
import {
  applyDrift,
  type DriftChange,
  itemsByIds,
  sampleStored,
  type ShardRange,
} from "../../items/mod.ts";
import { againstListing, againstStored, failedDoc } from "../../page/mod.ts";
import {
  type CrawlRecord,
  type DriftState,
  getCrawl,
  getFeed,
  keys,
  listShards,
  present,
  releaseLease,
  takeLease,
} from "../../store/mod.ts";

/** What reading and applying the feed needs: the store, the crawl's source and the clock. */
export type FeedContext = Pick<CrawlContext, "kv" | "source" | "clock">;

/** What claiming the feed needs: the store, the clock, the runner's name and its lease's length. */
export type FeedClaimContext = Pick<CrawlContext, "kv" | "clock" | "owner" | "leaseMs">;

/** What a catch-up pass did. */
export interface CatchUpResult {
  /** Changes applied in this pass. */
  applied: number;
  /** The sequence reached, or null when the crawl has no change feed. */
  seq: string | null;
  /** False when another runner holds the lease (nothing was done). */
  ran: boolean;
}

/** The registry behind the crawl's URL is not the one it started on. */
export class RegistryReplacedError extends FatalError {
  /** Error name. */
  override name = "RegistryReplacedError";
}

/** Stored items held against the registry when a sequence hints at a replaced database. */
const REPLACED_SAMPLE_SHARDS = 8;

/**
 * Throws {@linkcode RegistryReplacedError} when the registry behind the crawl's URL is another
 * database than the one it read: its `update_seq` spells a lower number than one the crawl saw (a
 * hint, never proof by itself: a cluster's other copy, a jitter, npm's opaque sequences), and most
 * of a sample of stored items (a few from each of up to 8 shards) have other revisions there or
 * are gone, with no change since `seen` to explain it. Nothing stored yet: nothing to merge.
 */
export async function checkSameRegistry(
  deps: FeedContext,
  crawl: CrawlRecord,
  o: { current?: string | null; seen?: string | null; force?: boolean },
): Promise<void> {
  const seen = o.seen === undefined ? crawl.startSeq : o.seen;
  const [was, now] = [seqNumber(seen), seqNumber(o.current)];
  const hint = was !== null && now !== null && now < was;
  if (!(hint || o.force) || !deps.source.revs || seen === null) return;
  const shards = (await listShards(deps.kv, crawl.id)).map((e) => e.value);
  const step = Math.max(1, Math.floor(shards.length / REPLACED_SAMPLE_SHARDS));
  const picked = shards.filter((_, i) => i % step === 0).slice(0, REPLACED_SAMPLE_SHARDS);
  const sample = (await mapPool(picked, (s) => sampleStored(deps.kv, crawl.id, s, 2), {
    concurrency: 4,
  })).flat();
  if (sample.length === 0) return;
  const [revs, changed] = await Promise.all([
    deps.source.revs(sample.map((it) => it.id)),
    peekChanges(deps, seen, { max: 10_000 }).catch(() => null),
  ]);
  const explained = new Set((changed ?? []).map((c) => c.id));
  const off = sample.filter((it, i) => revs[i] !== it.rev && !explained.has(it.id)).length;
  if (off === 0 || off * 2 < sample.length) return;
  throw new RegistryReplacedError(
    `the registry at ${crawl.source} was replaced or rolled back since this crawl read it ` +
      `(${hint ? `update_seq ${now} is below ${was}` : `its feed does not know seq ${seen}`}, ` +
      `and ${off} of ${sample.length} stored items sampled differ there with no change to ` +
      `explain it); its stored items come from the database that was there: delete the crawl ` +
      `(or use another --crawl-id) to crawl the registry as it is now`,
  );
}

/** A claim on a crawl's change feed: its feed record as this runner last wrote it. */
export interface FeedClaim {
  /** The crawl. */
  crawl: CrawlRecord;
  /** The feed record entry (its versionstamp guards every batch). */
  entry: Deno.KvEntry<DriftState>;
  /** The runner. */
  owner: string;
  /** Lease length, in milliseconds. */
  leaseMs: number;
}

/**
 * Claims the crawl's change feed for `owner` (see the module comment). Null when the crawl has no
 * feed, or another runner holds it.
 */
export async function claimFeed(
  ctx: FeedClaimContext,
  crawlId: string,
): Promise<FeedClaim | null> {
  const { kv, clock, owner, leaseMs } = ctx;
  const crawl = (await getCrawl(kv, crawlId)).value;
  if (!crawl || crawl.startSeq === null) return null;
  const held = await takeLease<DriftState>(kv, keys.feed(crawlId), {
    owner,
    nowMs: clock.now(),
    leaseMs,
    record: (cur, lease) => ({
      seq: crawl.startSeq!,
      inserted: 0,
      updated: 0,
      deleted: 0,
      caughtUpAt: null,
      ...cur,
      lease,
    }),
  });
  return held ? { crawl, entry: held, owner, leaseMs } : null;
}

/** The shards' ranges of a crawl, sorted by start, for counting changes per range. */
async function rangesOf(kv: Deno.Kv, crawlId: string): Promise<ShardRange[]> {
  return (await listShards(kv, crawlId)).map((e) => ({ id: e.value.id, start: e.value.start }))
    .sort((a, b) => a.start === null ? -1 : b.start === null ? 1 : compareKeys(a.start, b.start));
}

/**
 * Reads the feed from where the claimed crawl stands to its proven end (an empty batch), applying
 * every batch. Returns the changes applied, or null when the claim was lost (another runner has
 * the feed now; what was committed stays counted).
 */
export async function applyToEnd(
  deps: FeedContext,
  claim: FeedClaim,
  options: { batch?: number } = {},
): Promise<number | null> {
  return (await applyFeed(deps, claim, options))?.applied ?? null;
}

/**
 * {@linkcode applyToEnd} with a bound: stops after the batch that reaches `maxChanges` changes
 * (a follow tick's work stays bounded however far behind the crawl is; the next tick goes on from
 * the committed sequence). `atEnd` says whether the feed's proven end was reached (`feed_read.ts`:
 * an empty answer the feed's head confirms, `pending: 0`, the target, or the head overtaken);
 * `bounded` that the read stopped at its time bound instead. Null when the claim was lost.
 * @throws SinceUnknownError when the feed does not know the sequence the crawl stands at.
 */
export async function applyFeed(
  deps: FeedContext,
  claim: FeedClaim,
  options: { batch?: number; maxChanges?: number } = {},
): Promise<{ applied: number; atEnd: boolean; bounded?: boolean } | null> {
  const maxChanges = options.maxChanges ?? Infinity;
  if (maxChanges <= 0) return { applied: 0, atEnd: false };
  const crawl = claim.crawl;
  const feed = new FeedReader(deps.source, { clock: deps.clock, batch: options.batch });
  const seen = claim.entry.value.seq;
  const first = await feed.next(seen);
  await checkSameRegistry(deps, crawl, { current: feed.target ?? null, seen });
  const ranges = await rangesOf(deps.kv, crawl.id);
  let applied = 0;
  let conflicts = 0;
  for (let batch: FeedBatch | null = first;;) {
    const since = claim.entry.value.seq;
    batch ??= await feed.next(since);
    const { rows, lastSeq, end } = batch;
    const changes = await fetchChanged(deps, crawl, rows);
    const next = await applyDrift(deps.kv, claim.entry, changes, {
      lastSeq,
      nowMs: deps.clock.now(),
      caughtUp: end === "end",
      ranges,
      leaseUntilMs: deps.clock.now() + claim.leaseMs,
    });
    if (!next) {
      // Another runner took the feed (this one was seen dead, or its lease ran out).
      const fresh = await getFeed(deps.kv, crawl.id);
      if (fresh.value?.lease?.owner !== claim.owner || ++conflicts > 20) return null;
      claim.entry = present(fresh)!;
      batch = null; // read again from where the feed record stands
      continue;
    }
    claim.entry = next;
    applied += rows.length;
    if (end === "end") return { applied, atEnd: true };
    if (end === "bounded") return { applied, atEnd: false, bounded: true };
    if (applied >= maxChanges) return { applied, atEnd: false };
    batch = null;
  }
}

/**
 * Takes the feed up again at its head after it did not know where the crawl stood (`err`): a
 * registry that numbered its changes anew (same data). The crawl's feed record moves to the head;
 * what changed meanwhile is what the feed can no longer say, so the caller compares every row
 * (`row_sweep.ts`). Stored items are held against the registry first: another database behind the
 * URL is a {@linkcode RegistryReplacedError}, never merged. False when the claim was lost.
 */
export async function reanchor(
  deps: FeedContext,
  claim: FeedClaim,
  err: SinceUnknownError,
): Promise<boolean> {
  await checkSameRegistry(deps, claim.crawl, {
    seen: err.since,
    current: err.head,
    force: true,
  });
  return await applyRows(deps, claim, [], { to: err.head });
}

/**
 * Applies `rows` under the claim as the feed's own are applied (documents fetched where the crawl
 * fetches them, counts exact): changes read from the feed but not applied by it (a final check's
 * window), or the repairs a comparison of rows found. The feed's sequence moves to `to`, or stays
 * where it is (every row is applied at it, so that a crash half-way never leaves the feed's
 * sequence ahead of what was applied). False when the claim was lost.
 */
export async function applyRows(
  deps: FeedContext,
  claim: FeedClaim,
  rows: readonly ChangeRow[],
  o: { to?: string } = {},
): Promise<boolean> {
  const at = claim.entry.value.seq;
  const changes = await fetchChanged(
    deps,
    claim.crawl,
    rows.map((r) => ({ ...r, seq: at })),
  );
  const next = await applyDrift(deps.kv, claim.entry, changes, {
    lastSeq: o.to ?? at,
    nowMs: deps.clock.now(),
    caughtUp: false,
    ranges: await rangesOf(deps.kv, claim.crawl.id),
    leaseUntilMs: deps.clock.now() + claim.leaseMs,
  });
  if (!next) return false;
  claim.entry = next;
  return true;
}

/**
 * Reads the changes after `since` without applying them (the final check needs to know what
 * moved while it counted), to the feed's end (`feed_read.ts`). Null when there were more than
 * `max`, or the read stopped at its bound (a window that may miss changes proves nothing).
 * @throws SinceUnknownError when the feed does not know `since`.
 */
export async function peekChanges(
  ctx: Pick<CrawlContext, "source" | "clock">,
  since: string,
  options: { batch?: number; max?: number } = {},
): Promise<ChangeRow[] | null> {
  const out: ChangeRow[] = [];
  const feed = new FeedReader(ctx.source, { clock: ctx.clock, batch: options.batch });
  for (let at = since;;) {
    const { rows, lastSeq, end } = await feed.next(at);
    out.push(...rows);
    if (out.length > (options.max ?? 10_000) || end === "bounded") return null;
    if (end === "end") return out;
    at = lastSeq;
  }
}

/**
 * The changes of a batch as items to apply: documents fetched when the crawl fetches them. A
 * document older than its change (or not there yet) comes from a host behind the feed (npm's
 * lags it): the item is stored at the change's revision with its document pending, asked again
 * later (`pending_ask.ts`); it never holds the feed up, nor fails the crawl. Documents without a
 * revision (`abbreviated`) are held against the stored ones by `modified` instead
 * (`againstStored`).
 */
async function fetchChanged(
  deps: FeedContext,
  crawl: CrawlRecord,
  rows: ChangeRow[],
) {
  const { source } = deps;
  const stored = crawl.docs && crawl.abbreviated
    ? await itemsByIds(deps.kv, crawl.id, rows.filter((r) => !r.deleted).map((r) => r.id))
    : null;
  return await mapPool(rows, async (r): Promise<DriftChange> => {
    if (r.deleted) return { seq: r.seq, id: r.id, deleted: true };
    if (!crawl.docs) return { seq: r.seq, id: r.id, rev: r.rev };
    const held = againstListing(r, await source.doc(r.id));
    const doc = stored ? againstStored(r, held, stored.get(r.id)) : held;
    // Behind its change (npm's CDN lags the feed): the item takes the change's revision with its
    // document pending, asked again later (`pending_ask.ts`); the feed goes on.
    if (doc.kind === "failed") return { seq: r.seq, id: r.id, rev: r.rev, doc: failedDoc(doc) };
    const served = doc.kind === "doc" || doc.kind === "raw" ? doc.docRev : null;
    const rev = served && served !== r.rev ? served : r.rev;
    return { seq: r.seq, id: r.id, rev, doc };
  }, { concurrency: feedDocConcurrency(crawl) });
}

/** Documents in flight while the feed is applied: what the crawl's shards had, at most 64. */
const FEED_DOC_CONCURRENCY = 64;

/**
 * The feed's document GETs in flight: one stream carries what all shards carried while crawling
 * (no more than the crawl asked of the registry), at most {@linkcode FEED_DOC_CONCURRENCY}.
 */
function feedDocConcurrency(crawl: CrawlRecord): number {
  return Math.max(1, Math.min(FEED_DOC_CONCURRENCY, crawl.concurrency * crawl.shards));
}

/** Lets the feed go if this runner still holds it. */
export async function releaseFeed(
  kv: Deno.Kv,
  crawlId: string,
  owner: string,
): Promise<Deno.KvEntryMaybe<DriftState>> {
  return await releaseLease<DriftState>(kv, keys.feed(crawlId), owner);
}

/**
 * Reads `_changes` from where the crawl stands to the feed's proven end, applying each batch
 * (claim, apply, release). Documents are fetched for changed items when the crawl fetches them.
 * @throws RegistryReplacedError when the registry went back below what was applied.
 */
export async function catchUp(
  deps: FeedContext & FeedClaimContext,
  crawlId: string,
  options: {
    /** Changes read per request. @default FEED_BATCH (200) */
    batch?: number;
  } = {},
): Promise<CatchUpResult> {
  const claim = await claimFeed(deps, crawlId);
  if (!claim) {
    const [crawl, feed] = await Promise.all([
      getCrawl(deps.kv, crawlId),
      getFeed(deps.kv, crawlId),
    ]);
    return { applied: 0, seq: feed.value?.seq ?? crawl.value?.startSeq ?? null, ran: false };
  }
  let applied: number | null;
  try {
    applied = await applyToEnd(deps, claim, options);
  } catch (err) {
    // Let the next runner start at once from the committed sequence (a crash waits for expiry).
    await releaseFeed(deps.kv, crawlId, claim.owner).catch(() => null);
    throw err;
  }
  const released = await releaseFeed(deps.kv, crawlId, claim.owner);
  return { applied: applied ?? 0, seq: released.value?.seq ?? claim.entry.value.seq, ran: true };
}
