/**
 * Keeping the mirror's change logs level with the crawls' ledgers: the mirror runs no crawl, it
 * reads a store another process (or this one's engine) crawls and follows into, so its own sequence
 * is brought level through the sink seam, at start and then every tick. Which crawls it may serve
 * is decided here too, once for the mirror task and the server.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import { errorLine } from "../base/errors.ts";
import { type CrawlRecord, deliverAll } from "../engine/mod.ts";
import { mirrorSink } from "./mirror_sink.ts";

/** How often the mirror's logs look for what the ledgers noted, ms. @default */
export const MIRROR_POLL_MS = 1_000;

/**
 * Why crawl `crawl` cannot be served as a database (a view's rows, ids in UTF-16 order), or null
 * when it can.
 */
export function notServable(crawl: CrawlRecord): string | null {
  if (crawl.view !== undefined) return "holds a view's rows";
  if (crawl.idOrder === "utf16") return "holds ids in UTF-16 order";
  return null;
}

/**
 * Brings the mirror's change log of crawl `crawlId` level with what its ledger noted so far.
 * @throws what delivering throws (an unknown crawl, KV failing)
 */
export async function levelMirror(kv: Deno.Kv, crawlId: string): Promise<void> {
  await deliverAll({ kv }, crawlId, mirrorSink(kv));
}

/** What {@linkcode keepMirrorsLevel} needs. */
export interface MirrorLevelContext {
  kv: Deno.Kv;
  clock: Clock;
  /** Where a failing crawl's one line goes (again only after it recovered). */
  log: (line: string) => void;
}

/**
 * Levels the logs of `crawls()` at once and then every `everyMs`, until `signal` aborts; resolves
 * then. The mirror serves meanwhile: a crawl's first leveling writes a change an item (about 40 s a
 * million here), and its feed grows as it goes. `onLevel` is told once per crawl, the first time
 * its log is level. A crawl whose leveling fails is said once, and tried again at each tick.
 */
export async function keepMirrorsLevel(
  ctx: MirrorLevelContext,
  o: {
    crawls: () => Promise<string[]>;
    everyMs?: number;
    signal: AbortSignal;
    onLevel?: (crawlId: string) => void;
  },
): Promise<void> {
  const failing = new Set<string>();
  const level = new Set<string>();
  for (let first = true; !o.signal.aborted; first = false) {
    if (!first) await ctx.clock.sleep(o.everyMs ?? MIRROR_POLL_MS, o.signal).catch(() => {});
    if (o.signal.aborted) break;
    let ids: string[];
    try {
      ids = await o.crawls();
    } catch (err) {
      if (!failing.has("")) ctx.log(`mirror: the crawls could not be listed: ${errorLine(err)}`);
      failing.add("");
      continue;
    }
    failing.delete("");
    for (const id of ids) {
      if (o.signal.aborted) break;
      try {
        await levelMirror(ctx.kv, id);
        failing.delete(id);
        if (!level.has(id)) (level.add(id), o.onLevel?.(id));
      } catch (err) {
        if (!failing.has(id)) ctx.log(`mirror log of ${id}: ${errorLine(err)}; tried again`);
        failing.add(id);
      }
    }
  }
}
