/**
 * The row sweep: every row the crawl holds compared with the registry's, in key order, a page at a
 * time; what differs is repaired in place. Counts (`reprove.ts`) find rows missing or extra in a
 * range, but not a row at a stale revision, nor a change the feed never showed in a range whose
 * count it did not move: only comparing rows does, at any range size (on npm a range holds 80,000
 * rows, far more than one listing: its count was all that was proven). "Proven whole" means this.
 *
 * Each page of the registry's listing `[cursor, last row]` is held against the rows the store
 * holds there, with the feed held at the sequence `at` it was applied to. The listing is answered
 * later than `at`; the window (the changes after `at`, read after the listing) names every id that
 * may differ between the two states. Any other id must be listed exactly when the store holds it,
 * at the same revision; where it is not, the listing is the registry at `at` for that id, and the
 * store is repaired to it (an insert, an update with the document fetched, or a delete), counted
 * exactly through the feed's own path (`applyRows`), without moving the feed. A page whose window
 * could not be read whole is compared again later. A short page is never taken for the end (a
 * registry may cap pages without a word): a page covers exactly the keys up to its last row, and
 * only an empty answer ends the key space.
 *
 * A sweep runs a few pages per follow tick, paced to end within its period
 * (`--verify-rows-every`, a day by default: on npm 450 listings of 10,000 rows), or at once when
 * forced (after the registry numbered its changes anew: {@linkcode freshSweep} with a reason).
 * A sweep that repaired nothing proves the copy whole by its rows (`cleanAt`).
 *
 * @module
 */
import type { ChangeRow, Row } from "../../plan/source.ts";
import { OPEN_END } from "../../plan/source.ts";
import { compareKeys } from "../../plan/keys.ts";
import { applyRows, type FeedClaim, type FeedContext, peekChanges } from "../crawl/mod.ts";
import { storedItems, type StoredRow } from "../items/mod.ts";
import { pageLimit } from "../page/mod.ts";
import type { RowSweep } from "../store/mod.ts";

/** How often every row of a followed crawl is compared by default, in milliseconds: a day. */
export const VERIFY_ROWS_EVERY_MS = 86_400_000;

/** Pages one follow tick compares at most (the rest are due at the next ticks). */
export const SWEEP_PAGES_PER_TICK = 8;

/** A sweep just begun at `nowMs`, carrying what `prior` ended with; `forced`: run at once. */
export function freshSweep(
  nowMs: number,
  prior?: RowSweep,
  forced: string | null = null,
): RowSweep {
  return {
    startedAt: nowMs,
    cursor: null,
    compared: 0,
    repaired: 0,
    skipped: 0,
    forced,
    lastEndedAt: prior?.lastEndedAt ?? null,
    lastRepaired: prior?.lastRepaired ?? 0,
    cleanAt: prior?.cleanAt ?? null,
  };
}

/**
 * Rows of the sweep due by `nowMs`: all of them when it is forced, else its share of `total`, as
 * much of it as the time since it began is of `everyMs` (0: sweeps are off unless forced).
 */
export function rowsDue(s: RowSweep, o: { total: number; everyMs: number; nowMs: number }): number {
  if (s.forced !== null) return Infinity;
  if (o.everyMs <= 0) return 0;
  const elapsed = Math.max(0, o.nowMs - s.startedAt);
  return Math.ceil(Math.max(1, o.total) * elapsed / o.everyMs);
}

/** Whether the sweep has pages due now (see {@linkcode rowsDue}). */
export function sweepDue(
  s: RowSweep,
  o: { total: number; everyMs: number; nowMs: number },
): boolean {
  return s.compared < rowsDue(s, o);
}

/** What a sweep's ticks did. */
export interface SweepResult {
  /** Where the sweep stands now (to be stored by the caller). */
  rows: RowSweep;
  /** Rows compared by this call. */
  compared: number;
  /** Rows repaired by this call. */
  repaired: number;
  /** A whole sweep ended in this call. */
  ended: boolean;
}

/**
 * Compares the pages of the sweep due now (see the module comment), at most `maxPages`, with the
 * feed held by `claim` and applied to its end. Stops early when the claim is lost or a page's
 * window cannot be read whole (it is compared again next time).
 * @throws SinceUnknownError when the feed does not know where the crawl stands.
 */
export async function sweepRows(
  deps: FeedContext,
  claim: FeedClaim,
  prior: RowSweep,
  o: { total: number; everyMs: number; maxPages?: number },
): Promise<SweepResult> {
  const now = () => deps.clock.now();
  let s = prior;
  let compared = 0;
  let repaired = 0;
  let ended = false;
  for (let page = 0; page < (o.maxPages ?? SWEEP_PAGES_PER_TICK); page++) {
    if (!sweepDue(s, { ...o, nowMs: now() })) break;
    const got = await comparePage(deps, claim, s.cursor);
    if (got === null) break;
    compared += got.compared;
    repaired += got.repaired;
    s = {
      ...s,
      cursor: got.next,
      compared: s.compared + got.compared,
      repaired: s.repaired + got.repaired,
      skipped: s.skipped + got.skipped,
    };
    if (got.next === null) {
      ended = true;
      const clean = s.repaired === 0 && s.skipped === 0;
      s = {
        ...freshSweep(now()),
        lastEndedAt: now(),
        lastRepaired: s.repaired,
        cleanAt: clean ? now() : s.cleanAt,
      };
      break;
    }
  }
  return { rows: s, compared, repaired, ended };
}

/** What comparing one page did: rows compared and repaired, where the next page starts. */
interface PageCompared {
  /** The key the next page starts at; null: the key space is done. */
  next: string | null;
  compared: number;
  repaired: number;
  /** Rows that could not be compared (ids the store keeps only by their start). */
  skipped: number;
}

/**
 * One page from `cursor` held against the store, differences repaired. Null when it could not be
 * decided now (its window was too large or cut short, or the claim was lost).
 */
async function comparePage(
  deps: FeedContext,
  claim: FeedClaim,
  cursor: string | null,
): Promise<PageCompared | null> {
  const { crawl } = claim;
  const at = claim.entry.value.seq;
  const limit = pageLimit(crawl, deps.source);
  const page = await deps.source.list({
    start: cursor,
    end: crawl.planMethod === "rank" ? null : OPEN_END,
    limit,
  });
  const last = page.rows.at(-1)?.id;
  // The keys this page covers: up to its last row (a short page may be a silent cap), or, for an
  // empty answer, everything from the cursor on.
  const end = last === undefined ? null : last + "\0";
  const held = await storedItems(deps.kv, crawl.id, { start: cursor, end }, {
    maxRows: 4 * limit + 1000,
  });
  const window = await peekChanges(deps, at);
  if (window === null) return null;
  if (held === null) {
    return { next: end, compared: 0, repaired: 0, skipped: page.rows.length };
  }
  const fixes = differences(page.rows, held, new Set(window.map((c) => c.id)), at);
  if (fixes.length > 0 && !await applyRows(deps, claim, fixes)) return null;
  return { next: end, compared: page.rows.length, repaired: fixes.length, skipped: 0 };
}

/**
 * What to apply so that the store holds what the registry lists, for every id no change after
 * `at` names: the listed rows missing or at another revision (upserts), the stored ones not
 * listed (deletions).
 */
export function differences(
  listed: readonly Row[],
  held: readonly StoredRow[],
  changed: ReadonlySet<string>,
  at: string,
): ChangeRow[] {
  const stored = new Map(held.map((r) => [r.id, r.rev]));
  const out: ChangeRow[] = [];
  const seen = new Set<string>();
  for (const row of listed) {
    seen.add(row.id);
    if (changed.has(row.id) || stored.get(row.id) === row.rev) continue;
    out.push({ seq: at, id: row.id, rev: row.rev, deleted: false });
  }
  for (const row of held) {
    if (seen.has(row.id) || changed.has(row.id)) continue;
    out.push({ seq: at, id: row.id, rev: row.rev, deleted: true });
  }
  return out.sort((a, b) => compareKeys(a.id, b.id));
}
