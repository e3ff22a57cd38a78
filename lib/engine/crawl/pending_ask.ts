/**
 * Pending documents asked again: a document its host served behind its item's revision (npm's CDN
 * serves the previous packument, or a 404 for a package just published, for a while after
 * `_changes` names it) was stored pending (`items/pending_docs.ts`). Each pass takes those due,
 * asks each again — with `If-None-Match` and the ETag it was served with, so that a host still
 * serving the same thing answers 304 with no body — and commits what came back: the document at
 * the item's revision (or a later one) lands; still behind, it is asked again after a longer pause
 * (1 s doubling to 60 s; from 10 s for one with no ETag to ask with, a 404 for a package just
 * published, whose every ask costs a whole answer); still behind after `PENDING_DOCS.windowMs` (10 min, past a CDN's
 * `max-age` of 5 min) it is recorded as the item's error with its reason, and asked again every
 * hour (the item takes the document when it comes). Nothing here holds a
 * page, a shard or the feed; a pass is bounded (`passLimit` documents, `concurrency` at once).
 *
 * @module
 */
import { errorLine, TransientError } from "../../base/errors.ts";
import { mapPool } from "../../base/pool.ts";
import { PENDING_DOCS } from "../../base/retry_policy.ts";
import type { DocResult } from "../../plan/source.ts";
import {
  type DuePending,
  duePendingDocs,
  emptyPendingDocsState,
  notePendingCount,
  pendingDocsState,
  type PendingOutcome,
  settlePending,
  stillPending,
} from "../items/mod.ts";
import { againstListing, againstStored } from "../page/mod.ts";
import {
  type CrawlRecord,
  keys,
  type PendingDocsState,
  releaseLease,
  takeLease,
} from "../store/mod.ts";
import type { CrawlContext } from "./context.ts";

/**
 * What asking a crawl's pending documents again needs: its store, its source (the document host),
 * the time, the asker's name (the pass's lease) and the largest document stored.
 */
export type PendingAskContext = Pick<
  CrawlContext,
  "kv" | "source" | "clock" | "owner" | "maxDocBytes"
>;

/** What one pass did. */
export interface PendingPass {
  /** Documents pending after the pass. */
  pending: number;
  /** Asked again in this pass. */
  asked: number;
  /** Of those, answered 304. */
  notModified: number;
  /** Landed at their item's revision in this pass. */
  landed: number;
  /** Recorded as their item's error in this pass (still behind after the window). */
  expired: number;
  /** When the next pending document is due, epoch ms (null: none pending). */
  nextMs: number | null;
  /** The state after the pass (totals since the crawl began). */
  state: PendingDocsState | null;
}

/**
 * One pass over crawl `crawl`'s pending documents (see the module comment). Answers that lost a
 * race (the item rewritten meanwhile, another asker) are left for the next pass; a host that fails
 * outright (a transient error) leaves the document pending, asked again later.
 */
export async function askPendingDocs(
  ctx: PendingAskContext,
  crawl: CrawlRecord,
  options: {
    /** Still behind this long, a document is its item's error, in ms. @default PENDING_DOCS.windowMs */
    windowMs?: number;
    /** Due documents taken by this pass at most. @default PENDING_DOCS.passLimit */
    limit?: number;
    /** Documents asked at once. @default PENDING_DOCS.concurrency */
    concurrency?: number;
    /** The pass's lease, in milliseconds. @default PENDING_DOCS.passLeaseMs */
    leaseMs?: number;
  } = {},
): Promise<PendingPass> {
  const { kv, clock } = ctx;
  const windowMs = options.windowMs ?? PENDING_DOCS.windowMs;
  const found = await duePendingDocs(kv, crawl.id, {
    nowMs: clock.now(),
    limit: options.limit ?? PENDING_DOCS.passLimit,
  });
  const pass: PendingPass = {
    pending: found.pending,
    asked: 0,
    notModified: 0,
    landed: 0,
    expired: 0,
    nextMs: found.nextMs,
    state: null,
  };
  let state = await pendingDocsState(kv, crawl.id);
  // One process asks a crawl's due documents at a time; a pass with nothing due writes nothing.
  const owner = ctx.owner;
  if (found.due.length > 0) {
    const taken = await takeLease<PendingDocsState>(kv, keys.pendingDocsState(crawl.id), {
      owner,
      nowMs: clock.now(),
      leaseMs: options.leaseMs ?? PENDING_DOCS.passLeaseMs,
      record: (cur, lease) => ({ ...(cur ?? emptyPendingDocsState()), lease }),
    });
    if (taken === null) {
      // Another process asks them now: what it found is the count.
      return { ...pass, nextMs: clock.now() + PENDING_DOCS.lookEveryMs, state: state.value };
    }
    state = taken;
  }
  const rest = { found, pass, state, windowMs, concurrency: options.concurrency };
  if (found.due.length === 0) return await askDue(ctx, crawl, rest);
  let done: PendingPass | null = null;
  try {
    done = await askDue(ctx, crawl, rest);
  } finally {
    const released = await releaseLease<PendingDocsState>(
      kv,
      keys.pendingDocsState(crawl.id),
      owner,
    );
    if (done) done.state = released.value ?? done.state;
  }
  return done;
}

/** The rest of a pass, its lease held: each due document asked, and what came committed. */
async function askDue(
  ctx: PendingAskContext,
  crawl: CrawlRecord,
  o: {
    found: { due: DuePending[] };
    pass: PendingPass;
    state: Deno.KvEntryMaybe<PendingDocsState>;
    windowMs: number;
    concurrency?: number;
  },
): Promise<PendingPass> {
  const { kv, clock } = ctx;
  const { found, pass, windowMs } = o;
  let state = o.state;
  const answers = await mapPool(found.due, async (due) => {
    if (!stillPending(due)) {
      return { due, outcome: { kind: "drop" } as PendingOutcome, asked: false };
    }
    if (!due.doc.expired && clock.now() - due.doc.sinceMs >= windowMs) {
      return { due, outcome: expiry(due, windowMs), asked: false };
    }
    return { due, outcome: await askAgain(ctx, crawl, due), asked: true };
  }, { concurrency: o.concurrency ?? PENDING_DOCS.concurrency });
  // Committed one by one: each op also moves the state record, which numbers the notes.
  for (const settled of answers) {
    const nowMs = clock.now();
    const next = await settlePending(kv, crawl.id, settled, {
      state,
      nowMs,
      maxDocBytes: ctx.maxDocBytes,
    });
    if (next === null) {
      state = await pendingDocsState(kv, crawl.id); // another writer: this one waits a pass
      pass.nextMs = nowMs;
      continue;
    }
    state = next.state;
    const o = settled.outcome;
    if (settled.asked) pass.asked++;
    if (o.kind === "again" && o.notModified) pass.notModified++;
    if (next.counted) pass[next.counted]++;
    if (next.nextMs !== null) pass.nextMs = Math.min(pass.nextMs ?? Infinity, next.nextMs);
    // One that landed, expired or was dropped leaves the count (one past the window was not in it).
    if (o.kind !== "again" && !settled.due.doc.expired) pass.pending--;
  }
  if (state.value === null || state.value.pending !== pass.pending) {
    const noted = await notePendingCount(kv, crawl.id, {
      state,
      pending: pass.pending,
      nowMs: clock.now(),
    });
    state = noted ?? state;
  }
  pass.state = state.value;
  if (pass.pending === 0) pass.nextMs = null;
  return pass;
}

/** The item's error once the window passed: why, and since when. */
function expiry(due: DuePending, windowMs: number): PendingOutcome {
  const was = due.item.record?.error;
  const doc: DocResult = {
    kind: "error",
    status: was?.status ?? 0,
    reason: `still behind its revision ${due.doc.rev.slice(0, 40)} after ` +
      `${Math.round(windowMs / 1000)} s and ${due.doc.tries} asks (asked again hourly): ` +
      (was?.reason ?? "no answer"),
  };
  return { kind: "expire", doc };
}

/** Asks the host again, conditionally, and says what becomes of the document. */
async function askAgain(
  ctx: PendingAskContext,
  crawl: CrawlRecord,
  due: DuePending,
): Promise<PendingOutcome> {
  const row = { id: due.doc.id, rev: due.doc.rev };
  let served: DocResult;
  try {
    served = await ctx.source.doc(due.doc.id, { ifNoneMatch: due.doc.etag });
  } catch (err) {
    if (!(err instanceof TransientError)) throw err;
    return { kind: "again", notModified: false }; // the host failed: asked again later
  }
  const notModified = served.kind === "error" && served.status === 304;
  const held = againstListing(row, served);
  // Without a revision in the document (abbreviated), by `modified` against what the item was
  // held against when it became pending (its reason keeps it).
  const checked = crawl.abbreviated
    ? againstStored(row, held, { rev: due.doc.rev, error: due.item.record?.error })
    : held;
  if (checked.kind === "failed") {
    return { kind: "again", notModified, etag: notModified ? due.doc.etag : checked.etag };
  }
  const rev = (checked.kind === "doc" || checked.kind === "raw") && checked.docRev
    ? checked.docRev
    : due.doc.rev;
  return { kind: "land", doc: checked, rev };
}

/** The message of an error, for a pass that failed as a whole (the caller's log). */
export function pendingPassLine(crawlId: string, err: unknown): string {
  return `pending documents of crawl ${crawlId}: ${errorLine(err)}; asked again later`;
}
