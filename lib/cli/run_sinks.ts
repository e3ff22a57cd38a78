/**
 * A local crawl's sinks (`--sink`): opened and probed before anything is crawled, fed by the
 * runtime's sink loop while it runs, and brought level with the ledger before the run returns.
 * A sink that refuses for good is one line and the crawl goes on without it, unless the user
 * asked for every sink (`--sink-required`); one that does not answer now is fed when it does.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import { errorLine, FatalError, PermanentError } from "../base/errors.ts";
import { type CrawlRecord, deliverAll, type Sink } from "../engine/mod.ts";
import { type OpenedSink, openSink, type SinkTableOptions } from "../sinks/mod.ts";

/** How long the end of a run waits for a sink that fails to come back, ms. @default */
export const SINK_DRAIN_WAIT_MS = 30_000;

/**
 * The sinks `refs` name, each probed once. One that refuses for good is told to `log` and left
 * out, or, with `required`, fails the run before anything is crawled; one that does not answer
 * now is kept (it is fed when it answers).
 * @throws PermanentError for a reference that names no sink, or with `required`, a sink that
 * refuses
 */
export async function openSinks(
  refs: readonly string[],
  o: { required: boolean; log: (line: string) => void } & SinkTableOptions,
): Promise<OpenedSink[]> {
  const sinks: OpenedSink[] = [];
  try {
    for (const ref of refs) {
      const sink = openSink(ref, { tombstones: o.tombstones });
      try {
        await sink.probe();
        sinks.push(sink);
      } catch (err) {
        if (!(err instanceof PermanentError)) {
          o.log(`${errorLine(err)}; the crawl goes on and the table is filled when it answers`);
          sinks.push(sink);
          continue;
        }
        await sink.close().catch(() => {});
        if (o.required) throw err;
        o.log(`${errorLine(err)}; the crawl goes on without it (--sink-required: stop instead)`);
      }
    }
    return sinks;
  } catch (err) {
    for (const s of sinks) await s.close().catch(() => {});
    throw err;
  }
}

/** The runtime's sink loop for `sinks` (`crawlId()`'s only), or null without any. */
export function sinkLoopOptions(
  sinks: readonly Sink[],
  log: (line: string) => void,
  crawlId: () => string | null,
) {
  if (sinks.length === 0) return null;
  return {
    sinksFor: (crawl: CrawlRecord) => crawl.id === crawlId() ? sinks : [],
    onError: (crawlId: string, sink: string, reason: string) =>
      log(`sink ${sink} of crawl ${crawlId} failed (${reason}); it is given the same again`),
  };
}

/**
 * Delivers to each sink until it holds all that crawl `crawlId`'s ledger noted. A sink that fails
 * is tried again every second for `waitMs`; then it is told to `log` (the same command later
 * brings it level), and with `required` the run fails.
 * @throws FatalError with `required`, when a sink could not be brought level
 */
export async function drainSinks(
  ctx: { kv: Deno.Kv; clock: Clock },
  crawlId: string,
  o: {
    sinks: readonly Sink[];
    log: (line: string) => void;
    required?: boolean;
    /** @default SINK_DRAIN_WAIT_MS */
    waitMs?: number;
  },
): Promise<void> {
  for (const sink of o.sinks) {
    const until = ctx.clock.now() + (o.waitMs ?? SINK_DRAIN_WAIT_MS);
    for (;;) {
      try {
        await deliverAll({ kv: ctx.kv }, crawlId, sink);
        break;
      } catch (err) {
        if (ctx.clock.now() < until) {
          await ctx.clock.sleep(1_000);
          continue;
        }
        const line = `sink ${sink.name} is behind the crawl (${errorLine(err)}); ` +
          "the same command brings it level when it answers";
        if (o.required) throw new FatalError(line, { cause: err });
        o.log(line);
        break;
      }
    }
  }
}
