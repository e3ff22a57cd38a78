/**
 * Queue messages: a checked discriminated union. `listenQueue` hands handlers `any`, and a KV file
 * can hold messages from older versions or other crawls, so every message is parsed before use and
 * anything unrecognised is dropped (and reported), never trusted.
 *
 * Messages are wake-ups, not orders: a `shard` message makes a worker try to claim the shard's
 * lease and run it; a duplicate finds the lease held and is dropped.
 *
 * @module
 */

/** Work on one shard (if nobody holds its lease). */
export interface ShardMessage {
  /** Discriminant. */
  kind: "shard";
  /** The crawl. */
  crawlId: string;
  /** The shard. */
  shardId: number;
}

/** Plan a crawl whose record is in `planning` state. */
export interface PlanMessage {
  /** Discriminant. */
  kind: "plan";
  /** The crawl to plan. */
  crawlId: string;
}

/** Every message this project enqueues. */
export type Message = ShardMessage | PlanMessage;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const isId = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length < 200;
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** Returns the message if `raw` is a well-formed {@linkcode Message}, else null. */
export function parseMessage(raw: unknown): Message | null {
  if (!isRecord(raw)) return null;
  switch (raw.kind) {
    case "shard":
      return isId(raw.crawlId) && isCount(raw.shardId)
        ? { kind: "shard", crawlId: raw.crawlId, shardId: raw.shardId }
        : null;
    case "plan":
      return isId(raw.crawlId) ? { kind: "plan", crawlId: raw.crawlId } : null;
    default:
      return null;
  }
}
