/**
 * A crawl's life after its creation: resume-or-create for a repeated command (`openCrawl`), the
 * moves between states (pause, resume, cancel, fail, done), deletion with everything stored, and
 * the page cap learned from the registry. Creation and planning are `planning.ts`'s.
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import { ConflictError, errorLine, NotFoundError } from "../../base/errors.ts";
import { crawlIdFor, type CrawlSpec } from "../../base/spec.ts";
import { checkSameRegistry } from "./feed/mod.ts";
import { checkDocsHere } from "./docs_check.ts";
import { createCrawl, type PlanContext, planCrawl, type PlanInput } from "./planning.ts";
import type { CrawlContext } from "./context.ts";
import {
  clearPlanning,
  commitShard,
  type CrawlRecord,
  type CrawlStatus,
  deleteCrawlData,
  getCrawl,
  keys,
  listShards,
  present,
  updateCrawl,
  updateRecord,
} from "../store/mod.ts";

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
 * document setting or page size (or shard count, without a baked plan), or was cancelled;
 * PermanentError, before a crawl with documents is made, when the first ids listed all answer 404
 * (`docs_check.ts`).
 */
export async function openCrawl(
  deps: PlanContext,
  spec: CrawlSpec,
  options: PlanInput & {
    /** The crawl id. @default crawlIdFor(spec) */
    id?: string;
    /** Where the crawl is kept, for the refusal of one started otherwise (a KV path). */
    where?: string;
  } = {},
): Promise<{ crawl: CrawlRecord; action: OpenAction }> {
  const clock = deps.clock;
  const id = options.id ?? await crawlIdFor(spec);
  // Documents that are not where the crawl would ask for them: said before a crawl is made (a
  // failed crawl left in the file would be one more to pick from; the corrected command makes it).
  if (spec.docs && !(await getCrawl(deps.kv, id)).value) {
    await checkDocsHere(deps, spec);
  }
  const { crawl: existing, created } = await createCrawl(deps.kv, spec, {
    id,
    clock,
  });
  if (created) {
    return { crawl: await planCrawl(deps, id, options) ?? existing, action: "created" };
  }
  if (existing.status === "deleting") {
    // A delete was interrupted: finish it; then this is a new crawl.
    await deleteCrawl(deps.kv, id, { clock });
    return await openCrawl(deps, spec, options);
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
  if (existing.status !== "done" && existing.startSeq !== null) {
    // A resume must not merge two databases: one that went back below what the crawl read is not
    // the one it started on.
    try {
      const current = await deps.source.updateSeq().catch(() => null);
      await checkSameRegistry(deps, existing, { current });
    } catch (err) {
      await failCrawl(deps.kv, id, { reason: (err as Error).message, clock })
        .catch(() => {});
      throw err;
    }
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
      return { crawl: await resumeCrawl(deps, id, { clock }), action: "resumed" };
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
  options: { clock: Clock; error?: string | null; patch?: Partial<CrawlRecord> },
): Promise<CrawlRecord> {
  const clock = options.clock;
  const entry = await updateRecord<CrawlRecord>(kv, keys.crawl(id), (cur) => {
    if (!cur) throw new NotFoundError(`no crawl with id ${id}`);
    if (cur.status === status) return undefined;
    if (!allowed(cur.status)) {
      throw new ConflictError(`crawl ${id} is ${cur.status}; cannot make it ${status}`);
    }
    const t = clock.now();
    const final = status === "done" || status === "cancelled" || status === "failed";
    return {
      ...cur,
      ...options.patch,
      status,
      updatedAt: t,
      finishedAt: final ? t : null,
      // Once done, a crawl listed again (a repair while following) is a copy to keep, not to fail.
      ...(status === "done" && !cur.firstDoneAt ? { firstDoneAt: t } : {}),
      error: options.error !== undefined ? options.error : cur.error,
    };
  }, { maxAttempts: 100 });
  return entry.value!;
}

/** Pauses a running crawl: workers stop at their next page; nothing is lost. */
export function pauseCrawl(
  kv: Deno.Kv,
  id: string,
  options: { clock: Clock },
): Promise<CrawlRecord> {
  return transition(kv, id, "paused", (s) => s === "running", options);
}

/** Cancels a crawl that has not finished; its stored items stay (until it is deleted). */
export function cancelCrawl(
  kv: Deno.Kv,
  id: string,
  options: { clock: Clock },
): Promise<CrawlRecord> {
  return transition(kv, id, "cancelled", (s) => s !== "done" && s !== "deleting", options);
}

/** Marks a crawl failed with a one-line `reason` (its first line); `resumeCrawl` can restart it. */
export function failCrawl(
  kv: Deno.Kv,
  id: string,
  options: { reason: string; clock: Clock },
): Promise<CrawlRecord> {
  return transition(kv, id, "failed", (s) => s === "running" || s === "planning", {
    clock: options.clock,
    error: errorLine(options.reason),
  });
}

/**
 * Resumes a paused or failed crawl: one that never got its shards is planned again; otherwise every
 * unfinished shard gets fresh attempts and a dispatch. Done crawls are returned as they are.
 * @throws ConflictError for a cancelled crawl.
 */
export async function resumeCrawl(
  deps: Pick<CrawlContext, "kv" | "dispatcher">,
  id: string,
  options: { clock: Clock },
): Promise<CrawlRecord> {
  const entry = await getCrawl(deps.kv, id);
  if (!entry.value) throw new NotFoundError(`no crawl with id ${id}`);
  if (entry.value.status === "done") return entry.value;
  const shards = await listShards(deps.kv, id);
  const allowed = (s: CrawlStatus) => s === "paused" || s === "failed";
  if (shards.length === 0) {
    const crawl = await transition(deps.kv, id, "planning", allowed, {
      clock: options.clock,
      error: null,
    });
    await clearPlanning(deps.kv, id); // fresh attempts, no backoff left over
    await deps.dispatcher.plan(id);
    return crawl;
  }
  const crawl = await transition(deps.kv, id, "running", allowed, {
    clock: options.clock,
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
 * Deletes a finished, failed or cancelled crawl and everything it stored, in bounded batches: the
 * crawl is marked `deleting` first (so that nothing reads a half-deleted crawl as a result), then
 * its keys go, the record last. A delete that was interrupted (a killed process) is finished by
 * calling this again, which the watchdog and a command that meets the crawl do. Returns the number
 * of KV keys deleted. @throws ConflictError for a crawl still planning, running or paused (cancel
 * it first); NotFoundError for an unknown one.
 */
export async function deleteCrawl(
  kv: Deno.Kv,
  id: string,
  options: { clock: Clock },
): Promise<number> {
  const deletable = (s: CrawlStatus) =>
    s === "done" || s === "failed" || s === "cancelled" || s === "deleting";
  for (let attempt = 0; attempt < 20; attempt++) {
    const entry = await getCrawl(kv, id);
    if (!entry.value) throw new NotFoundError(`no crawl with id ${id}`);
    const s = entry.value.status;
    if (!deletable(s)) {
      throw new ConflictError(`crawl ${id} is ${s}; cancel it before deleting it`);
    }
    let marked = present(entry)!;
    if (s !== "deleting") {
      const t = options.clock.now();
      const next = { ...entry.value, status: "deleting" as const, updatedAt: t };
      const done = await updateCrawl(kv, marked, next);
      if (!done) continue;
      marked = done;
    }
    const n = await deleteCrawlData(kv, marked);
    if (n !== null) return n;
  }
  throw new ConflictError(`crawl ${id}: too many concurrent updates`);
}

/** Records the registry's page cap on the crawl (the smallest seen wins). */
export async function rememberPageCap(kv: Deno.Kv, id: string, cap: number): Promise<void> {
  await updateRecord<CrawlRecord>(
    kv,
    keys.crawl(id),
    (cur) => !cur || (cur.pageCap ?? Infinity) <= cap ? undefined : { ...cur, pageCap: cap },
  );
}
