/**
 * A crawl's beginning: creating it (in `planning`), planning it exactly once (planning → running,
 * or failed), and handing its shards to the dispatcher. What follows (resume-or-create, pause,
 * resume, cancel, delete) is `lifecycle.ts`'s; the end, the final check and the watchdog are
 * `completion.ts`'s.
 *
 * Every failure ends in a state that says so: a crawl that cannot be planned (not a CouchDB
 * database, more shards than items, a registry that stays unreachable) becomes `failed` with a
 * one-line reason, never stays `planning`; resuming a failed crawl plans it again or resumes its
 * shards.
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import { backoff, PLANNING_RETRY } from "../../base/retry_policy.ts";
import { ITEM_LAYOUT } from "../items/mod.ts";
import { pageLimit } from "../page/mod.ts";
import type { ListingCache } from "../../sources/cache/mod.ts";
import { listAheadOf } from "./_prefetch.ts";
import type { CrawlContext } from "./context.ts";
import { feedAnchor } from "./feed/mod.ts";
import {
  BusyError,
  ConflictError,
  errorLine,
  InputError,
  neverRetried,
  NotFoundError,
} from "../../base/errors.ts";
import { crawlIdFor, type CrawlSpec } from "../../base/spec.ts";
import { evenSplitRanks } from "../../plan/baselines.ts";
import { type Plan, PLAN_PAGE, planShards } from "../../plan/planner.ts";
import { checkPlanTotal } from "../../plan/plan_file.ts";
import { SEARCH_READ_PAGE } from "../../plan/locate.ts";
import type { Source } from "../../plan/source.ts";
import {
  crawlOfKey,
  type CrawlRecord,
  createCrawlRecord,
  endPlanning,
  getCrawl,
  leaseFor,
  listCrawlEntries,
  newShard,
  type PlanningState,
  present,
  renewPlanning,
  type ShardRecord,
  takePlanning,
  writePlannedShards,
} from "../store/mod.ts";

/** Shard records for a fresh plan. */
export function shardsFromPlan(plan: Plan, nowMs: number): ShardRecord[] {
  return plan.shards.map((s, i) =>
    newShard({ id: i, start: s.start, end: s.end, cursor: s.start }, { expected: s.items, nowMs })
  );
}

/**
 * What planning needs: the store, the crawl's source, where its shards go, the listing cache, the
 * clock, the planner's name and its lease, and how often a transient failure is tried again.
 */
export type PlanContext = Pick<
  CrawlContext,
  | "kv"
  | "source"
  | "dispatcher"
  | "listings"
  | "clock"
  | "owner"
  | "planLeaseMs"
  | "maxPlanAttempts"
>;

/** What a call of {@linkcode planCrawl} plans with, beyond its context. */
export interface PlanInput {
  /** A baked plan (from `deno task plan --out`); planned from the source otherwise. */
  plan?: Plan;
  /** Called with the plan once made (for logs). */
  onPlanned?: (plan: Plan) => void;
}

/** A crawl record in `planning` state for a spec. */
export function planningRecord(spec: CrawlSpec, id: string, nowMs: number): CrawlRecord {
  return {
    ...spec,
    id,
    status: "planning",
    total: 0,
    planRequests: 0,
    planMethod: "",
    nextShardId: 0,
    startSeq: null,
    createdAt: nowMs,
    updatedAt: nowMs,
    finishedAt: null,
    error: null,
  };
}

/** Bounds on how many crawls a store holds, checked when a new one is created. */
export interface CrawlLimits {
  /** Crawls planning, running or paused at once; a new one beyond is a BusyError. @default Infinity */
  maxActiveCrawls?: number;
  /** Crawls stored (any state); a new one beyond is a ConflictError. @default Infinity */
  maxStoredCrawls?: number;
}

/**
 * Creates the crawl in `planning` state if it does not exist (the API answers then, and planning
 * runs behind it). Returns the stored record and whether this call created it. Asking again for a
 * crawl that exists is never refused; a new one is refused while `limits` are reached (counted
 * just before: two creations racing may pass one over).
 * @throws BusyError with `maxActiveCrawls` active, ConflictError with `maxStoredCrawls` stored.
 */
export async function createCrawl(
  kv: Deno.Kv,
  spec: CrawlSpec,
  options: { id?: string; clock: Clock } & CrawlLimits,
): Promise<{ crawl: CrawlRecord; created: boolean }> {
  const id = options.id ?? await crawlIdFor(spec);
  const existing = await getCrawl(kv, id);
  if (existing.value) return { crawl: existing.value, created: false };
  await checkLimits(kv, options);
  const mine = planningRecord(spec, id, options.clock.now());
  const entry = await createCrawlRecord(kv, mine);
  return {
    crawl: entry.value,
    created: entry.value.createdAt === mine.createdAt && entry.value.status === "planning",
  };
}

async function checkLimits(kv: Deno.Kv, limits: CrawlLimits): Promise<void> {
  const maxActive = limits.maxActiveCrawls ?? Infinity;
  const maxStored = limits.maxStoredCrawls ?? Infinity;
  if (maxActive === Infinity && maxStored === Infinity) return;
  const all = (await listCrawlEntries(kv)).map((e) => e.value.status);
  if (all.length >= maxStored) {
    throw new ConflictError(
      `${all.length} crawls are stored (at most ${maxStored}): delete finished ones first`,
    );
  }
  const active = all.filter((s) => s === "planning" || s === "running" || s === "paused").length;
  if (active >= maxActive) {
    throw new BusyError(
      `${active} crawls are planning, running or paused (at most ${maxActive}): try again when ` +
        `one has finished, or cancel one`,
    );
  }
}

/**
 * Claims the planning record of a crawl in `planning` for `owner`; null when it is not ours to plan
 * now (a live planner holds it, or it waits out a failed attempt's backoff). The crawl record as
 * read is returned when it is not in `planning` (planned already, cancelled, failed).
 */
async function claimPlanning(
  kv: Deno.Kv,
  id: string,
  o: { owner: string; leaseMs: number; nowMs: number },
): Promise<Deno.KvEntry<PlanningState> | CrawlRecord | null> {
  const crawl = (await getCrawl(kv, id)).value;
  if (!crawl) throw new NotFoundError(`no crawl with id ${id}`);
  if (crawl.status !== "planning") return crawl;
  return await takePlanning(kv, id, o);
}

/**
 * Plans a crawl in `planning` state exactly once, whoever calls it and however often: the caller
 * claims the crawl's planning record with a lease (renewed while it plans), plans (or takes the
 * baked plan), writes the shards under that claim, then moves the crawl to `running` and
 * dispatches every shard. A crawl that has a plan is never planned again; a claim held by a live
 * planner elsewhere makes this a no-op (returns null), and a planner that dies is replaced once
 * its process is seen dead or its short lease runs out. A planning error fails the crawl with its
 * reason (a transient one only after `maxPlanAttempts` tries, with backoff between them); the
 * record is returned either way.
 */
export async function planCrawl(
  deps: PlanContext,
  id: string,
  options: PlanInput = {},
): Promise<CrawlRecord | null> {
  const { clock, owner, planLeaseMs: leaseMs } = deps;
  const now = () => clock.now();
  const got = await claimPlanning(deps.kv, id, { owner, leaseMs, nowMs: now() });
  if (got === null || !("versionstamp" in got)) return got;
  let claimed = got;
  let renewing = Promise.resolve();
  const stopRenewal = clock.every(leaseMs / 4, () =>
    renewing = renewing.then(async () => {
      claimed = await renewPlanning(deps.kv, claimed, leaseFor(owner, now(), leaseMs)) ?? claimed;
    }));
  const stopRenewing = async () => (stopRenewal(), await renewing);
  const crawl = (await getCrawl(deps.kv, id)).value!;
  try {
    const planned = await makePlan(deps.source, crawl, { ...options, listings: deps.listings });
    await stopRenewing();
    return await startPlanned(deps, claimed, planned, now);
  } catch (err) {
    await stopRenewing();
    deps.listings?.drop(id);
    return await planningFailed(deps, claimed, err, { now });
  }
}

/** The plan, the start sequence and the document mode of a crawl about to start. */
async function makePlan(
  source: Source,
  crawl: CrawlRecord,
  options: PlanInput & { listings?: ListingCache },
) {
  // Everything here is asked for at once: a far registry costs one round trip of waiting, not
  // four. The start sequence is still taken before any shard lists a row. No change feed makes
  // drift catch-up unavailable, not the crawl.
  // In the feed's own numbering (its head), not the database info's, which may be stuck, cached or
  // ahead of the feed (`feed_read.ts`).
  const startSeq = feedAnchor(source).catch(() => null);
  // A view has no feed; its own sequence, taken before any shard lists a row, tells at the end
  // whether it changed meanwhile.
  const viewSeq = crawl.view
    ? source.list({ limit: 1, updateSeq: true }).then((p) => p.seq ?? null, () => null)
    : Promise.resolve(null);
  const docMode = crawl.docs
    ? (source.docMode?.() ?? Promise.resolve("get" as const)).catch(() => "get" as const)
    : Promise.resolve(null);
  // What the naive even split would have done, for the plan picture (a few rank requests); a
  // view's keys are JSON, where an even split of the text alphabet means nothing. Its answers are
  // used only if the plan finds the offsets to be ranks.
  const pieces = options.plan?.shards.length ?? crawl.shards;
  const even = pieces > 1 && !crawl.view
    ? evenSplitRanks(source, Math.min(64, pieces)).catch(() => null)
    : Promise.resolve(null);
  const cap = pageLimit(crawl, source);
  let plan: Plan;
  try {
    // A baked plan is held against what the registry lists now (the same URL may hold other data).
    if (options.plan) checkPlanTotal(options.plan.total, (await source.list({ limit: 1 })).total);
    // The planner's reads are kept for the shards (a view's rows are keyed otherwise).
    const { listings } = options;
    const reads = listings && !crawl.view
      ? listings.recording(source, crawl.id, { after: startSeq })
      : source;
    plan = options.plan ?? await planShards(reads, crawl.shards, {
      maxPage: Math.min(PLAN_PAGE, cap),
      readPage: Math.min(SEARCH_READ_PAGE, cap),
      onShardStart: listings && listAheadOf(listings, source, { crawl, docMode, after: startSeq }),
      // A view's keys are JSON: a prior of npm's names says nothing of where they fall.
      withoutRanks: crawl.view ? "listing" : "prior",
    });
    // Answers whose offsets are not ranks, or whose keys are not in code-point order, tell the
    // shards nothing they could trust (pouchdb-server drops some ids from listings without an
    // end): such a plan's reads are not kept.
    if (plan.method !== "rank" || (source.idOrder ?? "codepoint") !== "codepoint") {
      listings?.drop(crawl.id);
    }
  } catch (err) {
    // Nothing asked for here runs on after planning ends (each side request settles; none throws).
    await Promise.all([startSeq, viewSeq, docMode, even]);
    throw err;
  }
  options.onPlanned?.(plan);
  const evenAnswer = await even;
  const evenSplit = plan.method === "rank" && plan.shards.length > 1 ? evenAnswer : null;
  const idOrder = source.idOrder ?? "codepoint";
  return {
    plan,
    startSeq: await startSeq,
    viewSeq: await viewSeq,
    docMode: await docMode,
    evenSplit,
    idOrder,
  };
}

async function startPlanned(
  deps: Pick<CrawlContext, "kv" | "dispatcher">,
  claimed: Deno.KvEntry<PlanningState>,
  p: Awaited<ReturnType<typeof makePlan>>,
  now: () => number,
): Promise<CrawlRecord | null> {
  const id = crawlOfKey(claimed.key);
  const t = now();
  const shards = shardsFromPlan(p.plan, t);
  if (!await writePlannedShards(deps.kv, claimed, shards)) return null;
  // Running, in one op with the end of the claim, if the crawl is still in planning (it may have
  // been cancelled meanwhile; then its shards stay unused until it is deleted).
  const entry = await getCrawl(deps.kv, id);
  if (entry.value?.status !== "planning") return entry.value;
  const running: CrawlRecord = {
    ...entry.value,
    shards: p.plan.shards.length,
    status: "running",
    total: p.plan.total,
    planRequests: p.plan.requests,
    planMethod: p.plan.method,
    ...(p.idOrder === "codepoint" ? {} : { idOrder: p.idOrder }),
    nextShardId: p.plan.shards.length,
    startSeq: p.startSeq,
    ...(p.viewSeq !== null ? { viewSeq: p.viewSeq } : {}),
    docMode: p.docMode,
    evenSplit: p.evenSplit,
    itemLayout: ITEM_LAYOUT, // no item exists before its shards: this version writes them all
    indexed: true,
    error: null,
    startedAt: t,
    updatedAt: t,
  };
  const ended = present(entry)!;
  if (!await endPlanning(deps.kv, claimed, { crawl: ended, next: running, planning: null })) {
    return null;
  }
  for (const s of shards) await deps.dispatcher.dispatch(id, s.id);
  return running;
}

/** Records a planning failure: the crawl fails, or (transient) waits and is planned again. */
async function planningFailed(
  deps: Pick<CrawlContext, "kv" | "dispatcher" | "maxPlanAttempts">,
  claimed: Deno.KvEntry<PlanningState>,
  err: unknown,
  o: { now: () => number },
): Promise<CrawlRecord | null> {
  const id = crawlOfKey(claimed.key);
  const message = errorLine(err);
  const failures = claimed.value.failures + 1;
  // A registry that answers 4xx to a listing, or garbage, will not answer better in a minute.
  const permanent = neverRetried(err);
  const t = o.now();
  const gaveUp = permanent || failures >= deps.maxPlanAttempts;
  const { firstDelayMs: firstMs, maxDelayMs: maxMs } = PLANNING_RETRY;
  const retryAt = t + backoff({ firstMs, maxMs, growth: "double", jitter: "none" }, failures);
  const planning: PlanningState = { lease: null, failures, retryAt: gaveUp ? 0 : retryAt };
  const entry = await getCrawl(deps.kv, id);
  if (entry.value?.status !== "planning") return entry.value;
  const crawl: CrawlRecord = gaveUp
    ? {
      ...entry.value,
      status: "failed",
      error: permanent || failures === 1
        ? message
        : `${message} (planning gave up after ${failures} attempts)`,
      failedOnInput: err instanceof InputError,
      finishedAt: t,
      updatedAt: t,
    }
    : { ...entry.value, error: message, updatedAt: t };
  if (!await endPlanning(deps.kv, claimed, { crawl: present(entry)!, next: crawl, planning })) {
    return null;
  }
  if (!gaveUp) await deps.dispatcher.plan(id, { delayMs: retryAt - t });
  return crawl;
}
