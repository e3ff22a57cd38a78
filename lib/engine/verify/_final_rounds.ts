/**
 * The rounds of a crawl's final check (see `completion.ts`, which runs them): every range held
 * against the registry a batch at a time (`_verdicts.ts`), by ranks or, where offsets are not ranks, by
 * the total; verdicts recorded and the crawl moved to `done` with how it was proven by
 * `_outcome.ts`.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import { peekChanges } from "../crawl/mod.ts";
import { applyWindow, noteWindow } from "./_pass_feed.ts";
import type { Pass } from "./_pass.ts";
export type { Pass, PassSettings } from "./_pass.ts";
import { cutStored, sampleStored, storedItems, storedRevision } from "../items/mod.ts";
import { checkListed, listable } from "./_listed_check.ts";
import { done, notePending, provenExact, settle } from "./_outcome.ts";
export { done, noteVerification, settle } from "./_outcome.ts";
import {
  type CrawlRecord,
  listRangeDrift,
  listShards,
  type ShardRecord,
  shardStored,
} from "../store/mod.ts";
import {
  type ChangeWindow,
  checkRanges,
  checkTotal,
  plannedCountVerdicts,
  type RangeToCheck,
  type RangeVerdict,
} from "./_verdicts.ts";

/** Ranges the final check holds against the registry at once (probes, samples, verdicts). */
const CHECK_BATCH = 256;

/** Stored items per range held against the registry's revisions by each final check. */
const STORED_SAMPLE = 8;

/**
 * What landed since sequence `at`: read from the feed (not applied, but kept to be applied before
 * the crawl is marked done: `applyWindow`), or `no-feed`.
 */
function windowOf(pass: Pass, at: string | null): () => Promise<ChangeWindow> {
  return async () => {
    if (!pass.feed || at === null) return "no-feed";
    const rows = await peekChanges({ source: pass.source, clock: pass.o.clock }, at);
    if (rows === null) return "too-many";
    noteWindow(pass, at, rows);
    return rows;
  };
}

/**
 * Before the feed is read: when every range's ranks were computed at the sequence the store is
 * caught up to and every range agrees, the feed has nothing to apply either, and the crawl is done
 * (the feed's own end is one round trip less). Nothing is decided otherwise.
 */
export async function heldStill(pass: Pass, at: string): Promise<boolean> {
  const shards = await listShards(pass.kv, pass.id);
  const drift = await listRangeDrift(pass.kv, pass.id);
  const proven: [Deno.KvEntry<ShardRecord>[], RangeVerdict[]][] = [];
  for (let i = 0; i < shards.length; i += CHECK_BATCH) {
    const batch = shards.slice(i, i + CHECK_BATCH);
    const verdicts = await checkBatch(pass, batch, drift, {
      at,
      window: () => Promise.resolve("too-many" as const),
    });
    if (!verdicts.every((v) => v.verdict === "equal")) return false;
    proven.push([batch, verdicts]);
  }
  // Each range is marked proven, as a round of the check would.
  for (const [batch, verdicts] of proven) {
    await settle(pass.kv, pass.id, batch, verdicts, { ...pass.o, at });
  }
  // Every rank was read at `at` itself: nothing had changed after it, no window to apply.
  pass.window = { at, rows: [] };
  await provenExact(pass, shards.length, at);
  return true;
}

/** One batch of shards' ranges held against the registry (see `checkRanges`). */
function checkBatch(
  pass: Pass,
  batch: Deno.KvEntry<ShardRecord>[],
  drift: Awaited<ReturnType<typeof listRangeDrift>>,
  o: { at: string | null; window: () => Promise<ChangeWindow> },
): Promise<RangeVerdict[]> {
  return checkAgainst(pass, batch.map((e) => toCheck(e.value, drift)), o);
}

/** Ranges held against the registry, with the store's items sampled at their starts. */
function checkAgainst(
  pass: Pass,
  ranges: RangeToCheck[],
  o: { at: string | null; window: () => Promise<ChangeWindow> },
): Promise<RangeVerdict[]> {
  return checkRanges(pass.source, ranges, {
    ...o,
    clock: pass.o.clock,
    storedRev: (itemId) => storedRevision(pass.kv, pass.id, itemId),
    sampleStored: (r) => sampleStored(pass.kv, pass.id, r, STORED_SAMPLE),
  });
}

/**
 * Parts held against the registry: those small enough by one listing of their rows each
 * (`_listed_check.ts`: no snapshot needed, so they are decided however fast the registry changes),
 * the others by ranks. A view's parts are held by ranks only.
 */
async function checkParts(
  pass: Pass,
  ranges: RangeToCheck[],
  at: string | null,
): Promise<RangeVerdict[]> {
  const maxPage = pass.source.capabilities.maxPage;
  const byRows = pass.view ? [] : ranges.filter((r) => listable(r.stored, maxPage));
  const listedSet = new Set(byRows);
  const byRanks = ranges.filter((r) => !listedSet.has(r));
  const [listed, ranked] = await Promise.all([
    byRows.length === 0 ? [] : checkListed(pass.source, byRows, {
      window: windowOf(pass, at),
      storedItems: (r) => storedItems(pass.kv, pass.id, r, { maxRows: r.stored + 1 }),
    }),
    byRanks.length === 0 ? [] : checkAgainst(pass, byRanks, { at, window: windowOf(pass, at) }),
  ]);
  const verdicts = new Map<RangeToCheck, RangeVerdict>();
  byRows.forEach((r, i) => verdicts.set(r, listed[i]));
  byRanks.forEach((r, i) => verdicts.set(r, ranked[i]));
  return ranges.map((r) => verdicts.get(r)!);
}

/**
 * Shards' ranges held against the registry now, as a round would (small ones by their rows,
 * others by ranks), with the feed applied to `at`: what a follower re-proves (`reprove.ts`).
 */
export async function checkShards(
  pass: Pass,
  entries: Deno.KvEntry<ShardRecord>[],
  at: string,
): Promise<RangeVerdict[]> {
  const drift = await listRangeDrift(pass.kv, pass.id);
  return await checkParts(pass, entries.map((e) => toCheck(e.value, drift)), at);
}

/** A shard's range as the check takes it. */
function toCheck(
  shard: ShardRecord,
  drift: Awaited<ReturnType<typeof listRangeDrift>>,
): RangeToCheck {
  return {
    id: shard.id,
    start: shard.start,
    end: shard.end,
    stored: shardStored(shard, drift),
    relists: shard.relists ?? 0,
  };
}

/** One round over the ranges not yet proven by this pass (see `_verdicts.ts`). */
export async function rankRound(
  pass: Pass,
  at: string | null,
): Promise<"done" | "relisted" | "pending"> {
  const { kv, id } = pass;
  const shards = await listShards(kv, id);
  const drift = await listRangeDrift(kv, id);
  const todo = shards.filter((e) => !pass.proven.has(e.value.id));
  const allProven = async () => (await provenExact(pass, shards.length, at), "done" as const);
  if (todo.length === 0) return await allProven();
  // Ranges are checked a batch at a time: memory stays the same with 16 shards or 100,000.
  let relists = 0;
  let left = 0;
  const record = async (batch: Deno.KvEntry<ShardRecord>[], verdicts: RangeVerdict[]) => {
    relists += await settle(kv, id, batch, verdicts, {
      ...pass.o,
      at,
      view: pass.view,
      keepDone: pass.keepDone,
      unproven: pass.unproven,
    });
    // A range decided unproven is decided for this pass: the next re-proof tries it again.
    for (const v of verdicts) {
      if (v.verdict === "equal" || pass.unproven.has(v.id)) pass.proven.add(v.id);
    }
    left += verdicts.filter((v) => v.verdict === "undecided").length;
  };
  // Ranges checked in parts were left undecided as a whole in earlier rounds (`_range_parts.ts`).
  const inParts = todo.filter((e) => pass.parts.has(e.value.id));
  const whole = todo.filter((e) => !pass.parts.has(e.value.id));
  for (let i = 0; i < whole.length; i += CHECK_BATCH) {
    const batch = whole.slice(i, i + CHECK_BATCH);
    const verdicts = await checkBatch(pass, batch, drift, { at, window: windowOf(pass, at) });
    await record(batch, verdicts);
    for (const [j, v] of verdicts.entries()) {
      if (v.verdict === "undecided") pass.parts.noteUndecided(batch[j].value, v.margin, v.stored);
    }
  }
  if (inParts.length > 0) {
    const verdicts = await pass.parts.check(inParts.map((e) => e.value), {
      cut: (range, c) => cutStored(kv, id, range, c),
      check: (ranges) => checkParts(pass, ranges, at),
      stored: (shard) => shardStored(shard, drift),
    });
    await record(inParts, verdicts);
  }
  if (relists > 0) {
    await notePending(kv, id, `${relists} range(s) disagreed with the registry: listing again`);
    return "relisted";
  }
  // Every range checked and equal in this round means no change landed anywhere after `at` (a
  // change makes its range undecided), so nothing is left to apply: done now, not a round later.
  // (Ranges proven in an earlier round were not looked at now: changes there wait for a round.)
  // (Parts proven in earlier rounds were not either.)
  const allChecked = todo.length === shards.length && inParts.length === 0;
  if (allChecked && shards.every((e) => pass.proven.has(e.value.id))) {
    return await allProven();
  }
  if (left > 0) {
    await notePending(
      kv,
      id,
      `${left} of ${shards.length} ranges wait for a moment they hold still` +
        (pass.parts.size > 0 ? ` (${pass.parts.size} parts of them checked one by one)` : ""),
    );
  }
  return "pending";
}

/**
 * One round holding the total against `total_rows`, where offsets are not ranks; and, while the
 * registry holds what it held when planned (`crawl.total` items), each shard against the count its
 * plan found (not for a plan by `prior`, whose counts are estimates: each of its ranges was listed
 * to its end, and the total is what is checked).
 */
export async function totalRound(
  pass: Pass,
  at: string | null,
  crawl: Pick<CrawlRecord, "total" | "planMethod">,
): Promise<"done" | "pending" | "relisted"> {
  const planned = crawl.total;
  const counted = crawl.planMethod !== "prior";
  const shards = await listShards(pass.kv, pass.id);
  const drift = await listRangeDrift(pass.kv, pass.id);
  const stored = shards.map((e) => shardStored(e.value, drift));
  const verdict = await checkTotal(pass.source, stored, windowOf(pass, at));
  if (verdict.verdict === "undecided") return "pending";
  const still = counted && verdict.verdict === "equal" && verdict.span === planned;
  if (still) {
    const off = plannedCountVerdicts(shards.map((e) => e.value), stored)
      .filter((v) => v.verdict === "mismatch");
    if (await settle(pass.kv, pass.id, shards, off, { ...pass.o, at }) > 0) {
      await notePending(
        pass.kv,
        pass.id,
        `${off.length} shard(s) differ from their plan: listing again`,
      );
      return "relisted";
    }
  }
  if (verdict.verdict === "mismatch") {
    throw new FatalError(
      `the crawl stored ${verdict.stored} items but the registry lists ${verdict.span}` +
        `${at === null ? "" : ` at seq ${at}`}, more than its changes meanwhile explain`,
    );
  }
  await pass.checkUnchanged?.();
  const window = await applyWindow(pass);
  await done(pass.kv, pass.id, pass.o, {
    verification: {
      status: "total",
      detail: `${verdict.stored} items, as many as the registry lists` +
        (at === null ? " (it has no change feed)" : ` at seq ${at}`) +
        (still
          ? `, and each of ${shards.length} shards as many as its plan counted there (offsets ` +
            "are not ranks: counted by skip or one pass)"
          : !counted
          ? `; it gives no rank, so its ${shards.length} shards were cut by a prior and each ` +
            "listed to its end, not counted one by one"
          : "; its offsets are not ranks and it changed since planned, so shards were not checked one by one") +
        (window.applied > 0
          ? `, and the ${window.applied} changes read after it applied too (to seq ${window.to})`
          : ""),
    },
    driftError: pass.driftError,
    learned: pass.source.learned,
  });
  return "done";
}
