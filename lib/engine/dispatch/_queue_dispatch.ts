/**
 * Queue dispatch: KV queue messages wake workers. A `shard` message makes the listener claim the
 * shard's lease and run it to its end (so every shard of a crawl is in flight at once, as with
 * lease workers); a duplicate finds the lease held and is dropped; a shard that failed is asked for
 * again with a delay (its backoff). The queue only carries wake-ups: all state is in the shard
 * records, so a lost message costs time (the watchdog re-sends it), never data.
 *
 * Local runs only: Deno Deploy and self-hosted denokv have no queues (see `lease_dispatch.ts`), and
 * several processes on one KV file do not share queue messages.
 *
 * @module
 */
import { QUEUE_RETRY } from "../../base/retry_policy.ts";
import { StorageError } from "../../base/errors.ts";
import { Semaphore } from "../../base/pool.ts";
import type { Dispatcher } from "../crawl/mod.ts";
import { type Message, parseMessage } from "./_messages.ts";
import { deadLetterKey } from "../store/mod.ts";
import { DEFAULT_WORKERS, workPlan, workShard } from "./work.ts";
import type { Env } from "./env.ts";

/** Redelivery delays when a handler throws, in milliseconds (KV's default ends at 60 s). */
export const BACKOFF_SCHEDULE_MS: number[] = [...QUEUE_RETRY.backoffScheduleMs];

/** Dispatches by enqueueing wake-up messages on the KV queue. */
export class QueueDispatcher implements Dispatcher {
  #kv: Deno.Kv;
  /** Enqueues on `kv`'s queue. */
  constructor(kv: Deno.Kv) {
    this.#kv = kv;
  }

  /** Asks a listener to run the shard (after `delayMs`). */
  async dispatch(crawlId: string, shardId: number, o: { delayMs?: number } = {}): Promise<void> {
    const msg: Message = { kind: "shard", crawlId, shardId };
    await this.#kv.enqueue(msg, {
      delay: Math.max(0, Math.round(o.delayMs ?? 0)),
      keysIfUndelivered: [deadLetterKey(crawlId, shardId)],
      backoffSchedule: BACKOFF_SCHEDULE_MS,
    });
  }

  /** Asks a listener to plan the crawl (after `delayMs`). */
  async plan(crawlId: string, o: { delayMs?: number } = {}): Promise<void> {
    const msg: Message = { kind: "plan", crawlId };
    await this.#kv.enqueue(msg, { delay: Math.max(0, Math.round(o.delayMs ?? 0)) });
  }
}

/** Options of {@linkcode createQueueHandler}. */
export interface QueueHandlerOptions {
  /** This process's label in lease owner names. @default "queue" */
  label?: string;
  /** Called with a message of unknown shape (it is dropped). */
  onInvalid?: (raw: unknown) => void;
  /** Called when the store cannot be written: the process should stop (nothing is lost). */
  onProcessError?: (err: Error) => void;
  /** True once the process is stopping: running shards let their leases go. */
  stopping?: () => boolean;
  /** Shards this handler runs at once; later messages wait. @default DEFAULT_WORKERS (16) */
  maxShards?: number;
  /** Crawls this handler plans at once (planning is request-heavy). @default MAX_PLANNING (2) */
  maxPlanning?: number;
}

/** Crawls one process plans at once, by default. */
export const MAX_PLANNING = 2;

/**
 * The `listenQueue` handler: parses the message and plans the crawl or runs the shard, at most
 * `maxShards` shards and `maxPlanning` plans at once (KV hands messages over without a bound, so a
 * crawl of 10,000 shards would otherwise run 10,000 shards in one process). A message for a shard
 * that already waits here is dropped (the watchdog re-sends shards that wait long). Errors of a
 * run are sorted by the runner; only a KV failure escapes, for the queue's own redelivery.
 */
export function createQueueHandler(
  deps: Env,
  options: QueueHandlerOptions = {},
): (raw: unknown) => Promise<void> {
  const shardSlots = new Semaphore(options.maxShards ?? DEFAULT_WORKERS);
  const planSlots = new Semaphore(options.maxPlanning ?? MAX_PLANNING);
  const waiting = new Set<string>();
  return async (raw: unknown) => {
    // One owner per run: a duplicate message for a shard this process is running finds it held.
    const owner = deps.ownerName(options.label ?? "queue");
    const msg = parseMessage(raw);
    if (!msg) {
      options.onInvalid?.(raw);
      return;
    }
    const name = msg.kind === "plan" ? `p/${msg.crawlId}` : `s/${msg.crawlId}/${msg.shardId}`;
    if (waiting.has(name)) return;
    waiting.add(name);
    let release: (() => void) | undefined;
    try {
      release = await (msg.kind === "plan" ? planSlots : shardSlots).acquire();
      waiting.delete(name);
      if (msg.kind === "plan") await workPlan(deps, msg.crawlId, owner);
      else await workShard(deps, msg.crawlId, msg.shardId, { owner, stop: options.stopping });
    } catch (err) {
      if (err instanceof StorageError) {
        options.onProcessError?.(err);
        return; // redelivering into a full disk helps nobody; the resumed run re-sends it
      }
      throw err;
    } finally {
      waiting.delete(name);
      release?.();
    }
  };
}
