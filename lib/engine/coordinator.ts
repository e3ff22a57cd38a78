/**
 * The coordinator: start a crawl (plan once, create shards, dispatch one task per shard), resume,
 * pause, cancel, detect completion, re-dispatch stalled shards, and report status.
 *
 * The engine layer (`lib/engine/`): the store (the only module with KV key layouts), page
 * processing, dispatch by KV queue and by lease, rebalancing, catch-up, status, and the runtime
 * builder that wires them. It imports plan, sources and base; HTTP and CLI import it.
 *
 * @module
 */
import { crawlIdFor, type CrawlSpec } from "../base/spec.ts";
import { catchUp } from "./catch_up.ts";
import { ConflictError, NotFoundError, TransientError } from "../base/errors.ts";
import { type Plan, planShards } from "../plan/planner.ts";
import type { Source } from "../plan/source.ts";
import {
  type CrawlRecord,
  type CrawlStatus,
  createCrawlRecord,
  getCrawl,
  listCrawls,
  listShards,
  newShard,
  type ShardRecord,
  updateCrawl,
  writePlannedShards,
} from "./store.ts";

/** How shard work reaches workers: a queue message, or nothing (lease workers find it). */
export interface Dispatcher {
  /** Makes sure the shard's next page will be processed (duplicates are harmless). */
  dispatch(crawlId: string, shard: ShardRecord): Promise<void>;
  /** Adds the dispatch to an atomic op instead, where the mechanism allows (a queue message). */
  attach?(op: Deno.AtomicOperation, crawlId: string, shard: ShardRecord): void;
}

/** Shard records for a fresh plan. */
export function shardsFromPlan(plan: Plan, nowMs: number): ShardRecord[] {
  return plan.shards.map((s, i) =>
    newShard({ id: i, start: s.start, end: s.end, cursor: s.start }, { expected: s.items, nowMs })
  );
}

/** Options of {@linkcode startCrawl} and {@linkcode planCrawl}. */
export interface StartOptions {
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
  /** How long a planning claim holds before another process may take over, in ms. @default 600000 */
  planLeaseMs?: number;
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

/**
 * Plans a crawl in `planning` state exactly once, whoever calls it and however often: the caller
 * claims the record with a planning lease, plans (or takes the baked plan), writes the shards under
 * that claim, then moves the crawl to `running` and dispatches every shard. A crawl that has a plan
 * is never planned again; a claim held by a live planner elsewhere makes this a no-op (returns
 * null), and a planner that dies mid-way is replaced once its lease expires.
 */
export async function planCrawl(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  id: string,
  options: StartOptions = {},
): Promise<CrawlRecord | null> {
  const now = options.now ?? Date.now;
  const owner = options.owner ?? crypto.randomUUID();
  for (let attempt = 0; attempt < 20; attempt++) {
    const entry = await getCrawl(deps.kv, id);
    if (!entry.value) throw new NotFoundError(`no crawl with id ${id}`);
    const cur = entry.value;
    if (cur.status !== "planning") return cur;
    const lease = cur.planLease;
    if (lease && lease.owner !== owner && lease.untilMs > now()) return null;
    const claimed = await updateCrawl(deps.kv, entry as Deno.KvEntry<CrawlRecord>, {
      ...cur,
      planLease: { owner, untilMs: now() + (options.planLeaseMs ?? 600_000) },
    });
    if (!claimed) continue;
    let startSeq: string | null = null;
    try {
      startSeq = await deps.source.updateSeq();
    } catch {
      startSeq = null; // no change feed: drift catch-up is unavailable, the crawl itself is not
    }
    const plan = options.plan ??
      await planShards(deps.source, cur.shards, { maxPage: cur.maxPage });
    options.onPlanned?.(plan);
    const t = now();
    const shards = shardsFromPlan(plan, t);
    if (!await writePlannedShards(deps.kv, claimed, shards)) return null;
    const running = await updateCrawl(deps.kv, claimed, {
      ...claimed.value,
      shards: plan.shards.length,
      status: "running",
      total: plan.total,
      planRequests: plan.requests,
      planMethod: plan.method,
      nextShardId: plan.shards.length,
      startSeq,
      planLease: null,
      updatedAt: t,
    });
    if (!running) return null;
    for (const s of shards) await deps.dispatcher.dispatch(id, s);
    return running.value;
  }
  return null;
}

/**
 * Starts a crawl: creates it and plans it here (see {@linkcode planCrawl}), or returns the existing
 * one with that id untouched.
 */
export async function startCrawl(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  spec: CrawlSpec,
  options: StartOptions = {},
): Promise<{ crawl: CrawlRecord; created: boolean }> {
  const { crawl, created } = await createCrawl(deps.kv, spec, options);
  if (crawl.status !== "planning") return { crawl, created: false };
  const planned = await planCrawl(deps, crawl.id, options);
  return { crawl: planned ?? (await getCrawl(deps.kv, crawl.id)).value!, created };
}

/** What {@linkcode openCrawl} found and did. */
export type OpenAction = "created" | "planned" | "resumed" | "already-done";

/**
 * Resume-or-create, what a repeated command needs: creates and plans the crawl of `spec` (under
 * `options.id`, else the spec's id) when it does not exist; plans it when a planner died before
 * finishing; re-dispatches every unfinished shard of a running crawl (after a kill the dispatch
 * chain may have died with the process; duplicates are dropped); resumes a paused or failed one;
 * leaves a finished one alone.
 *
 * @throws ConflictError when the stored crawl was started with another source, document base,
 * document setting or page size (or shard count, without a baked plan), or was cancelled.
 */
export async function openCrawl(
  deps: { kv: Deno.Kv; source: Source; dispatcher: Dispatcher },
  spec: CrawlSpec,
  options: StartOptions & { where?: string } = {},
): Promise<{ crawl: CrawlRecord; action: OpenAction }> {
  const id = options.id ?? await crawlIdFor(spec);
  const existing = (await getCrawl(deps.kv, id)).value;
  if (!existing) {
    const { crawl, created } = await startCrawl(deps, spec, { ...options, id });
    return { crawl, action: created ? "created" : "resumed" };
  }
  const differs =
    (["source", "docsUrl", "docs", "maxPage"] as const).find((k) => existing[k] !== spec[k]) ??
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
      return { crawl: planned ?? (await getCrawl(deps.kv, id)).value!, action: "planned" };
    }
    case "running":
      for (const e of await listShards(deps.kv, id)) {
        if (!e.value.done) await deps.dispatcher.dispatch(id, e.value);
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
  options: { now?: () => number; error?: string | null; driftError?: string } = {},
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
    const next: CrawlRecord = {
      ...cur,
      status,
      updatedAt: t,
      finishedAt: status === "done" || status === "cancelled" ? t : cur.finishedAt,
      error: options.error !== undefined ? options.error : cur.error,
      ...(options.driftError ? { driftError: options.driftError } : {}),
    };
    if (await updateCrawl(kv, entry as Deno.KvEntry<CrawlRecord>, next)) return next;
  }
  throw new ConflictError(`crawl ${id}: too many concurrent updates`);
}

/** Pauses a running crawl: workers stop at their next page; nothing is lost. */
export function pauseCrawl(kv: Deno.Kv, id: string, now?: () => number): Promise<CrawlRecord> {
  return transition(kv, id, "paused", (s) => s === "running", { now });
}

/** Cancels a crawl that has not finished; its stored items stay. */
export function cancelCrawl(kv: Deno.Kv, id: string, now?: () => number): Promise<CrawlRecord> {
  return transition(kv, id, "cancelled", (s) => s !== "done", { now });
}

/** Marks a crawl failed with a one-line reason (a fatal error); `resumeCrawl` can restart it. */
export function failCrawl(
  kv: Deno.Kv,
  id: string,
  reason: string,
  now?: () => number,
): Promise<CrawlRecord> {
  return transition(kv, id, "failed", (s) => s === "running", { now, error: reason });
}

/**
 * Resumes a paused or failed crawl (or re-dispatches a running one after a restart): every shard
 * that is not done gets a dispatch with its current token. Done crawls are returned as they are.
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
  const crawl = await transition(
    deps.kv,
    id,
    "running",
    (s) => s === "paused" || s === "failed",
    { now: options.now, error: null },
  );
  for (const e of await listShards(deps.kv, id)) {
    if (!e.value.done) await deps.dispatcher.dispatch(id, e.value);
  }
  return crawl;
}

/**
 * Marks the crawl done when every shard is done. With `openSource` and a registry that has a
 * change feed, `_changes` since the crawl's start is applied first (see `catch_up.ts`), so that the
 * crawl ends equal to the registry at catch-up time. Returns true when the crawl is done.
 */
export async function checkCompletion(
  kv: Deno.Kv,
  id: string,
  options: { now?: () => number; openSource?: (crawl: CrawlRecord) => Source } = {},
): Promise<boolean> {
  const crawl = (await getCrawl(kv, id)).value;
  if (!crawl) return false;
  if (crawl.status === "done") return true;
  if (crawl.status !== "running") return false;
  const shards = await listShards(kv, id);
  if (shards.length === 0 || shards.some((s) => !s.value.done)) return false;
  let feedError: string | undefined;
  if (options.openSource && crawl.startSeq !== null && !crawl.driftError) {
    try {
      const res = await catchUp({ kv, source: options.openSource(crawl) }, id, {
        now: options.now,
      });
      if (!res.ran) return false; // another process is catching up; it will finish the crawl
    } catch (err) {
      // Catch-up is a refinement: a registry without a usable `_changes` feed (404, garbage) still
      // gets its crawl finished, with the reason on record. A transient failure is tried again.
      if (err instanceof TransientError) throw err;
      feedError = `change feed unavailable: ${(err as Error).message.split("\n")[0]}`;
    }
  }
  await transition(kv, id, "done", (s) => s === "running", { ...options, driftError: feedError });
  return true;
}

/**
 * Re-dispatches shards of running crawls that made no progress for `stallMs` (a lost message, a
 * dead-lettered page, a dead worker), finishes crawls whose shards are all done, and applies new
 * `_changes` to finished crawls created with `follow`. Returns how many shards were re-dispatched.
 */
export async function watchdog(
  deps: { kv: Deno.Kv; dispatcher: Dispatcher; openSource?: (crawl: CrawlRecord) => Source },
  options: { stallMs?: number; now?: () => number } = {},
): Promise<number> {
  const now = (options.now ?? Date.now)();
  const stallMs = options.stallMs ?? 60_000;
  let n = 0;
  for (const crawl of await listCrawls(deps.kv)) {
    if (crawl.status === "done" && crawl.follow && deps.openSource && crawl.startSeq !== null) {
      // Followed crawls stay equal to the registry: each tick applies the changes since the last.
      await catchUp({ kv: deps.kv, source: deps.openSource(crawl) }, crawl.id, {
        now: options.now,
      }).catch(() => {}); // a failing feed is tried again on the next tick
      continue;
    }
    if (crawl.status !== "running") continue;
    const shards = await listShards(deps.kv, crawl.id);
    for (const e of shards) {
      const s = e.value;
      const leased = s.lease !== null && s.lease.untilMs > now;
      if (!s.done && !leased && now - s.updatedAt >= stallMs) {
        await deps.dispatcher.dispatch(crawl.id, s);
        n++;
      }
    }
    if (shards.length > 0 && shards.every((s) => s.value.done)) {
      await checkCompletion(deps.kv, crawl.id, { openSource: deps.openSource });
    }
  }
  return n;
}
