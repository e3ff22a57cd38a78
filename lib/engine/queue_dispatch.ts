/**
 * Queue dispatch: one KV queue message per shard page. The next page's message is enqueued in the
 * same atomic op that commits the current page, so a shard's chain of messages can neither fork nor
 * break. Messages that exhaust their deliveries land under the store's dead-letter keys.
 *
 * Local runs only: Deno Deploy and self-hosted denokv have no queues (see `lease_dispatch.ts`), and
 * several processes on one KV file do not share queue messages.
 *
 * @module
 */
import { checkCompletion, type Dispatcher, failCrawl } from "./coordinator.ts";
import { FatalError } from "../base/errors.ts";
import { type Message, type PageMessage, parseMessage, type PlanMessage } from "./messages.ts";
import { deadLetterKey, recordDeadLetter, type ShardRecord } from "./store.ts";
import { type PageOutcome, processPage, type WorkerDeps } from "./page.ts";

/** Redelivery delays when a handler crashes, in milliseconds (KV's default ends at 60 s). */
export const BACKOFF_SCHEDULE_MS = [500, 1_000, 2_000, 5_000, 10_000];

/** Delays before re-sending a page that failed with a transient error, in milliseconds. */
export const RETRY_DELAYS_MS = [1_000, 2_000, 5_000, 10_000, 20_000, 30_000];

/** The page message for a shard's current token. */
export function pageMessage(crawlId: string, shard: ShardRecord): PageMessage {
  return { kind: "page", crawlId, shardId: shard.id, token: shard.token };
}

function enqueueOptions(msg: PageMessage, delayMs = 0) {
  return {
    delay: delayMs,
    keysIfUndelivered: [deadLetterKey(msg)],
    backoffSchedule: BACKOFF_SCHEDULE_MS,
  };
}

/** Asks the queue's listener to plan a crawl created in `planning` state. */
export async function enqueuePlan(kv: Deno.Kv, crawlId: string): Promise<void> {
  const msg: PlanMessage = { kind: "plan", crawlId };
  await kv.enqueue(msg);
}

/** Adds the shard's page message to an atomic op, so it is sent only if the op commits. */
export function attachPage(op: Deno.AtomicOperation, crawlId: string, shard: ShardRecord): void {
  const msg = pageMessage(crawlId, shard);
  op.enqueue(msg, enqueueOptions(msg));
}

/** Dispatches by enqueueing page messages on the KV queue. */
export class QueueDispatcher implements Dispatcher {
  #kv: Deno.Kv;
  /** Enqueues on `kv`'s queue. */
  constructor(kv: Deno.Kv) {
    this.#kv = kv;
  }

  async dispatch(crawlId: string, shard: ShardRecord): Promise<void> {
    const msg = pageMessage(crawlId, shard);
    await this.#kv.enqueue(msg, enqueueOptions(msg));
  }

  attach(op: Deno.AtomicOperation, crawlId: string, shard: ShardRecord): void {
    attachPage(op, crawlId, shard);
  }
}

/** Events a queue handler reports (for progress, logs and tests). */
export type QueueEvent =
  | { kind: "page"; outcome: PageOutcome; message: Message }
  | { kind: "retry"; message: PageMessage; error: Error; delayMs: number }
  | { kind: "dead-letter"; message: PageMessage; error: Error }
  | { kind: "invalid-message"; raw: unknown }
  | { kind: "fatal"; crawlId: string; error: Error }
  | { kind: "crawl-done"; crawlId: string };

/** Options of {@linkcode createQueueHandler}. */
export interface QueueHandlerOptions {
  /** Receives each page outcome, retry, dead letter and fatal error. */
  onEvent?: (e: QueueEvent) => void;
  /** Called after a shard finishes (rebalancing hooks in here). */
  onShardDone?: (crawlId: string, shard: ShardRecord) => Promise<void>;
  /** Handles `plan` messages (server mode). */
  onPlan?: (crawlId: string) => Promise<void>;
}

/**
 * The `listenQueue` handler: parses the message, processes one page and chains the next message
 * in the same commit. A fatal error (a source answering garbage) fails the crawl instead of being
 * retried forever. Any other error re-sends the same page later (with backoff and jitter, up to
 * {@linkcode RETRY_DELAYS_MS}), then records a dead letter that status shows and the watchdog
 * revives. Only an error while doing that is thrown, for the queue's own redelivery.
 */
export function createQueueHandler(
  deps: WorkerDeps,
  options: QueueHandlerOptions = {},
): (raw: unknown) => Promise<void> {
  return async (raw: unknown) => {
    const msg = parseMessage(raw);
    if (!msg) {
      options.onEvent?.({ kind: "invalid-message", raw });
      return;
    }
    try {
      if (msg.kind === "plan") {
        await options.onPlan?.(msg.crawlId);
        return;
      }
      const outcome = await processPage(deps, msg, (op, next) => {
        if (!next.done) attachPage(op, msg.crawlId, next);
      });
      options.onEvent?.({ kind: "page", outcome, message: msg });
      if (outcome.kind === "committed" && outcome.shard.done) {
        await options.onShardDone?.(msg.crawlId, outcome.shard);
        const done = await checkCompletion(deps.kv, msg.crawlId, {
          now: deps.now,
          openSource: deps.openSource,
        });
        if (done) {
          options.onEvent?.({ kind: "crawl-done", crawlId: msg.crawlId });
        }
      }
    } catch (err) {
      if (err instanceof FatalError) {
        await failCrawl(deps.kv, msg.crawlId, err.message, deps.now).catch(() => {});
        options.onEvent?.({ kind: "fatal", crawlId: msg.crawlId, error: err });
        return;
      }
      if (msg.kind !== "page") throw err;
      const error = err instanceof Error ? err : new Error(String(err));
      const attempt = msg.attempt ?? 0;
      if (attempt < RETRY_DELAYS_MS.length) {
        const delayMs = Math.round(RETRY_DELAYS_MS[attempt] * (0.5 + Math.random()));
        const again: PageMessage = { ...msg, attempt: attempt + 1 };
        await deps.kv.enqueue(again, enqueueOptions(again, delayMs));
        options.onEvent?.({ kind: "retry", message: msg, error, delayMs });
      } else {
        await recordDeadLetter(deps.kv, msg, error.message, (deps.now ?? Date.now)());
        options.onEvent?.({ kind: "dead-letter", message: msg, error });
      }
    }
  };
}
