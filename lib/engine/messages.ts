/**
 * Queue messages: a checked discriminated union. `listenQueue` hands handlers `any`, and a KV file
 * can hold messages from older versions or other crawls, so every message is parsed before use and
 * anything unrecognised is dropped (and reported), never trusted.
 *
 * @module
 */

/** Process the next page of one shard, if the shard's token still equals `token`. */
export interface PageMessage {
  /** Discriminant. */
  kind: "page";
  /** The crawl. */
  crawlId: string;
  /** The shard. */
  shardId: number;
  /** The shard's token when the message was sent. */
  token: number;
  /** Deliveries of this page that failed with a transient error so far. @default 0 */
  attempt?: number;
}

/** Plan a crawl whose record is in `planning` state (server mode). */
export interface PlanMessage {
  /** Discriminant. */
  kind: "plan";
  /** The crawl to plan. */
  crawlId: string;
}

/** Every message this project enqueues. */
export type Message = PageMessage | PlanMessage;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const isId = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length < 200;
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/** Returns the message if `raw` is a well-formed {@linkcode Message}, else null. */
export function parseMessage(raw: unknown): Message | null {
  if (!isRecord(raw)) return null;
  switch (raw.kind) {
    case "page":
      if (
        isId(raw.crawlId) && isCount(raw.shardId) && isCount(raw.token) &&
        (raw.attempt === undefined || isCount(raw.attempt))
      ) {
        const m: PageMessage = {
          kind: "page",
          crawlId: raw.crawlId,
          shardId: raw.shardId,
          token: raw.token,
        };
        if (raw.attempt) m.attempt = raw.attempt;
        return m;
      }
      return null;
    case "plan":
      return isId(raw.crawlId) ? { kind: "plan", crawlId: raw.crawlId } : null;
    default:
      return null;
  }
}
