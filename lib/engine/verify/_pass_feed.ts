/**
 * The change feed during a pass of the final check (`completion.ts`), where every input a proof
 * rests on is checked:
 *
 * - before each round the feed is applied to its proven end; a refusal (a 400, an answer that is
 *   not a feed) is asked again at the next rounds, and only a pass whose every try was refused goes
 *   on without it, with the reason kept: a crawl whose registry changed meanwhile is then proven
 *   by counts only (`counts`), never `exact`, and stays followable;
 * - a feed that does not know where the crawl stands (a registry that numbered its changes anew)
 *   is taken up again at its head and every row is compared (`row_sweep.ts`), at once, before the
 *   rounds go on: what changed meanwhile the feed can no longer say;
 * - a round's window (the changes after the store's sequence, read after the ranks or rows)
 *   excuses the ids it names; before the crawl is marked done those changes are applied, so that
 *   an id changed before that sequence and again after it (which the feed lists once, at its
 *   latest change) holds a later state, never an older one or none.
 *
 * @module
 */
import { errorLine, FatalError, TransientError } from "../../base/errors.ts";
import type { ChangeRow } from "../../plan/source.ts";
import {
  applyRows,
  applyToEnd,
  peekChanges,
  reanchor,
  RegistryReplacedError,
  releaseFeed,
  SinceUnknownError,
} from "../crawl/mod.ts";
import { freshSweep, type SweepResult, sweepRows } from "./row_sweep.ts";
import type { Pass } from "./_pass.ts";

/** Rounds in a row whose feed was refused before a pass goes on without it. */
export const FEED_REFUSED_ROUNDS = 3;

/** Times a pass takes the feed up again at its head before it gives the turn back. */
const RESYNCS_PER_PASS = 2;

/**
 * Applies the feed to its proven end before a round: `ok`, `lost` (another runner took the feed),
 * or `skip` (the feed was refused: this round decides nothing; the next asks again). A pass whose
 * feed was refused {@linkcode FEED_REFUSED_ROUNDS} times in a row goes on without it.
 * @throws SinceUnknownError when the feed does not know where the crawl stands.
 */
export async function advanceFeed(pass: Pass): Promise<"ok" | "lost" | "skip"> {
  if (!pass.feed) return "ok";
  try {
    const n = await applyToEnd(
      { kv: pass.kv, source: pass.source, clock: pass.o.clock },
      pass.feed,
    );
    if (n === null) return "lost";
    pass.applied += n;
    pass.feedRefusals = 0;
    return "ok";
  } catch (err) {
    if (
      err instanceof TransientError || err instanceof RegistryReplacedError ||
      err instanceof SinceUnknownError
    ) throw err;
    pass.driftError = `change feed unavailable: ${errorLine(err)}`;
    if (++pass.feedRefusals < FEED_REFUSED_ROUNDS) return "skip";
    await releaseFeed(pass.kv, pass.id, pass.feed.owner);
    pass.feed = null;
    pass.feedLost = true;
    return "ok";
  }
}

/**
 * Takes the pass's feed up again at its head after `err`, and compares every row at once (paged,
 * the finishing lease renewed by `renew` between pages). False when the claim or the lease was
 * lost. A pass that needed this more than twice throws: the feed keeps forgetting.
 */
export async function resyncPass(
  pass: Pass,
  err: SinceUnknownError,
  renew: () => Promise<boolean>,
): Promise<boolean> {
  if (!pass.feed) throw err;
  if ((pass.resynced?.times ?? 0) >= RESYNCS_PER_PASS) {
    throw new FatalError(`${err.message}, again after being taken up at its head twice`);
  }
  const deps = { kv: pass.kv, source: pass.source, clock: pass.o.clock };
  if (!await reanchor(deps, pass.feed, err)) return false;
  const clock = pass.o.clock;
  const why = `the feed did not know seq ${err.since}`;
  let rows = freshSweep(clock.now(), undefined, why);
  let compared = 0;
  let repaired = 0;
  for (let idle = 0;;) {
    const r: SweepResult = await sweepRows(deps, pass.feed, rows, { total: 0, everyMs: 0 });
    rows = r.rows;
    compared += r.compared;
    repaired += r.repaired;
    if (r.ended) break;
    // A page whose window was too large to read whole is compared again after a pause.
    if (r.compared === 0) await clock.sleep(Math.min(1000, 100 * 2 ** idle++));
    else idle = 0;
    if (!await renew()) return false;
  }
  pass.resynced = {
    times: (pass.resynced?.times ?? 0) + 1,
    from: pass.resynced?.from ?? err.since,
    to: err.head,
    compared: (pass.resynced?.compared ?? 0) + compared,
    repaired: (pass.resynced?.repaired ?? 0) + repaired,
  };
  pass.window = null;
  return true;
}

/** Keeps the changes a round read after sequence `at` (a window), for {@linkcode applyWindow}. */
export function noteWindow(pass: Pass, at: string, rows: readonly ChangeRow[]): void {
  if (pass.window?.at !== at) pass.window = { at, rows: [] };
  pass.window.rows.push(...rows);
}

/**
 * Applies the changes read after the sequence the store stands at (see the module comment), before
 * the crawl is marked done at it: the last round's windows, or, where that round read none at this
 * sequence (its ranges were proven in earlier rounds, or by ranks the feed showed unmoved), the
 * feed read now (unless `read` is false). Returns how many, and the sequence of the last (null when
 * none). Throws when the claim was lost, or the window could not be read whole (the crawl is not
 * marked done then).
 */
export async function applyWindow(
  pass: Pass,
  o: { read?: boolean } = {},
): Promise<{ applied: number; to: string | null }> {
  const feed = pass.feed;
  if (!feed) return { applied: 0, to: null };
  const at = feed.entry.value.seq;
  let rows = pass.window?.at === at ? pass.window.rows : null;
  if (rows === null && o.read === false) return { applied: 0, to: null };
  if (rows === null) {
    rows = await peekChanges({ source: pass.source, clock: pass.o.clock }, at);
    if (rows === null) {
      throw new TransientError(`too many changes after seq ${at} to finish the crawl at it now`);
    }
  }
  pass.window = null;
  if (rows.length === 0) return { applied: 0, to: null };
  if (!await applyRows({ kv: pass.kv, source: pass.source, clock: pass.o.clock }, feed, rows)) {
    throw new TransientError("the change feed was taken over while the crawl was being finished");
  }
  return { applied: rows.length, to: rows.at(-1)!.seq };
}
