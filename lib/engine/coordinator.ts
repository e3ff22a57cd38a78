/**
 * The coordinator: creates crawls, plans each exactly once, moves them through their states
 * (planning → running → done; paused, failed, cancelled), resumes, deletes, and hands shard work to
 * the dispatcher. Completion, the final check and the watchdog live in `completion.ts`.
 *
 * Every failure ends in a state that says so: a crawl that cannot be planned (not a CouchDB
 * database, more shards than items, a registry that stays unreachable) becomes `failed` with a
 * one-line reason, never stays `planning`; resuming a failed crawl plans it again or resumes its
 * shards.
 *
 * The engine layer (`lib/engine/`): the store (the only module with KV key layouts), page
 * processing, the shard runner, dispatch by KV queue and by lease, rebalancing, catch-up, status,
 * and the runtime builder that wires them. It imports plan, sources and base; HTTP and CLI import
 * it.
 *
 * @module
 */
import {
  ConflictError,
  FatalError,
  InputError,
  NotFoundError,
  PermanentError,
} from "../base/errors.ts";
import { crawlIdFor, type CrawlSpec } from "../base/spec.ts";
import { evenSplitRanks } from "../plan/baselines.ts";
import { type Plan, PLAN_PAGE, planShards } from "../plan/planner.ts";
import type { Source } from "../plan/source.ts";
import {
  type CrawlRecord,
  type CrawlStatus,
  createCrawlRecord,
  deleteCrawlData,
  getCrawl,
  listShards,
  newShard,
  type ShardRecord,
  updateCrawl,
  writePlannedShards,
} from "./store.ts";
import { commitShard } from "./store.ts";
import { ownerIsDead } from "./owner.ts";

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
    const lease = cur.planLease;
    const live = lease && lease.untilMs > o.nowMs && !ownerIsDead(lease.owner);
    if (lease && lease.owner !== o.owner && live) return null;
    if ((cur.planRetryAt ?? 0) > o.nowMs) return null;
    const claimed = await updateCrawl(kv, entry as Deno.KvEntry<CrawlRecord>, {
      ...cur,
      planLease: { owner: o.owner, untilMs: o.nowMs + o.leaseMs },
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
        planLease: { owner, untilMs: now() + leaseMs },
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
  // No change feed makes drift catch-up unavailable, not the crawl.
  const startSeq = await source.updateSeq().catch(() => null);
  const docMode = crawl.docs ? await source.docMode?.().catch(() => "get" as const) ?? "get" : null;
  const plan = options.plan ?? await planShards(source, crawl.shards, {
    maxPage: Math.min(PLAN_PAGE, crawl.maxPage, crawl.pageCap ?? Infinity),
  });
  options.onPlanned?.(plan);
  // What the naive even split would have done, for the plan picture (a few rank requests); a
  // view's keys are JSON, where an even split of the text alphabet means nothing.
  const evenSplit = plan.method === "rank" && plan.shards.length > 1 && !crawl.view
    ? await evenSplitRanks(source, Math.min(64, plan.shards.length)).catch(() => null)
    : null;
  return { plan, startSeq, docMode, evenSplit };
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
  const message = (err instanceof Error ? err.message : String(err)).split("\n")[0];
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
      error: permanent ? message : `${message} (planning gave up after ${failures} attempts)`,
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

/** What {@linkcode openCrawl} found and did. */
export type OpenAction = "created" | "planned" | "resumed" | "joined" | "already-done";

/**
 * Resume-or-create, what a repeated command needs: creates and plans the crawl of `spec` (under
 * `options.id`, else the spec's id) when it does not exist; plans it when a planner died before
 * finishing (or joins, when another live process is planning it); re-dispatches every unfinished
 * shard of a running crawl (after a kill; duplicates are dropped); resumes a paused or failed one;
 * leaves a finished one alone.
 *
 * @throws ConflictError when the stored crawl was started with another source, document base,
 * document setting or page size (or shard count, without a baked plan), or was cancelled.
 */
export async function openCrawl(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  spec: CrawlSpec,
  options: PlanCrawlOptions & { where?: string } = {},
): Promise<{ crawl: CrawlRecord; action: OpenAction }> {
  const id = options.id ?? await crawlIdFor(spec);
  const { crawl: existing, created } = await createCrawl(deps.kv, spec, { id, now: options.now });
  if (created) {
    return { crawl: await planCrawl(deps, id, options) ?? existing, action: "created" };
  }
  const differs =
    (["source", "docsUrl", "docs", "maxPage", "view"] as const).find((k) =>
      existing[k] !== spec[k]
    ) ??
      (!options.plan && existing.shards !== spec.shards && existing.status !== "planning"
        ? "shards"
        : undefined);
  if (differs) {
    throw new ConflictError(
      `crawl ${id}${options.where ? ` in ${options.where}` : ""} was started with another ` +
        `${differs}; use another --crawl-id or --kv`,
    );
  }
  switch (existing.status) {
    case "cancelled":
      throw new ConflictError(`crawl ${id} was cancelled`);
    case "done":
      return { crawl: existing, action: "already-done" };
    case "planning": {
      const planned = await planCrawl(deps, id, options);
      return planned
        ? { crawl: planned, action: "planned" }
        : { crawl: (await getCrawl(deps.kv, id)).value!, action: "joined" };
    }
    case "running":
      for (const e of await listShards(deps.kv, id)) {
        if (!e.value.done) await deps.dispatcher.dispatch(id, e.value.id);
      }
      return { crawl: existing, action: "resumed" };
    default:
      return { crawl: await resumeCrawl(deps, id, options), action: "resumed" };
  }
}

/**
 * Moves a crawl to `status` when `allowed(current)` says so, retrying on conflicts.
 * @throws NotFoundError for an unknown crawl; ConflictError when the move is not allowed.
 */
export async function transition(
  kv: Deno.Kv,
  id: string,
  status: CrawlStatus,
  allowed: (current: CrawlStatus) => boolean,
  options: { now?: () => number; error?: string | null; patch?: Partial<CrawlRecord> } = {},
): Promise<CrawlRecord> {
  const now = options.now ?? Date.now;
  for (let i = 0; i < 100; i++) {
    const entry = await getCrawl(kv, id);
    if (!entry.value) throw new NotFoundError(`no crawl with id ${id}`);
    const cur = entry.value;
    if (cur.status === status) return cur;
    if (!allowed(cur.status)) {
      throw new ConflictError(`crawl ${id} is ${cur.status}; cannot make it ${status}`);
    }
    const t = now();
    const final = status === "done" || status === "cancelled" || status === "failed";
    const next: CrawlRecord = {
      ...cur,
      ...options.patch,
      status,
      updatedAt: t,
      finishedAt: final ? t : null,
      error: options.error !== undefined ? options.error : cur.error,
    };
    if (await updateCrawl(kv, entry as Deno.KvEntry<CrawlRecord>, next)) return next;
  }
  throw new ConflictError(`crawl ${id}: too many concurrent updates`);
}

/** Pauses a running crawl: workers stop at their next page; nothing is lost. */
export function pauseCrawl(kv: Deno.Kv, id: string, now?: () => number): Promise<CrawlRecord> {
  return transition(kv, id, "paused", (s) => s === "running", { now });
}

/** Cancels a crawl that has not finished; its stored items stay (until it is deleted). */
export function cancelCrawl(kv: Deno.Kv, id: string, now?: () => number): Promise<CrawlRecord> {
  return transition(kv, id, "cancelled", (s) => s !== "done", { now });
}

/** Marks a crawl failed with a one-line reason; `resumeCrawl` can restart it. */
export function failCrawl(
  kv: Deno.Kv,
  id: string,
  reason: string,
  now?: () => number,
): Promise<CrawlRecord> {
  return transition(kv, id, "failed", (s) => s === "running" || s === "planning", {
    now,
    error: reason.split("\n")[0],
    patch: { planLease: null },
  });
}

/**
 * Resumes a paused or failed crawl: one that never got its shards is planned again; otherwise every
 * unfinished shard gets fresh attempts and a dispatch. Done crawls are returned as they are.
 * @throws ConflictError for a cancelled crawl.
 */
export async function resumeCrawl(
  deps: { kv: Deno.Kv; dispatcher: Dispatcher },
  id: string,
  options: { now?: () => number } = {},
): Promise<CrawlRecord> {
  const entry = await getCrawl(deps.kv, id);
  if (!entry.value) throw new NotFoundError(`no crawl with id ${id}`);
  if (entry.value.status === "done") return entry.value;
  const shards = await listShards(deps.kv, id);
  const allowed = (s: CrawlStatus) => s === "paused" || s === "failed";
  if (shards.length === 0) {
    const crawl = await transition(deps.kv, id, "planning", allowed, {
      now: options.now,
      error: null,
      patch: { planFailures: 0, planRetryAt: 0, planLease: null },
    });
    await deps.dispatcher.plan(id);
    return crawl;
  }
  const crawl = await transition(deps.kv, id, "running", allowed, {
    now: options.now,
    error: null,
  });
  for (const e of shards) {
    if (e.value.done) continue;
    const fresh = { ...e.value, failures: 0, retryAt: 0 };
    await commitShard(deps.kv, id, e, fresh);
    await deps.dispatcher.dispatch(id, e.value.id);
  }
  return crawl;
}

/**
 * Deletes a finished, failed or cancelled crawl and everything it stored, in bounded batches.
 * Returns the number of KV keys deleted. @throws ConflictError for a crawl still planning, running
 * or paused (cancel it first); NotFoundError for an unknown one.
 */
export async function deleteCrawl(kv: Deno.Kv, id: string): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const entry = await getCrawl(kv, id);
    if (!entry.value) throw new NotFoundError(`no crawl with id ${id}`);
    const s = entry.value.status;
    if (s === "planning" || s === "running" || s === "paused") {
      throw new ConflictError(`crawl ${id} is ${s}; cancel it before deleting it`);
    }
    const n = await deleteCrawlData(kv, entry as Deno.KvEntry<CrawlRecord>);
    if (n !== null) return n;
  }
  throw new ConflictError(`crawl ${id}: too many concurrent updates`);
}

/** Records the registry's page cap on the crawl (the smallest seen wins). */
export async function rememberPageCap(kv: Deno.Kv, id: string, cap: number): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const entry = await getCrawl(kv, id);
    const cur = entry.value;
    if (!cur || (cur.pageCap ?? Infinity) <= cap) return;
    const next = { ...cur, pageCap: cap, updatedAt: Date.now() };
    if (await updateCrawl(kv, entry as Deno.KvEntry<CrawlRecord>, next)) return;
  }
}
