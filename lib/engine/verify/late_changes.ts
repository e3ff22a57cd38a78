/**
 * Changes that reach a feed late, under a sequence a follower already read past (npm's replica was
 * seen to add rows behind the head): a follower reading on from its cursor never hears of them, and
 * only a proof would find them, minutes later. So a follower keeps where it stood over the last
 * minute (a trail of sequences, {@linkcode LATE_WINDOW_MS}) and, every few seconds while the trail
 * holds any and the feed holds nothing new (a busy feed's own changes come first), reads the feed
 * again from the oldest of them up to where it stands, applying the rows
 * the store does not hold as the feed says (the feed lists an id once, at its latest change, so a
 * row that differs from the store is newer). Bounded: at most {@linkcode LATE_MAX_ROWS} rows a look.
 *
 * @module
 */
import { mapPool } from "../../base/pool.ts";
import type { ChangeRow } from "../../plan/source.ts";
import {
  applyRows,
  FEED_BATCH,
  type FeedClaim,
  type FeedContext,
  seqNumber,
} from "../crawl/mod.ts";
import { storedRevision } from "../items/mod.ts";

/** How far back a follower looks for changes that reached the feed late, in milliseconds. */
export const LATE_WINDOW_MS = 60_000;

/** How often it looks, at most, in milliseconds. */
export const LATE_EVERY_MS = 5_000;

/** Rows one look behind the cursor reads at most. */
export const LATE_MAX_ROWS = 1_000;

/** Where a follower stood, and when (a trail of them, newest last). */
export type Trail = { atMs: number; seq: string }[];

/** The trail kept at `nowMs` with `seq` (where a tick started) added; older entries dropped. */
export function extendTrail(trail: Trail | undefined, seq: string, nowMs: number): Trail {
  const kept = (trail ?? []).filter((t) => nowMs - t.atMs <= LATE_WINDOW_MS);
  if (kept.at(-1)?.seq !== seq) kept.push({ atMs: nowMs, seq });
  return kept.slice(-32);
}

/** Whether a look behind the cursor is due at `nowMs` (the trail holds a sequence to look from). */
export function lateDue(
  trail: Trail | undefined,
  o: { at: string; checkedAt: number | null; nowMs: number },
): boolean {
  const from = trail?.find((t) => o.nowMs - t.atMs <= LATE_WINDOW_MS && t.seq !== o.at);
  return from !== undefined && o.nowMs - (o.checkedAt ?? 0) >= LATE_EVERY_MS;
}

/**
 * Reads the feed again from the oldest sequence of `trail` still within the window up to where
 * the claimed crawl stands, and applies the rows the store does not hold as listed (the feed's
 * sequence stays). Returns the rows read and applied.
 */
export async function applyLate(
  deps: FeedContext,
  claim: FeedClaim,
  trail: Trail,
): Promise<{ read: number; applied: number }> {
  const at = claim.entry.value.seq;
  const now = deps.clock.now();
  const from = trail.find((t) => now - t.atMs <= LATE_WINDOW_MS && t.seq !== at)?.seq;
  if (from === undefined) return { read: 0, applied: 0 };
  const rows: ChangeRow[] = [];
  const past = (seq: string) => {
    const [s, a] = [seqNumber(seq), seqNumber(at)];
    return s !== null && a !== null && s > a;
  };
  for (let since = from; rows.length < LATE_MAX_ROWS;) {
    const answer = await deps.source.changes(since, FEED_BATCH);
    const behind = answer.rows.filter((r) => !past(r.seq));
    rows.push(...behind);
    const done = answer.rows.length === 0 || behind.length < answer.rows.length ||
      answer.lastSeq === at || answer.rows.some((r) => r.seq === at) || answer.lastSeq === since;
    if (done) break;
    since = answer.lastSeq;
  }
  const held = await mapPool(
    rows,
    (r) => storedRevision(deps.kv, claim.crawl.id, r.id),
    { concurrency: 16 },
  );
  const late = rows.filter((r, i) => r.deleted ? held[i] !== null : held[i] !== r.rev);
  if (late.length > 0 && !await applyRows(deps, claim, late)) {
    return { read: rows.length, applied: 0 };
  }
  return { read: rows.length, applied: late.length };
}
