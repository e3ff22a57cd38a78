/**
 * Changes applied in each shard's range since it was listed (`["rdrift", crawlId, shardId, dir]`,
 * summed in the same op as the change): what a shard's range holds in the store is its listing
 * plus these, exactly.
 *
 * @module
 */
import { keys } from "./keys.ts";
import { kvOp } from "./kv_ops.ts";
import type { ShardRecord } from "./shard_record.ts";

/** Items added and removed by applied changes in one shard's range since it was listed. */
export interface RangeDrift {
  /** Items added (absent before the change). */
  in: number;
  /** Items removed (present before the change). */
  out: number;
}

/** The applied changes per shard range of a crawl (shards without any are absent). */
export async function listRangeDrift(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Map<number, RangeDrift>> {
  return await kvOp(async () => {
    const out = new Map<number, RangeDrift>();
    for await (const e of kv.list<Deno.KvU64>({ prefix: keys.rangeDrifts(crawlId) })) {
      const shard = e.key[2] as number;
      const d = out.get(shard) ?? { in: 0, out: 0 };
      d[e.key[3] as "in" | "out"] = Number(e.value.value);
      out.set(shard, d);
    }
    return out;
  });
}

/**
 * Items a shard's range holds in the store: what its listing committed plus the changes applied
 * there since (exact by construction: each change is counted by whether its item was present).
 */
export function shardStored(shard: ShardRecord, drift: ReadonlyMap<number, RangeDrift>): number {
  const d = drift.get(shard.id);
  return shard.items + (d ? d.in - d.out : 0);
}

/** Items stored: every shard's listed items plus the changes applied in its range. */
export async function storedCount(
  kv: Deno.Kv,
  crawlId: string,
  shards: readonly ShardRecord[],
): Promise<number> {
  const drift = await listRangeDrift(kv, crawlId);
  return shards.reduce((n, s) => n + shardStored(s, drift), 0);
}
