/**
 * The follower of a process that lives (the CLI's `--follow`, `serve` off Deploy): ticks every
 * followed crawl (`follow.ts`), each on its own pace, `pollMs` while its registry changes and up
 * to `idleMs` while it does not, until stopped. On Deploy the watchdog's cron tick is the follower
 * instead (`_watchdog.ts`).
 *
 * @module
 */
import { crawlContext, type Env } from "./env.ts";
import { FOLLOW_POLL } from "../../base/retry_policy.ts";
import {
  type FollowOptions,
  followPauseMs,
  type FollowTick,
  followTick,
  quietTicks,
} from "../verify/mod.ts";
import { type CrawlRecord, followable, listCrawls } from "../store/mod.ts";

/** How often a loop looks for crawls newly done (or newly created with `follow`), in ms. */
const LOOK_FOR_NEW_MS = 1000;

/**
 * What a process's follower is asked (`RuntimeOptions.follow`, `Runtime.follow`), beside the
 * environment's parts (its store, sources, clock, dispatcher and the follower's name).
 */
export interface FollowConfig extends FollowOptions {
  /** Pause between looks at a crawl whose registry changes, ms. @default FOLLOW_POLL.pollMs */
  pollMs?: number;
  /** Longest pause between looks at an idle registry, ms. @default FOLLOW_POLL.idleMs */
  idleMs?: number;
  /** Follow only this crawl (the CLI), whether or not it was created with `follow`. */
  only?: string;
  /**
   * Told after each tick of a crawl, or its failure (`*`: the crawls could not be listed).
   * @default none
   */
  onTick?: (crawlId: string, tick: FollowTick | null, error?: unknown) => void;
}

/** What a follower works with of the engine's environment. */
export type FollowLoopEnv = Pick<
  Env,
  "kv" | "openSource" | "clock" | "dispatcher" | "leaseMs" | "ownerName"
>;

/**
 * Ticks followed crawls until `signal` aborts (see the module comment); a failing tick is told
 * to `onTick` and tried again at the crawl's next look. Crawls followed are those `done` and
 * created with `follow` (or `only`).
 */
export async function followLoop(
  deps: FollowLoopEnv,
  signal: AbortSignal,
  options: FollowConfig = {},
): Promise<void> {
  const clock = deps.clock;
  const now = () => clock.now();
  const pollMs = options.pollMs ?? FOLLOW_POLL.pollMs;
  // In this process's name: the feed's lease is free at once when the process dies.
  const owner = deps.ownerName("follow");
  const pace = new Map<string, { quiet: number; nextAt: number }>();
  while (!signal.aborted) {
    // A crawl done meanwhile is looked for every second, not only at the next idle look.
    let soonest = now() + Math.min(LOOK_FOR_NEW_MS, options.idleMs ?? FOLLOW_POLL.idleMs);
    try {
      for (const crawl of await followed(deps.kv, options.only)) {
        if (signal.aborted) break;
        const p = pace.get(crawl.id) ?? { quiet: 0, nextAt: 0 };
        if (p.nextAt <= now()) {
          let tick: FollowTick | null = null;
          try {
            const ctx = crawlContext(deps, deps.openSource(crawl), owner);
            tick = await followTick(ctx, crawl.id, options);
            options.onTick?.(crawl.id, tick);
          } catch (err) {
            options.onTick?.(crawl.id, null, err);
          }
          p.quiet = quietTicks(p.quiet, tick);
          const pause = followPauseMs(p.quiet, options);
          p.nextAt = now() + (tick ? pause : Math.min(pause, FOLLOW_POLL.failMs));
          pace.set(crawl.id, p);
        }
        soonest = Math.min(soonest, p.nextAt);
      }
    } catch (err) {
      options.onTick?.(options.only ?? "*", null, err);
      soonest = now() + pollMs;
    }
    await clock.sleep(Math.max(0, soonest - now()), signal);
  }
}

/** The crawls a loop follows now. */
async function followed(kv: Deno.Kv, only: string | undefined): Promise<CrawlRecord[]> {
  return (await listCrawls(kv)).filter((c) =>
    followable(c) && (only === undefined ? c.follow : c.id === only)
  );
}
