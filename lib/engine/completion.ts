/**
 * The end of a crawl: when every shard is done, `_changes` since the start is applied
 * (`catch_up.ts`), the stored count is held against the registry's, and only then is the crawl
 * `done`, with a record of how it was checked. Also the watchdog, which keeps work moving when a
 * process died: it re-dispatches shards nobody holds, finishes crawls whose shards are all done,
 * gets stuck planning going again, and follows changes of finished crawls created with `follow`.
 *
 * @module
 */
import { TransientError } from "../base/errors.ts";
import type { Source } from "../plan/source.ts";
import { catchUp } from "./catch_up.ts";
import type { Dispatcher } from "./coordinator.ts";
import { failCrawl, transition } from "./lifecycle.ts";
import { ownerIsDead } from "./owner.ts";
import {
  clearDeadLetter,
  type CrawlRecord,
  getCrawl,
  listCrawls,
  listDeadLetters,
  listShards,
  type ShardRecord,
  type Verification,
} from "./store.ts";

/** Items stored: shard counters plus drift inserts minus deletions (exact by construction). */
export function storedCount(crawl: CrawlRecord, shards: readonly ShardRecord[]): number {
  const d = crawl.drift;
  return shards.reduce((n, s) => n + s.items, 0) + (d ? d.inserted - d.deleted : 0);
}

/**
 * Holds the stored count against the registry's `total_rows`. Equal: `exact` (or `drift` when
 * changes were applied). Different while the registry has not moved since the last change applied:
 * a {@linkcode TransientError}-free failure string (the caller fails the crawl). Different while it
 * moved: `unverified`, saying why.
 */
export async function finalCheck(
  source: Source,
  crawl: CrawlRecord,
  shards: readonly ShardRecord[],
): Promise<Verification | { failed: string }> {
  const stored = storedCount(crawl, shards);
  const [page, seq] = await Promise.all([
    source.list({ limit: 1 }),
    source.updateSeq().catch(() => null),
  ]);
  const lastApplied = crawl.drift?.seq ?? crawl.startSeq;
  const quiet = seq !== null && seq === lastApplied;
  const drifted = (crawl.drift?.inserted ?? 0) + (crawl.drift?.updated ?? 0) +
          (crawl.drift?.deleted ?? 0) > 0 || shards.some((s) => s.verified === "drift");
  const detail = `${stored} items stored, the registry lists ${page.total}`;
  if (stored === page.total) {
    return { status: drifted ? "drift" : "exact", detail: `${detail} (seq ${seq ?? "n/a"})` };
  }
  if (quiet) return { failed: `${detail} and has not changed since (seq ${seq})` };
  return {
    status: "unverified",
    detail: `${detail}; the registry changed meanwhile${seq === null ? " (no change feed)" : ""}`,
  };
}

/**
 * Marks the crawl done when every shard is done: changes since the start are applied first (with
 * `openSource` and a registry that has a change feed), then the final count check. Returns true
 * when the crawl is done. A registry without a usable `_changes` feed still gets its crawl
 * finished, with the reason on record; a count that disagrees with a registry that stood still
 * fails the crawl.
 */
export async function checkCompletion(
  kv: Deno.Kv,
  id: string,
  options: { now?: () => number; openSource?: (crawl: CrawlRecord) => Source } = {},
): Promise<boolean> {
  let crawl = (await getCrawl(kv, id)).value;
  if (!crawl) return false;
  if (crawl.status === "done") return true;
  if (crawl.status !== "running") return false;
  const shards = (await listShards(kv, id)).map((e) => e.value);
  if (shards.length === 0 || shards.some((s) => !s.done)) return false;
  let driftError: string | undefined;
  let verification: Verification | undefined;
  if (options.openSource) {
    const source = options.openSource(crawl);
    if (crawl.startSeq !== null && !crawl.driftError) {
      try {
        const res = await catchUp({ kv, source }, id, { now: options.now });
        if (!res.ran) return false; // another process is catching up; it will finish the crawl
      } catch (err) {
        // Catch-up is a refinement: a registry without a usable `_changes` feed (404, garbage)
        // still gets its crawl finished. A transient failure is tried again.
        if (err instanceof TransientError) throw err;
        driftError = `change feed unavailable: ${(err as Error).message.split("\n")[0]}`;
      }
      crawl = (await getCrawl(kv, id)).value!;
    }
    const check = await finalCheck(source, crawl, shards);
    if ("failed" in check) {
      await failCrawl(kv, id, `completeness check failed: ${check.failed}`, options.now);
      return false;
    }
    verification = check;
  }
  await transition(kv, id, "done", (s) => s === "running", {
    now: options.now,
    patch: { ...(driftError ? { driftError } : {}), ...(verification ? { verification } : {}) },
  });
  return true;
}

/**
 * Keeps work moving (see the module comment). Returns how many shards were re-dispatched. A shard
 * held by a live lease, or waiting out its retry backoff, is never re-dispatched.
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
    if (crawl.status === "planning") {
      const lease = crawl.planLease;
      if (!lease || lease.untilMs <= now) await deps.dispatcher.plan(crawl.id);
      continue;
    }
    if (crawl.status !== "running") continue;
    n += await reviveShards(deps, crawl.id, { now, stallMs });
  }
  return n;
}

async function reviveShards(
  deps: { kv: Deno.Kv; dispatcher: Dispatcher; openSource?: (crawl: CrawlRecord) => Source },
  crawlId: string,
  o: { now: number; stallMs: number },
): Promise<number> {
  const shards = await listShards(deps.kv, crawlId);
  const dead = new Set(await listDeadLetters(deps.kv, crawlId));
  let n = 0;
  for (const { value: s } of shards) {
    const held = s.lease !== null && s.lease.untilMs > o.now && !ownerIsDead(s.lease.owner);
    const waiting = (s.retryAt ?? 0) > o.now;
    const stalled = o.now - s.updatedAt >= o.stallMs || dead.has(s.id) || s.lease !== null;
    if (!s.done && !held && !waiting && stalled) {
      await deps.dispatcher.dispatch(crawlId, s.id);
      if (dead.has(s.id)) await clearDeadLetter(deps.kv, crawlId, s.id);
      n++;
    }
  }
  if (shards.length > 0 && shards.every((s) => s.value.done)) {
    await checkCompletion(deps.kv, crawlId, { openSource: deps.openSource, now: () => o.now });
  }
  return n;
}
