/**
 * One pass of the final check (`completion.ts`): what it is given (`VerifyContext`, `PassSettings`) and what
 * it holds across its rounds (`Pass`), shared by the rounds (`_final_rounds.ts`), the feed they
 * read (`_pass_feed.ts`) and the re-proof while following (`reprove.ts`).
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import type { ChangeRow, Source } from "../../plan/source.ts";
import type { CrawlContext, Dispatcher, FeedClaim } from "../crawl/mod.ts";
import type { RangeParts } from "./_range_parts.ts";
import type { CrawlRecord } from "../store/mod.ts";

/**
 * The verify room's slice of the engine's environment: the store, the clock, the checker's name
 * (the finishing lease, the feed's), the lease's length, where ranges listed again go, and how a
 * crawl's source is opened (the check reads the crawl first).
 */
export type VerifyContext =
  & Pick<CrawlContext, "kv" | "clock" | "owner" | "leaseMs" | "dispatcher">
  & {
    /** Opens the crawl's source. */
    openSource: (crawl: CrawlRecord) => Source;
  };

/**
 * What a follow tick needs (`follow.ts`): the store, the crawl's source, the clock, the follower's
 * name and its lease's length (the feed's), and where ranges found wrong go.
 */
export type FollowContext = Pick<
  CrawlContext,
  "kv" | "source" | "clock" | "owner" | "leaseMs" | "dispatcher"
>;

/** What a pass's rounds work with beside its store and source (`Pass.o`). */
export interface PassSettings {
  /** Time and timers (records' times, pauses between rounds): the environment's. */
  clock: Clock;
  /** Where shards listed again go. */
  dispatcher: Dispatcher;
  /**
   * Checks in a row that prove nothing before giving the turn back (one that proves a range or a
   * part of one starts the count again). @default FINAL_CHECK_RETRY.roundsPerPass
   */
  maxRounds?: number;
  /** Called when this pass marks the crawl done (not when it found it done). @default none */
  onFinished?: () => void;
}

/** One pass of the final check: what it holds across its rounds. */
export interface Pass {
  kv: Deno.Kv;
  source: Source;
  id: string;
  o: PassSettings;
  /** The feed this pass holds; null: none (or it proved unusable). */
  feed: FeedClaim | null;
  /** Changes applied by this pass. */
  applied: number;
  /** Why the feed could not be used, if so. */
  driftError?: string;
  /** Rounds in a row whose feed was refused (`_pass_feed.ts`). */
  feedRefusals: number;
  /** The feed was refused through this pass, which went on without it. */
  feedLost?: boolean;
  /**
   * The feed did not know where the crawl stood, and was taken up again at its head: how often,
   * from and to which sequence, and what comparing every row found.
   */
  resynced?: { times: number; from: string; to: string; compared: number; repaired: number };
  /** The changes the last round read after sequence `at` (its window), for `applyWindow`. */
  window?: { at: string; rows: ChangeRow[] } | null;
  /** Ranges decided `unproven` by this pass (a crawl done before: see `settle`), and why. */
  unproven: Map<number, string>;
  /** The crawl was done before (a repair while it is followed): its copy is kept (`settle`). */
  keepDone?: boolean;
  /** Ranges proven by this pass. */
  proven: Set<number>;
  /** Ranges this pass proves a part at a time (they never held still as a whole). */
  parts: RangeParts;
  /** The crawl lists a view (no catch-up: its ranges are checked as if the registry held still). */
  view?: boolean;
  /**
   * Throws when the registry changed in a way the check cannot follow (a view since its crawl
   * started): called before each round and before the crawl is marked done.
   */
  checkUnchanged?: () => Promise<void>;
}
