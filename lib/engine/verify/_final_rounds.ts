/**
 * The rounds of a crawl's final check (see `completion.ts`, which runs them): every range held
 * against the registry a batch at a time (`_verdicts.ts`), by ranks or, where offsets are not ranks, by
 * the total; verdicts recorded (equal ranges proven, disagreeing ones listed again), and the crawl
 * moved to `done` with how it was proven.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { FatalError } from "../../base/errors.ts";
import type { LearnedCaps, Source } from "../../plan/source.ts";
import { type Dispatcher, type FeedClaim, peekChanges, transition } from "../crawl/mod.ts";
import { cutStored, sampleStored, storedItems, storedRevision } from "../items/mod.ts";
import { checkListed, listable } from "./_listed_check.ts";
import { RangeParts } from "./_range_parts.ts";
import {
  commitRelist,
  commitShard,
  type CrawlRecord,
  keys,
  listRangeDrift,
  listShards,
  relisted,
  type ShardRecord,
  shardStored,
  updateRecord,
  type Verification,
} from "../store/mod.ts";
import {
  type ChangeWindow,
  checkRanges,
  checkTotal,
  completenessError,
  MAX_RELISTS,
  plannedCountVerdicts,
  type RangeToCheck,
  type RangeVerdict,
} from "./_verdicts.ts";

/** Ranges the final check holds against the registry at once (probes, samples, verdicts). */
const CHECK_BATCH = 256;

/** Stored items per range held against the registry's revisions by each final check. */
const STORED_SAMPLE = 8;

/** Options of the final check (`checkCompletion` in `completion.ts`). */
export interface CompletionOptions {
  /** Time and timers (leases, records' times, pauses between rounds). @default SYSTEM_CLOCK */
  clock?: Clock;
  /** Opens the crawl's source; without it the crawl is marked done unchecked (tests only). */
  openSource?: (crawl: CrawlRecord) => Source;
  /** Where shards listed again go (lease workers find them without). */
  dispatcher?: Dispatcher;
  /** Who checks (the feed's lease). @default a random id */
  owner?: string;
  /**
   * Checks in a row that prove nothing before giving the turn back (one that proves a range or a
   * part of one starts the count again). @default 8
   */
  maxRounds?: number;
  /** Called when this call marks the crawl done (not when it found it done). @default none */
  onFinished?: () => void;
}

/** One pass of the final check: what it holds across its rounds. */
export interface Pass {
  kv: Deno.Kv;
  source: Source;
  id: string;
  o: CompletionOptions;
  /** The feed this pass holds; null: none (or it proved unusable). */
  feed: FeedClaim | null;
  /** Changes applied by this pass. */
  applied: number;
  /** Why the feed could not be used, if so. */
  driftError?: string;
  /** Ranges proven by this pass. */
  proven: Set<number>;
  /** Ranges this pass proves a part at a time (they never held still as a whole). */
  parts: RangeParts;
  /** The crawl lists a view (no catch-up: its ranges are checked as if the registry held still). */
  view?: boolean;
  /**
   * Throws when the registry changed in a way the check cannot follow (a view since its crawl
   * started): called before each round and before the crawl is marked done.
   */
  checkUnchanged?: () => Promise<void>;
}

/** What landed since sequence `at`: read from the feed (not applied), or `no-feed`. */
function windowOf(pass: Pass, at: string | null): () => Promise<ChangeWindow> {
  return async () => pass.feed ? (await peekChanges(pass.source, at!)) ?? "too-many" : "no-feed";
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
  await provenExact(pass, shards.length, at);
  return true;
}

/** The crawl is done and exact: every one of its `ranges` was proven at `at`. */
async function provenExact(pass: Pass, ranges: number, at: string | null): Promise<void> {
  await pass.checkUnchanged?.();
  await done(pass.kv, pass.id, pass.o, {
    verification: {
      status: "exact",
      detail: `every one of ${ranges} ranges holds what the registry lists there` +
        (at === null ? " (no change feed: counted as it stood)" : ` at seq ${at}`) +
        (pass.applied > 0 ? `, after ${pass.applied} changes applied` : ""),
    },
    driftError: pass.driftError,
    learned: pass.source.learned,
  });
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
    relists += await settle(kv, id, batch, verdicts, { ...pass.o, at, view: pass.view });
    for (const v of verdicts) if (v.verdict === "equal") pass.proven.add(v.id);
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
 * registry holds what it held when planned (`planned` items), each shard against the count its
 * plan found.
 */
export async function totalRound(
  pass: Pass,
  at: string | null,
  planned: number,
): Promise<"done" | "pending" | "relisted"> {
  const shards = await listShards(pass.kv, pass.id);
  const drift = await listRangeDrift(pass.kv, pass.id);
  const stored = shards.map((e) => shardStored(e.value, drift));
  const verdict = await checkTotal(pass.source, stored, windowOf(pass, at));
  if (verdict.verdict === "undecided") return "pending";
  const still = verdict.verdict === "equal" && verdict.span === planned;
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
  await done(pass.kv, pass.id, pass.o, {
    verification: {
      status: "total",
      detail: `${verdict.stored} items, as many as the registry lists` +
        (at === null ? " (it has no change feed)" : ` at seq ${at}`) +
        (still
          ? `, and each of ${shards.length} shards as many as its plan counted there (offsets ` +
            "are not ranks: counted by skip or one pass)"
          : "; its offsets are not ranks and it changed since planned, so shards were not checked one by one"),
    },
    driftError: pass.driftError,
    learned: pass.source.learned,
  });
  return "done";
}

/**
 * Records verdicts: equal ranges are marked proven, disagreeing ones listed again (or, past
 * {@linkcode MAX_RELISTS}, the crawl fails). Returns how many ranges are listed again.
 */
export async function settle(
  kv: Deno.Kv,
  id: string,
  todo: Deno.KvEntry<ShardRecord>[],
  verdicts: RangeVerdict[],
  o: CompletionOptions & { at: string | null; view?: boolean },
): Promise<number> {
  let relists = 0;
  for (const v of verdicts) {
    const entry = todo.find((e) => e.value.id === v.id)!;
    const shard = entry.value;
    if (v.verdict === "equal") {
      if (shard.verified !== "exact") {
        await commitShard(kv, id, entry, { ...shard, verified: "exact" });
      }
    } else if (v.verdict === "mismatch") {
      const relistsSoFar = shard.relists ?? 0;
      if (relistsSoFar >= MAX_RELISTS) {
        throw completenessError({ ...shard, relists: relistsSoFar, view: o.view }, v, o.at);
      }
      const next = relisted(shard, (o.clock ?? SYSTEM_CLOCK).now(), null);
      if (await commitRelist(kv, id, entry, next)) {
        relists++;
        await o.dispatcher?.dispatch(id, shard.id);
      }
    }
  }
  return relists;
}

/** Notes on the crawl what the final check waits for (the status shows it). */
async function notePending(kv: Deno.Kv, id: string, detail: string): Promise<void> {
  const verification: Verification = { status: "pending", detail };
  await updateRecord<CrawlRecord>(
    kv,
    keys.crawl(id),
    (cur) => cur?.status === "running" ? { ...cur, verification } : undefined,
  );
}

/**
 * Moves the crawl to `done` with how it was proven, why its feed could not be used (if so) and
 * what its registry was seen to serve (remembered for the sources that read it later).
 */
export async function done(
  kv: Deno.Kv,
  id: string,
  o: CompletionOptions,
  end: { verification?: Verification; driftError?: string; learned?: Readonly<LearnedCaps> } = {},
): Promise<boolean> {
  let mine = false;
  const { verification, driftError, learned } = end;
  await transition(kv, id, "done", (s) => mine = s === "running", {
    clock: o.clock,
    patch: {
      ...(verification ? { verification } : {}),
      ...(driftError ? { driftError } : {}),
      ...(learned ? { learned: { ...learned } } : {}),
    },
  });
  if (mine) o.onFinished?.();
  return true;
}
