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
import { ITEM_LAYOUT } from "../items/mod.ts";
import {
  errorLine,
  FatalError,
  InputError,
  NotFoundError,
  PermanentError,
} from "../../base/errors.ts";
import { crawlIdFor, type CrawlSpec } from "../../base/spec.ts";
import { evenSplitRanks } from "../../plan/baselines.ts";
import { type Plan, PLAN_PAGE, planShards } from "../../plan/planner.ts";
import { SEARCH_READ_PAGE } from "../../plan/locate.ts";
import type { Source } from "../../plan/source.ts";
import {
  type CrawlRecord,
  createCrawlRecord,
  getCrawl,
  leaseFor,
  leaseHeld,
  newShard,
  readLiveness,
  type ShardRecord,
  updateCrawl,
  writePlannedShards,
} from "../store/mod.ts";

/** How work reaches workers: a queue message, or nothing (lease workers find it by polling). */
export interface Dispatcher {
  /** Makes sure the shard will be worked on (a wake-up; duplicates are harmless). */
  dispatch(crawlId: string, shardId: number, options?: { delayMs?: number }): Promise<void>;
  /** Makes sure a crawl in `planning` gets planned. */
  plan(crawlId: string, options?: { delayMs?: number }): Promise<void>;
}

/** Shard records for a fresh plan. */
export function shardsFromPlan(plan: Plan, nowMs: number): ShardRecord[] {
  return plan.shards.map((s, i) =>
    newShard({ id: i, start: s.start, end: s.end, cursor: s.start }, { expected: s.items, nowMs })
  );
}

/** Options of {@linkcode planCrawl} and the functions that plan through it. */
export interface PlanCrawlOptions {
  /** The crawl id. @default crawlIdFor(spec) */
  id?: string;
  /** A baked plan (from `deno task plan --out`); planned from the source otherwise. */
  plan?: Plan;
  /** Clock in epoch milliseconds. @default Date.now */
  now?: () => number;
  /** Called with the plan once made (for logs). */
  onPlanned?: (plan: Plan) => void;
  /** Who plans (for the planning lease). @default a random id */
  owner?: string;
  /** The planning lease, renewed while planning runs, in milliseconds. @default 20000 */
  planLeaseMs?: number;
  /** Planning attempts failing transiently before the crawl fails. @default 5 */
  maxPlanAttempts?: number;
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
    planLease: null,
    createdAt: nowMs,
    updatedAt: nowMs,
    finishedAt: null,
    error: null,
  };
}

/**
 * Creates the crawl in `planning` state if it does not exist (the API answers then, and planning
 * runs behind it). Returns the stored record and whether this call created it.
 */
export async function createCrawl(
  kv: Deno.Kv,
  spec: CrawlSpec,
  options: { id?: string; now?: () => number } = {},
): Promise<{ crawl: CrawlRecord; created: boolean }> {
  const id = options.id ?? await crawlIdFor(spec);
  const existing = await getCrawl(kv, id);
  if (existing.value) return { crawl: existing.value, created: false };
  const mine = planningRecord(spec, id, (options.now ?? Date.now)());
  const entry = await createCrawlRecord(kv, mine);
  return {
    crawl: entry.value,
    created: entry.value.createdAt === mine.createdAt && entry.value.status === "planning",
  };
}

/** Claims the planning lease of a crawl in `planning`; null when it is not ours to plan now. */
async function claimPlanning(
  kv: Deno.Kv,
  id: string,
  o: { owner: string; leaseMs: number; nowMs: number },
): Promise<Deno.KvEntry<CrawlRecord> | CrawlRecord | null> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const entry = await getCrawl(kv, id);
    const cur = entry.value;
    if (!cur) throw new NotFoundError(`no crawl with id ${id}`);
    if (cur.status !== "planning") return cur;
    const liveness = await readLiveness(kv, o.nowMs);
    if (leaseHeld(cur.planLease, o.nowMs, { liveness, owner: o.owner })) return null;
    if ((cur.planRetryAt ?? 0) > o.nowMs) return null;
    const claimed = await updateCrawl(kv, entry as Deno.KvEntry<CrawlRecord>, {
      ...cur,
      planLease: leaseFor(o.owner, o.nowMs, o.leaseMs),
    });
    if (claimed) return claimed;
  }
  return null;
}

/**
 * Plans a crawl in `planning` state exactly once, whoever calls it and however often: the caller
 * claims the record with a planning lease (renewed while it plans), plans (or takes the baked
 * plan), writes the shards under that claim, then moves the crawl to `running` and dispatches
 * every shard. A crawl that has a plan is never planned again; a claim held by a live planner
 * elsewhere makes this a no-op (returns null), and a planner that dies is replaced once its short
 * lease runs out. A planning error fails the crawl with its reason (a transient one only after
 * `maxPlanAttempts` tries, with backoff between them); the record is returned either way.
 */
export async function planCrawl(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  id: string,
  options: PlanCrawlOptions = {},
): Promise<CrawlRecord | null> {
  const now = options.now ?? Date.now;
  const owner = options.owner ?? crypto.randomUUID();
  const leaseMs = options.planLeaseMs ?? 20_000;
  const got = await claimPlanning(deps.kv, id, { owner, leaseMs, nowMs: now() });
  if (got === null || !("versionstamp" in got)) return got;
  let claimed = got;
  let renewing = Promise.resolve();
  const renew = setInterval(() => {
    renewing = renewing.then(async () => {
      const next = await updateCrawl(deps.kv, claimed, {
        ...claimed.value,
        planLease: leaseFor(owner, now(), leaseMs),
      }).catch(() => null);
      if (next) claimed = next;
    });
  }, leaseMs / 4);
  try {
    const planned = await makePlan(deps.source, claimed.value, options);
    clearInterval(renew);
    await renewing;
    return await startPlanned(deps, claimed, planned, now);
  } catch (err) {
    clearInterval(renew);
    await renewing;
    return await planningFailed(deps, claimed, err, { ...options, now });
  }
}

/** The plan, the start sequence and the document mode of a crawl about to start. */
async function makePlan(source: Source, crawl: CrawlRecord, options: PlanCrawlOptions) {
  // Everything here is asked for at once: a far registry costs one round trip of waiting, not
  // four. The start sequence is still taken before any shard lists a row. No change feed makes
  // drift catch-up unavailable, not the crawl.
  const startSeq = source.updateSeq().catch(() => null);
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
  const cap = Math.min(crawl.maxPage, crawl.pageCap ?? Infinity);
  const plan = options.plan ?? await planShards(source, crawl.shards, {
    maxPage: Math.min(PLAN_PAGE, cap),
    readPage: Math.min(SEARCH_READ_PAGE, cap),
  });
  options.onPlanned?.(plan);
  const evenSplit = plan.method === "rank" && plan.shards.length > 1 ? await even : null;
  return { plan, startSeq: await startSeq, docMode: await docMode, evenSplit };
}

async function startPlanned(
  deps: { kv: Deno.Kv; dispatcher: Dispatcher },
  claimed: Deno.KvEntry<CrawlRecord>,
  p: Awaited<ReturnType<typeof makePlan>>,
  now: () => number,
): Promise<CrawlRecord | null> {
  const t = now();
  const shards = shardsFromPlan(p.plan, t);
  if (!await writePlannedShards(deps.kv, claimed, shards)) return null;
  const running = await updateCrawl(deps.kv, claimed, {
    ...claimed.value,
    shards: p.plan.shards.length,
    status: "running",
    total: p.plan.total,
    planRequests: p.plan.requests,
    planMethod: p.plan.method,
    nextShardId: p.plan.shards.length,
    startSeq: p.startSeq,
    docMode: p.docMode,
    evenSplit: p.evenSplit,
    itemLayout: ITEM_LAYOUT, // no item exists before its shards: this version writes them all
    planLease: null,
    planFailures: 0,
    startedAt: t,
    updatedAt: t,
  });
  if (!running) return null;
  for (const s of shards) await deps.dispatcher.dispatch(claimed.value.id, s.id);
  return running.value;
}

/** Records a planning failure: the crawl fails, or (transient) waits and is planned again. */
async function planningFailed(
  deps: { kv: Deno.Kv; dispatcher: Dispatcher },
  claimed: Deno.KvEntry<CrawlRecord>,
  err: unknown,
  o: PlanCrawlOptions & { now: () => number },
): Promise<CrawlRecord | null> {
  const message = errorLine(err);
  const failures = (claimed.value.planFailures ?? 0) + 1;
  // A registry that answers 4xx to a listing, or garbage, will not answer better in a minute.
  const permanent = err instanceof FatalError || err instanceof InputError ||
    err instanceof NotFoundError || err instanceof PermanentError;
  const t = o.now();
  const max = o.maxPlanAttempts ?? 5;
  const next: CrawlRecord = permanent || failures >= max
    ? {
      ...claimed.value,
      status: "failed",
      error: permanent || failures === 1
        ? message
        : `${message} (planning gave up after ${failures} attempts)`,
      planLease: null,
      planFailures: failures,
      finishedAt: t,
      updatedAt: t,
    }
    : {
      ...claimed.value,
      planLease: null,
      planFailures: failures,
      planRetryAt: t + Math.min(60_000, 2_000 * 2 ** (failures - 1)),
      error: message,
      updatedAt: t,
    };
  const saved = await updateCrawl(deps.kv, claimed, next);
  if (saved && next.status === "planning") {
    await deps.dispatcher.plan(next.id, { delayMs: next.planRetryAt! - t });
  }
  return saved?.value ?? null;
}
