/**
 * `GET /events`: server-sent events for the status page. One feed per server computes what
 * changed once per tick, for every listener together: the status of each crawl that may have
 * changed (every active crawl; a finished one only when its record changed) is compared with what
 * was sent, and only changes go out (`event: crawl`, the status report as JSON); crawls that
 * vanished are announced (`event: gone`). A new listener first gets every crawl as it stands. The
 * feed works only while someone listens, and at most `maxListeners` streams are open at once (a
 * 503 with a JSON reason beyond). The page reads the stream with `fetch` (so the bearer token stays
 * in a header), and falls back to polling when the stream breaks.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { crawlStatus, listCrawlVersions } from "../engine/mod.ts";

/** Event streams one server keeps open at once, by default. */
export const MAX_EVENT_STREAMS = 200;

/** One server-sent event. */
export interface FeedEvent {
  /** `crawl` or `gone`. */
  event: string;
  /** JSON. */
  data: string;
}

/** The shared feed behind `/events` (see the module comment). */
export class StatusFeed {
  #kv: Deno.Kv;
  #clock: Clock;
  #everyMs: number;
  #max: number;
  #listeners = new Set<(events: FeedEvent[]) => void>();
  #enders = new Set<() => void>();
  #closed = false;
  /** Per crawl: the record's versionstamp and the status text last sent. */
  #sent = new Map<string, { versionstamp: string; text: string }>();
  #joining = 0;
  #stopTicks: (() => void) | undefined;
  #ticking: Promise<void> = Promise.resolve();
  #busy = false;

  /**
   * A feed over `kv`, looking every `everyMs` of `clock` (@default the system's, reading `now`),
   * for at most `maxListeners` listeners.
   */
  constructor(
    kv: Deno.Kv,
    options: { clock?: Clock; everyMs?: number; maxListeners?: number } = {},
  ) {
    this.#kv = kv;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#everyMs = options.everyMs ?? 1000;
    this.#max = options.maxListeners ?? MAX_EVENT_STREAMS;
  }

  /** Listeners now (joined, or joining). */
  get listeners(): number {
    return this.#listeners.size + this.#joining;
  }

  /** True once {@linkcode StatusFeed.close} was called: streams end, and no new one starts. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Ends every stream (a server stopping must not wait for readers who never leave: a status
   * page keeps its stream open for as long as it is shown) and stops looking.
   */
  close(): void {
    this.#closed = true;
    this.#stop();
    for (const end of [...this.#enders]) end();
  }

  /** Listeners at most. */
  get maxListeners(): number {
    return this.#max;
  }

  /**
   * Adds a listener: resolves with every crawl as it stands (the first tick is made if none was)
   * and the function that removes it; null when the feed has its `maxListeners` already or is
   * closed. `onEnd` is called when the feed closes.
   */
  async subscribe(
    send: (events: FeedEvent[]) => void,
    onEnd: () => void = () => {},
  ): Promise<{ snapshot: FeedEvent[]; unsubscribe: () => void } | null> {
    if (this.#closed || this.#listeners.size + this.#joining >= this.#max) return null;
    this.#joining++;
    try {
      if (this.#stopTicks === undefined) {
        this.#ticking = this.#tick();
        this.#stopTicks = this.#clock.every(this.#everyMs, () => this.#next());
      }
      await this.#ticking;
    } finally {
      this.#joining--;
    }
    // Snapshot and joining in one synchronous step: the next tick sends this listener only what
    // changed after the snapshot.
    const snapshot = [...this.#sent.values()].map((s) => ({ event: "crawl", data: s.text }));
    this.#listeners.add(send);
    this.#enders.add(onEnd);
    return {
      snapshot,
      unsubscribe: () => {
        this.#listeners.delete(send);
        this.#enders.delete(onEnd);
        if (this.#listeners.size + this.#joining === 0) this.#stop();
      },
    };
  }

  /** The tick due now, unless one is still looking (a slow look is not queued behind). */
  #next(): Promise<void> | undefined {
    if (this.#busy) return;
    this.#busy = true;
    this.#ticking = this.#ticking.then(() => this.#tick()).catch(() => {})
      .finally(() => this.#busy = false);
    return this.#ticking;
  }

  #stop(): void {
    this.#stopTicks?.();
    this.#stopTicks = undefined;
  }

  /** One look at every crawl: what changed is sent to every listener. */
  async #tick(): Promise<void> {
    const events: FeedEvent[] = [];
    const seen = new Set<string>();
    for (const v of await listCrawlVersions(this.#kv)) {
      seen.add(v.id);
      const last = this.#sent.get(v.id);
      const active = v.status === "planning" || v.status === "running" || v.status === "paused";
      if (last && !active && last.versionstamp === v.versionstamp) continue;
      const report = await crawlStatus(this.#kv, v.id, { clock: this.#clock }).catch(() => null);
      if (!report) continue;
      const text = JSON.stringify(report);
      this.#sent.set(v.id, { versionstamp: v.versionstamp, text });
      if (last?.text !== text) events.push({ event: "crawl", data: text });
    }
    for (const gone of [...this.#sent.keys()].filter((k) => !seen.has(k))) {
      this.#sent.delete(gone);
      events.push({ event: "gone", data: JSON.stringify({ id: gone }) });
    }
    if (events.length > 0) { for (const send of this.#listeners) send(events); }
  }
}

/** Adds `GET /events` to `app`, fed by `feed`. */
export function addEventRoutes(app: Hono, feed: StatusFeed): void {
  app.get("/events", async (c) => {
    let wake: () => void = () => {};
    const queue: FeedEvent[] = [];
    const sub = await feed.subscribe((events) => (queue.push(...events), wake()), () => wake());
    if (!sub && feed.closed) return c.json({ error: "the server is stopping" }, 503);
    if (!sub) {
      return c.json({
        error: `too many event streams are open (at most ${feed.maxListeners}); poll ` +
          `GET /crawls instead, or try again later`,
      }, 503);
    }
    queue.push(...sub.snapshot);
    return streamSSE(c, async (stream) => {
      stream.onAbort(() => (sub.unsubscribe(), wake()));
      let id = 0;
      try {
        while (!stream.aborted && !stream.closed && !feed.closed) {
          for (const e of queue.splice(0)) {
            await stream.writeSSE({ ...e, id: String(id++) });
          }
          await new Promise<void>((r) => {
            wake = r;
            if (queue.length > 0 || stream.aborted || feed.closed) r();
          });
        }
      } finally {
        sub.unsubscribe();
      }
    });
  });
}
