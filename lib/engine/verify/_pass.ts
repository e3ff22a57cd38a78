/**
 * One pass of the final check (`completion.ts`): what it is given (`CompletionOptions`) and what
 * it holds across its rounds (`Pass`), shared by the rounds (`_final_rounds.ts`), the feed they
 * read (`_pass_feed.ts`) and the re-proof while following (`reprove.ts`).
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import type { ChangeRow, Source } from "../../plan/source.ts";
import type { Dispatcher, FeedClaim } from "../crawl/mod.ts";
import type { RangeParts } from "./_range_parts.ts";
import type { CrawlRecord } from "../store/mod.ts";

/** Options of the final check (`checkCompletion` in `completion.ts`). */
export interface CompletionOptions {
  /** Time and timers (leases, records' times, pauses between rounds): the environment's. */
  clock: Clock;
  /** Opens the crawl's source; without it the crawl is marked done unchecked (tests only). */
  openSource?: (crawl: CrawlRecord) => Source;
  /** Where shards listed again go (lease workers find them without). */
  dispatcher?: Dispatcher;
  /** Who checks (the feed's lease). @default a random id */
  owner?: string;
  /**
   * Checks in a row that prove nothing before giving the turn back (one that proves a range or a
   * part of one starts the count again). @default 8
   */
  maxRounds?: number;
  /** Called when this call marks the crawl done (not when it found it done). @default none */
  onFinished?: () => void;
}

/** One pass of the final check: what it holds across its rounds. */
export interface Pass {
  kv: Deno.Kv;
  source: Source;
  id: string;
  o: CompletionOptions;
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
