/**
 * A process's sinks kept fed (`sinks/`): every `pollMs`, the notes of each crawl that has sinks are
 * delivered to them, a crawl at a time; a sink that fails is told to `onError` once per failure in
 * a row and tried again at the next look (its position stays where its last applied note left it,
 * so nothing is lost or applied twice in effect). It never holds a crawl: the crawl's commits only
 * write notes.
 *
 * @module
 */
import type { Env } from "./env.ts";
import { errorLine } from "../../base/errors.ts";
import { deliver, type Sink } from "../sinks/mod.ts";
import { type CrawlRecord, listCrawls } from "../store/mod.ts";

/** How often a sink loop looks for notes not yet delivered, in milliseconds. @default */
export const SINK_POLL_MS = 1_000;

/** Options of {@linkcode sinkLoop}. */
export interface SinkLoopOptions {
  /** The sinks a crawl is kept in (none: it is skipped). */
  sinksFor: (crawl: CrawlRecord) => readonly Sink[];
  /** Pause between looks, in milliseconds. @default SINK_POLL_MS */
  pollMs?: number;
  /** Told when a sink fails (then once more only after it succeeded in between). */
  onError?: (crawlId: string, sink: string, reason: string) => void;
}

/** Delivers every crawl's notes to its sinks until `signal` aborts (see the module comment). */
export async function sinkLoop(
  ctx: Pick<Env, "kv" | "clock">,
  signal: AbortSignal,
  o: SinkLoopOptions,
): Promise<void> {
  const failing = new Set<string>();
  while (!signal.aborted) {
    let more = false;
    try {
      for (const crawl of await listCrawls(ctx.kv)) {
        if (crawl.status === "deleting" || signal.aborted) continue;
        for (const sink of o.sinksFor(crawl)) {
          const key = `${crawl.id}\0${sink.name}`;
          try {
            const done = await deliver(ctx, crawl.id, sink);
            more ||= done.behind > 0;
            failing.delete(key);
          } catch (err) {
            if (!failing.has(key)) o.onError?.(crawl.id, sink.name, errorLine(err));
            failing.add(key);
          }
        }
      }
    } catch (err) {
      o.onError?.("*", "*", errorLine(err));
    }
    if (!more) await ctx.clock.sleep(o.pollMs ?? SINK_POLL_MS, signal);
  }
}
