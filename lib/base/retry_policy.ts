/**
 * How often, and after how long, each level tries again: every retry policy of the project, in one
 * place, from the innermost level out. Each level only retries what the level inside it gave up on,
 * and every level is bounded, so nothing is retried forever:
 *
 * 1. {@linkcode HTTP_RETRY}: one request. 5xx, 408, 429 (with `Retry-After`), timeouts, dropped
 *    connections, cut or error bodies are asked again with exponential backoff and full jitter.
 * 2. {@linkcode DOCUMENT_RETRY}: one document. Its own requests use fewer attempts (a bad document
 *    should not hold a page for minutes); a body that arrives damaged in every attempt of a round
 *    gets a second round before it is the document's own error. A document that keeps failing
 *    fails its page (level 3) until the page failed `recordAfterPageFailures` times; then it gets
 *    a second round of GETs and, failing again, is recorded as its item's error.
 * 3. {@linkcode SHARD_RETRY}: one page of a shard. A failed page is recorded on the shard and
 *    tried again after a growing delay; after `maxFailures` in a row the crawl fails with the
 *    error's line.
 * 4. {@linkcode PLANNING_RETRY}: a crawl's planning, after transient failures (a registry that
 *    answers a 4xx or garbage fails it at once).
 * 5. {@linkcode QUEUE_RETRY}: a KV queue message whose handler threw (only a KV failure does).
 * 6. {@linkcode KV_LOCKED_RETRY}: a KV operation that met `database is locked` (several processes
 *    on one file).
 * 7. {@linkcode FINAL_CHECK_RETRY} and {@linkcode IDLE_BACKOFF}: rounds of the final check that
 *    wait for ranges to hold still, and lease workers that found nothing to do.
 *
 * Beside the levels, {@linkcode HOST_BREAKER} pauses a host that answered nothing for a minute:
 * its requests fail at once instead of each waiting out its timeouts, so level 3 reaches its bound
 * in minutes whatever the host does (silence, a byte every few seconds, refusals).
 *
 * @module
 */

/** Level 1: one HTTP request (`sources/http/http.ts`). */
export const HTTP_RETRY = {
  /** Attempts per request. */
  maxAttempts: 8,
  /** First backoff step, in milliseconds (doubled each attempt, with full jitter). */
  backoffBaseMs: 100,
  /** Largest backoff step and cap on `Retry-After`, in milliseconds. */
  backoffMaxMs: 30_000,
  /**
   * Least wait before asking again after a 429 that names no `Retry-After`, in milliseconds
   * (×0.5–1.5 jitter): a host counting requests over a second refuses until that second is over,
   * so asking again within it only spends the attempts.
   */
  tooManyMinMs: 1_000,
} as const;

/** Level 2: one document (`sources/couch/couch_source.ts`, `engine/page/page_docs.ts`). */
export const DOCUMENT_RETRY = {
  /** HTTP attempts per round for one document. */
  attemptsPerRound: 4,
  /** Rounds whose every answer is a damaged body before that is the document's own error. */
  damagedRounds: 2,
  /** Failed attempts of its page after which a document that keeps failing is recorded. */
  recordAfterPageFailures: 2,
} as const;

/**
 * A document behind its item's revision on its host (npm's CDN serves the previous packument, or a
 * 404 for a package just published, for a while after `_changes` reports it): the item is stored
 * at its listed revision with the document **pending**, and the document is asked again,
 * conditionally, on a growing schedule (`engine/crawl/pending_ask.ts`), never holding a page, a
 * shard or the feed.
 */
export const PENDING_DOCS = {
  /**
   * First pause before a pending document is asked again, in milliseconds (then doubled), when it
   * is asked conditionally (`If-None-Match` with the ETag it was served with: a 304 costs no body).
   */
  firstPauseMs: 1_000,
  /**
   * First pause, in milliseconds (then doubled), before a pending document with no ETag to ask
   * with is asked again: a 404 for a package just published (an ask no validator can make
   * conditional), or a host that sends none. Each such ask costs a whole answer; npm's followers
   * wait 10 s for a new package.
   */
  unconditionalFirstPauseMs: 10_000,
  /** Longest pause between two asks of one document, in milliseconds. */
  maxPauseMs: 60_000,
  /**
   * A document still behind this long after it was first found so is recorded as its item's error
   * (with its reason), in milliseconds: longer than a CDN's `max-age` of 300 s.
   */
  windowMs: 600_000,
  /**
   * After the window, how often a document recorded as its item's error is asked again (the item
   * takes it when it comes), in milliseconds.
   */
  afterWindowEveryMs: 3_600_000,
  /** Pending documents asked at once by one process, per crawl. */
  concurrency: 16,
  /** Due documents taken by one pass at most. */
  passLimit: 512,
  /** How often a living process looks for pending documents that are due, in milliseconds. */
  lookEveryMs: 1_000,
  /**
   * A pass's lease on a crawl's pending documents, in milliseconds (a process that died holding
   * it holds nothing after this; a pass outliving it only shares its asks).
   */
  passLeaseMs: 120_000,
} as const;

/** Level 3: a page of a shard (`engine/dispatch/_shard_runner.ts`). */
export const SHARD_RETRY = {
  /** Delay before the next attempt, by failures in a row, in milliseconds (×0.5–1.5 jitter). */
  delaysMs: [1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000],
  /** Failures in a row after which the crawl fails. */
  maxFailures: 8,
} as const;

/** Level 4: planning a crawl (`engine/crawl/planning.ts`). */
export const PLANNING_RETRY = {
  /** Attempts failing transiently before the crawl fails. */
  maxAttempts: 5,
  /** Delay after the first failure, in milliseconds (doubled after each). */
  firstDelayMs: 2_000,
  /** Longest delay, in milliseconds. */
  maxDelayMs: 60_000,
} as const;

/** Level 5: KV queue redelivery of a message whose handler threw (`queue_dispatch.ts`). */
export const QUEUE_RETRY = {
  /** Delays before each redelivery, in milliseconds. */
  backoffScheduleMs: [500, 1_000, 2_000, 5_000, 10_000],
} as const;

/** Level 6: a KV operation that met `database is locked` (`engine/store/kv_ops.ts`). */
export const KV_LOCKED_RETRY = {
  /** Attempts. */
  maxAttempts: 50,
  /** Pause per attempt so far, in milliseconds (×0.5–1.5 jitter), up to `maxPauseMs`. */
  pauseStepMs: 5,
  /** Longest pause, in milliseconds. */
  maxPauseMs: 200,
} as const;

/** Rounds of the final check in one pass (`engine/verify/completion.ts`). */
export const FINAL_CHECK_RETRY = {
  /**
   * Rounds in a row that prove nothing before a pass gives the turn back (the next pass starts
   * afresh); a round that proves a range or a part of one starts the count again.
   */
  roundsPerPass: 8,
  /** Rounds per pass at most, however many prove something. */
  maxRoundsPerPass: 64,
  /** Pause before a round after one that proved nothing, in milliseconds (doubled each time). */
  firstPauseMs: 100,
  /** Longest pause between rounds, in milliseconds. */
  maxPauseMs: 1_000,
  /**
   * Passes in a row that fail the same permanent way (a 4xx that asking again in every form the
   * registry takes did not avoid) before the crawl is `failed` with that reason.
   */
  permanentAttempts: 3,
  /** Pause before such a pass is made again, in milliseconds (times the attempt). */
  permanentPauseMs: 1_000,
} as const;

/** Lease workers that found nothing to do (`engine/dispatch/_lease_workers.ts`). */
export const IDLE_BACKOFF = {
  /** First sleep, in milliseconds (doubled while idle). */
  firstMs: 250,
  /** Longest sleep, in milliseconds. */
  maxMs: 5_000,
  /**
   * Longest sleep while a crawl is running or planning, in milliseconds: its end (a worker with
   * `exitWhenIdle` stops then), and a shard another process lets go or splits off, are seen within
   * it (4 processes on one crawl: the last one stopped up to 5 s after the crawl was done).
   */
  busyMaxMs: 1_000,
} as const;

/**
 * How often followers look at their registry (`engine/verify/follow.ts`): every `pollMs` while
 * changes come; each look that finds nothing doubles the pause, up to `idleMs`.
 */
export const FOLLOW_POLL = {
  /** Pause while the registry changes, in milliseconds. */
  pollMs: 500,
  /** Longest pause while it is idle, in milliseconds (an idle follower: ~6 looks a minute). */
  idleMs: 10_000,
  /** Longest pause while looks fail, in milliseconds: a registry's return is seen soon. */
  failMs: 5_000,
} as const;

/**
 * How a delay grows with the attempts in a row: read from a schedule (its last step repeats), or a
 * first delay doubled (or added) per attempt up to a cap; then spread by `jitter` so that many
 * waiting at once do not come back at once.
 */
export type BackoffPolicy =
  & (
    | { scheduleMs: readonly number[] }
    | { firstMs: number; maxMs: number; growth: "double" | "linear" }
  )
  & {
    /**
     * `full`: uniform in [0, delay) (many clients on one host); `half`: delay × 0.5–1.5 (a
     * delay that must not come much sooner); `none`: the delay itself.
     */
    jitter: "full" | "half" | "none";
  };

/**
 * The delay `policy` calls for at `attempt` (1 for the first failure; below 1 counts as 1), in
 * whole milliseconds, with `random` (in [0, 1)) for its jitter.
 */
export function backoff(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  const n = Math.max(1, attempt);
  const delay = "scheduleMs" in policy
    ? policy.scheduleMs[Math.min(n, policy.scheduleMs.length) - 1]
    : Math.min(policy.maxMs, policy.firstMs * (policy.growth === "double" ? 2 ** (n - 1) : n));
  if (policy.jitter === "full") return Math.floor(random() * delay);
  if (policy.jitter === "half") return Math.round(delay * (0.5 + random()));
  return delay;
}

/**
 * The per-host breaker (`sources/http/host_breaker.ts`): a host whose every attempt over
 * `windowMs` failed is paused (its requests fail at once, and the work that needed them retries on
 * its own schedule, which decides when a crawl gives up); one request every `probeEveryMs` tries
 * it, and its first answer ends the pause.
 */
export const HOST_BREAKER = {
  /** A host whose attempts all failed for this long is paused, in milliseconds... */
  windowMs: 60_000,
  /** ...once at least this many failed in that time. */
  minFailures: 5,
  /** While paused, one request tries the host this often, in milliseconds. */
  probeEveryMs: 5_000,
} as const;

/**
 * When a host is said to be down, and how often that is said again: every attempt failed for
 * `downAfterMs` (at least `minFailures` of them), then a line every `sayEveryMs` while it lasts
 * and one when it answers again. Meanwhile the retry lines about it are not shown: a 35 s outage
 * printed 78 lines of encoded URLs before.
 */
export const OUTAGE = {
  /** Failing this long (every attempt), in milliseconds... */
  downAfterMs: 2_000,
  /** ...with at least this many failures, a host is down. */
  minFailures: 3,
  /** While it is down, said again this often, in milliseconds. */
  sayEveryMs: 30_000,
} as const;

/**
 * Pacing of requests per host (`sources/http/host_pacer.ts`): how a host's pushback (429, 503, 504)
 * or its latency growing slows every request to it, and how the pace grows back (AIMD: a cut
 * multiplies, growth adds).
 */
export const HOST_PACE = {
  /** A pushback sets the host's rate to this share of what it was sent over the last second. */
  cutFactor: 0.7,
  /** Latency grown past `latencyFactor` sets it to this share. */
  latencyCutFactor: 0.85,
  /** Shortest time between two cuts, in milliseconds (answers to requests sent before a cut). */
  cutCooldownMs: 1_000,
  /** Every second the host's rate held a request back without pushback, it grows by this share. */
  growShare: 0.05,
  /** ...and by this share once the host has not pushed back for `quietMs`. */
  quietGrowShare: 0.25,
  /** Time without pushback after which the rate grows by `quietGrowShare`, in milliseconds. */
  quietMs: 10_000,
  /** Lowest rate a host is slowed to, in requests a second. */
  minPerSecond: 1,
  /** Latency (smoothed) this many times its usual is pushback... */
  latencyFactor: 4,
  /** ...when it is also this many milliseconds over the usual. */
  latencyMinMs: 100,
  /** Answers of a route seen before its latency counts. */
  latencySamples: 50,
  /**
   * ...and how long the host must have been answering before it does, in milliseconds. A crawl's
   * first second ramps up: a cut then was taken from what the host served over a second it was
   * barely asked (a host serving 5,000 a second was slowed to 329 a second, and took 20 s to grow
   * back), and its usual from the first answers of a burst that had not queued yet.
   */
  latencyWarmMs: 5_000,
  /**
   * Answers over the last second below which pushback cuts nothing (too few to judge by: a host
   * asked less often is slowed by each 429's own wait, `HTTP_RETRY.tooManyMinMs`), nor latency
   * (a crawl just resumed after a pause, asked 5 a second, was slowed to 4.3 a second).
   */
  minAnswers: 50,
  /** A pushback cut is judged once the answers since would have held this many at its share... */
  trialPushbacks: 10,
  /** ...or at once when this many pushed back since, at its share or more (it did not help). */
  trialEarlyPushbacks: 10,
  /** A share of pushback after a cut that counts as helped whatever it was before (stray 429s). */
  tolerableShare: 0.01,
  /** A pushback cut is judged this long after it, in milliseconds... */
  trialMs: 2_000,
  /** ...and undone unless its measure (the share pushing back, the median latency) fell below this share of what it was. */
  trialShare: 0.5,
  /** A cut still without `minAnswers` at the slower pace this long after is undone, in ms. */
  trialMaxMs: 30_000,
  /** ...or for a latency cut, its median latency below this share of what it was. */
  latencyTrialShare: 0.8,
  /** After a cut that did not help, its signal is not taken for a pace signal for this long, in ms. */
  deafMs: 60_000,
  /** Longest a `Retry-After` holds a host, in milliseconds (as `HTTP_RETRY.backoffMaxMs`). */
  maxHoldMs: 30_000,
} as const;
