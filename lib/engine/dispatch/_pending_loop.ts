/**
 * A process's asker of pending documents (`crawl/pending_ask.ts`): one pass at a time per crawl
 * (a local crawl waiting for its last documents and the process's loop share it), each crawl asked
 * again when its next pending document is due. A living process runs {@linkcode PendingAsker.run}
 * (the CLI's crawl, `serve`, `deno task worker`); on Deploy the watchdog's tick gives each crawl a
 * pass instead.
 *
 * @module
 */
import { PENDING_DOCS } from "../../base/retry_policy.ts";
import { askPendingDocs, type PendingPass } from "../crawl/mod.ts";
import { type CrawlRecord, listCrawls } from "../store/mod.ts";
import type { Env } from "./env.ts";

/** What the asker needs of the engine's environment. */
export type PendingAskerEnv = Pick<
  Env,
  "kv" | "openSource" | "clock" | "maxDocBytes" | "ownerName"
>;

/** Crawls whose documents may be pending: with documents, running or done. */
function asksFor(c: CrawlRecord): boolean {
  return c.docs && (c.status === "running" || c.status === "done");
}

/**
 * Pending documents above which a crawl is looked at only when its next one is due, or every
 * `HEAVY_LOOK_MS` (a pass lists them all): below, every tick (a document just found behind, by a
 * page or the feed, is asked again a second later).
 */
const HEAVY_PENDING = 2_000;
const HEAVY_LOOK_MS = 10_000;

/** See the module comment. */
export class PendingAsker {
  #env: PendingAskerEnv;
  #passes = new Map<string, Promise<PendingPass>>();
  // This process's name in the passes' leases (one process asks a crawl's documents at a time).
  #owner: string;
  #last = new Map<string, { atMs: number; pending: number; nextMs: number | null }>();

  /** An asker over `env`; nothing is asked until a pass or {@linkcode run}. */
  constructor(env: PendingAskerEnv) {
    this.#env = env;
    this.#owner = env.ownerName("pending");
  }

  /**
   * One pass over `crawl`'s pending documents, or the pass under way for it in this process (its
   * result). @throws what the pass throws (the store failing, a source that cannot be opened)
   */
  pass(crawl: CrawlRecord): Promise<PendingPass> {
    const under = this.#passes.get(crawl.id);
    if (under) return under;
    const { kv, clock, maxDocBytes } = this.#env;
    const source = this.#env.openSource(crawl);
    const run = askPendingDocs({ kv, clock, maxDocBytes, source, owner: this.#owner }, crawl)
      .then((p) => {
        this.#last.set(crawl.id, { atMs: clock.now(), pending: p.pending, nextMs: p.nextMs });
        return p;
      })
      .finally(() => this.#passes.delete(crawl.id));
    this.#passes.set(crawl.id, run);
    return run;
  }

  /**
   * A pass for each crawl whose pending documents may be due (a pass over none costs a list of an
   * empty range and a read). A crawl's failing pass is told to `onError` and tried at the next
   * look.
   */
  async tick(options: { onError?: (crawlId: string, err: unknown) => void } = {}) {
    const now = this.#env.clock.now();
    for (const crawl of (await listCrawls(this.#env.kv)).filter(asksFor)) {
      const last = this.#last.get(crawl.id);
      const heavy = last !== undefined && last.pending > HEAVY_PENDING &&
        (last.nextMs ?? Infinity) > now && now - last.atMs < HEAVY_LOOK_MS;
      if (heavy) continue;
      await this.pass(crawl).catch((err) => options.onError?.(crawl.id, err));
    }
  }

  /** Ticks every `PENDING_DOCS.lookEveryMs` until `signal` aborts. */
  async run(
    signal: AbortSignal,
    options: { onError?: (crawlId: string, err: unknown) => void } = {},
  ): Promise<void> {
    while (!signal.aborted) {
      await this.tick(options).catch((err) => options.onError?.("*", err));
      await this.#env.clock.sleep(PENDING_DOCS.lookEveryMs, signal).catch(() => {});
    }
  }
}
