/**
 * The planning record of a crawl (who plans it, its failed attempts) through its life: claimed
 * with a lease, renewed while the plan is made, the plan's shards written under the claim, and
 * ended in one op with the crawl record (running, failed, or waiting to be planned again). Every
 * write checks the claim as read: a planner that lost it writes nothing more.
 *
 * @module
 */
import { AtomicBudget, keySize, valueSizeBound } from "./kv_limits.ts";
import { crawlOfKey, keys } from "./keys.ts";
import { kvOp } from "./kv_ops.ts";
import { takeLease } from "./leases.ts";
import type { CrawlRecord, Lease, PlanningState } from "./records.ts";
import type { ShardRecord } from "./shard_record.ts";
import { listShards } from "./store.ts";

/**
 * Takes the planning lease of crawl `crawlId` for `owner`: the claimed entry, or null when a live
 * planner holds it or it waits out a failed attempt's backoff (`retryAt`).
 */
export async function takePlanning(
  kv: Deno.Kv,
  crawlId: string,
  o: { owner: string; leaseMs: number; nowMs: number },
): Promise<Deno.KvEntry<PlanningState> | null> {
  return await takeLease<PlanningState>(kv, keys.planning(crawlId), {
    ...o,
    blocked: (cur) => (cur?.retryAt ?? 0) > o.nowMs,
    record: (cur, lease) => ({ failures: 0, retryAt: 0, ...cur, lease }),
  });
}

/**
 * Renews the claim with `lease`: the new entry, or null when it was not renewed (the claim was
 * lost, or KV failed this once: the caller keeps the old entry and tries again later).
 */
export async function renewPlanning(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<PlanningState>,
  lease: Lease,
): Promise<Deno.KvEntry<PlanningState> | null> {
  const next = { ...claimed.value, lease };
  const res = await kv.atomic().check(claimed).set(claimed.key, next).commit()
    .catch(() => ({ ok: false as const }));
  return res.ok ? { ...claimed, value: next, versionstamp: res.versionstamp } : null;
}

/**
 * Writes a plan's shards while the planner still holds the crawl's planning record as `claimed`
 * (each batch checks its versionstamp), after deleting shards a crashed earlier attempt left
 * behind; batches are sized by KV's limits. Returns false as soon as the claim is lost: another
 * planner took over and nothing more is written.
 */
export async function writePlannedShards(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<PlanningState>,
  shards: ShardRecord[],
): Promise<boolean> {
  const crawlId = crawlOfKey(claimed.key);
  const keep = new Set(shards.map((s) => s.id));
  const stale = (await listShards(kv, crawlId)).map((e) => e.value.id)
    .filter((sid) => !keep.has(sid));
  const muts = [
    ...stale.flatMap((sid) => [
      { key: keys.shard(crawlId, sid), value: null },
      { key: keys.pending(crawlId, sid), value: null },
    ]),
    ...shards.flatMap((s) => [
      { key: keys.shard(crawlId, s.id), value: s },
      ...(s.done ? [] : [{ key: keys.pending(crawlId, s.id), value: 1 }]),
    ]),
  ];
  const claim = keySize(claimed.key);
  for (let i = 0; i < muts.length;) {
    const budget = new AtomicBudget().check(claim);
    const op = kv.atomic().check(claimed);
    for (const first = i; i < muts.length; i++) {
      const m = muts[i];
      const bytes = keySize(m.key);
      const size = m.value === null ? null : valueSizeBound(m.value);
      if (i > first && !budget.fitsSet(bytes, size)) break;
      if (m.value === null) (op.delete(m.key), budget.delete(bytes));
      else (op.set(m.key, m.value), budget.set(bytes, size!));
    }
    const res = await kvOp(() => op.commit());
    if (!res.ok) return false;
  }
  return true;
}

/**
 * Ends a planning attempt in one op guarded by the claim and by the crawl record as read
 * (`crawl`): the crawl becomes `next`, and the planning record is deleted (`planning: null`, the
 * crawl runs) or becomes `planning` (the attempt failed). False on a conflict: nothing written.
 */
export async function endPlanning(
  kv: Deno.Kv,
  claimed: Deno.KvEntry<PlanningState>,
  o: { crawl: Deno.KvEntry<CrawlRecord>; next: CrawlRecord; planning: PlanningState | null },
): Promise<boolean> {
  const op = kv.atomic().check(claimed).check(o.crawl).set(o.crawl.key, o.next);
  if (o.planning === null) op.delete(claimed.key);
  else op.set(claimed.key, o.planning);
  return (await kvOp(() => op.commit())).ok;
}
