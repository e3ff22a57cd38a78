/**
 * How fast requests leave a process: a rate for the whole process (`--rate`, `RATE`), a rate per
 * crawl (`withRate`), and a pace per host that follows the host's answers. Every request of every
 * source of a process goes through one pacer (listings, documents, probes, feeds), so one 429
 * slows every shard that asks that host, not only the request that got it.
 *
 * A host's pace is learned (AIMD; the numbers are `HOST_PACE`'s). It is unlimited until the host
 * pushes back. A 429, 503 or 504 sets its rate to 70% of what it served over the last second (at
 * most one cut a second: answers to requests sent before a cut say nothing new); its document
 * latency (the median of the last 21) growing past 4x its usual, and by 100 ms, once the host has
 * answered for 5 s (a start's ramp and first burst are not its pace) and while it answers 50 a
 * second or more (asked less, its latency is not our pace's doing), cuts it to 85%.
 * Every second its rate held a request back without pushback, it grows by 5% (25% once the host
 * was quiet for 10 s). A `Retry-After` holds the host: nothing is sent to it until then.
 *
 * Every cut is on trial, and the rate does not grow meanwhile: answers to requests sent after it
 * judge it against the share of pushback over the 10 s up to the end of its cool-down. Pushback
 * fallen by half, or below 1%, is a cut that helped; as often as before, the host's failures are
 * not about our pace (a flaky proxy, documents slow whatever the pace): the cut is undone and that
 * signal is not taken for a pace signal for a minute. A host answering fewer than 50 a second is
 * not cut at all (too few to judge by). Rates are kept by a GCRA spacing (requests leave `1/rate`
 * apart, with a burst of 1/20 of a second), so waiting requests go in the order they came.
 *
 * @module
 */
import { HOST_PACE } from "../../base/retry_policy.ts";
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { HostState, LATENCY_WINDOW, median, Spacing, type Trial } from "./_host_state.ts";
import { HostBreaker, type HostBreakerOptions } from "./host_breaker.ts";

/** What a host's pace is now, for status pages and metrics (no URL, no credentials). */
export interface HostPace {
  /** The host (`name:port`). */
  host: string;
  /** The rate learned for it, in requests a second; null while it never pushed back. */
  limitPerSecond: number | null;
  /** Why that rate: the last pushback (`HTTP 429`, `latency 5.1x its usual`), or null. */
  reason: string | null;
  /** When the last cut was, epoch milliseconds, or null. */
  cutAt: number | null;
  /** Until when a `Retry-After` holds it, epoch milliseconds, or null. */
  heldUntil: number | null;
  /** Requests sent to it over the last second. */
  sentPerSecond: number;
  /** Requests sent to it so far. */
  requests: number;
  /** Answers that pushed back (429, 503, 504) so far. */
  pushbacks: number;
  /** Since when its breaker pauses it (every attempt failed for a minute), epoch ms, or null. */
  pausedAt: number | null;
  /** How its attempts failed, while paused (`timed out after 20 s ×12`), or null. */
  pauseReason: string | null;
}

/** A pacer's state: its own cap and every host's pace. */
export interface PaceState {
  /** The cap in force, in requests a second (the process's `--rate` or `RATE`), or null. */
  ratePerSecond: number | null;
  /** Every host asked so far. */
  hosts: HostPace[];
}

/** The outcome of one attempt, as {@linkcode Pacer.report} takes it. */
export interface PaceOutcome {
  /** HTTP status; 0 when no answer came. */
  status: number;
  /** Time from sending to the answer (or failure), in milliseconds. */
  ms: number;
  /** The route (`_all_docs`, `doc`, ...): latency is compared within a route. */
  route: string;
  /** A `Retry-After` the answer carried, in milliseconds. */
  retryAfterMs?: number;
}

/** Options of a {@linkcode Pacer}. */
export interface PacerOptions {
  /** Requests a second for everything this pacer sends, or null: no cap. @default null */
  ratePerSecond?: number | null;
  /** Learn each host's pace from its answers (module comment). @default true */
  adapt?: boolean;
  /** What paces are timed by and requests wait on. @default SYSTEM_CLOCK */
  clock?: Clock;
  /**
   * The process's breaker (`host_breaker.ts`), its clock this pacer's unless given.
   * @default HOST_BREAKER's numbers, told to no one
   */
  breaker?: HostBreakerOptions;
}

/**
 * Paces requests (module comment). One per process (`sourceOpener` makes it), shared by every
 * source; `withRate` gives a crawl its own cap inside it.
 *
 * @example
 * ```ts
 * const pacer = new Pacer({ ratePerSecond: 50 }); // the process's cap, every host together
 * const crawl = pacer.withRate(10); // one crawl's own cap inside it
 * const source = new CouchSource("http://127.0.0.1:5984/registry", { pacer: crawl });
 * ```
 */
export class Pacer {
  #rate: number | null;
  #adapt: boolean;
  #clock: Clock;
  #spacing = new Spacing();
  #hosts = new Map<string, HostState>();
  #parent: Pacer | null;
  #breaker: HostBreaker;

  /** A pacer with `options`; `parent` paces everything this one lets go as well. */
  constructor(options: PacerOptions = {}, parent: Pacer | null = null) {
    const rate = options.ratePerSecond ?? null;
    if (rate !== null && !(rate > 0 && Number.isFinite(rate))) {
      throw new RangeError(`a rate must be a positive number of requests a second, got ${rate}`);
    }
    this.#rate = rate;
    this.#adapt = options.adapt ?? true;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#parent = parent;
    this.#breaker = parent?.breaker ??
      new HostBreaker({ clock: this.#clock, ...options.breaker });
  }

  /**
   * The breaker of every host this pacer's requests go to (its parent's, for a crawl's own
   * pacer): one per process, as the pacer is.
   */
  get breaker(): HostBreaker {
    return this.#breaker;
  }

  /** The cap of this pacer, in requests a second, or null. */
  get ratePerSecond(): number | null {
    return this.#rate;
  }

  /**
   * A pacer capped at `ratePerSecond` whose requests also go through this one (a crawl's own
   * `rate` inside the process's): host paces are this one's, learned once for every crawl.
   */
  withRate(ratePerSecond: number): Pacer {
    return new Pacer({ ratePerSecond, adapt: false, clock: this.#clock }, this);
  }

  /**
   * Resolves when a request to `url` may be sent: after this pacer's rate, the host's hold and
   * the host's learned rate allow it. Rejects only when `signal` aborts.
   */
  async pace(url: URL, signal?: AbortSignal): Promise<void> {
    if (this.#rate !== null) {
      await this.#wait(this.#spacing.reserve(this.#clock.now(), this.#rate), signal);
    }
    if (this.#parent) return await this.#parent.pace(url, signal);
    if (!this.#adapt) return;
    const h = this.#host(url.host);
    for (;;) {
      const now = this.#clock.now();
      if (h.heldUntil > now) {
        await this.#wait(h.heldUntil - now, signal);
        continue;
      }
      const wait = h.limit === null ? 0 : h.spacing.reserve(now, h.limit);
      if (wait > 0) h.held = true;
      await this.#wait(wait, signal);
      if (h.heldUntil > this.#clock.now()) continue; // held while it waited: the hold comes first
      break;
    }
    const now = this.#clock.now();
    h.requests++;
    h.sent.add(now);
    this.#judgeTrial(h, now);
    this.#grow(h, now);
  }

  /** Learns from one attempt's outcome at `url` (see the module comment). */
  report(url: URL, outcome: PaceOutcome): void {
    if (this.#parent) return this.#parent.report(url, outcome);
    if (!this.#adapt) return;
    const h = this.#host(url.host);
    const now = this.#clock.now();
    const pushback = outcome.status === 429 || outcome.status === 503 || outcome.status === 504;
    const answered = !pushback && outcome.status !== 0 && outcome.status < 500;
    // Answers to requests sent at the slower pace (a cool-down after the cut) judge it.
    const t = h.trial;
    if (t && h.cutAt !== null && now - h.cutAt >= HOST_PACE.cutCooldownMs) {
      // The share before the cut is taken once its cool-down is over: the pushback of its
      // episode (answers to requests sent before the cut) counts as before, not after.
      if (Number.isNaN(t.atCut)) t.atCut = this.#share(h, now);
    }
    // Only answers after the cool-down to requests sent after the cut judge it (a busy process
    // reads answers late: those to requests sent before are of the episode that made the cut).
    const sentAt = now - outcome.ms;
    const judging = h.cutAt !== null && now - h.cutAt >= HOST_PACE.cutCooldownMs &&
      sentAt >= h.cutAt;
    if (t && judging) {
      if (t.signal === "pushback" && (pushback || answered)) {
        t.answers++;
        if (pushback) t.pushed++;
      }
      if (t.signal === "latency" && answered && outcome.route === t.route) {
        t.answers++;
        t.ms.push(outcome.ms);
      }
    }
    this.#judgeTrial(h, now);
    if (pushback) {
      h.pushbacks++;
      h.pushed.add(now);
      h.pushed10.add(now);
      if (outcome.retryAfterMs !== undefined && outcome.retryAfterMs > 0) {
        const until = now + Math.min(outcome.retryAfterMs, HOST_PACE.maxHoldMs);
        h.heldUntil = Math.max(h.heldUntil, until);
      }
      const answers = h.served.perSecond(now) + h.pushed.perSecond(now);
      if (answers >= HOST_PACE.minAnswers) {
        this.#cut(
          h,
          now,
          { signal: "pushback", route: outcome.route, atCut: NaN },
          {
            factor: HOST_PACE.cutFactor,
            reason: `HTTP ${outcome.status}`,
          },
        );
      }
      return;
    }
    if (!answered) return;
    h.servingSince ??= now;
    h.served.add(now);
    h.served10.add(now);
    // Only documents are alike enough to compare: a listing page is rightly slower than a probe.
    if (outcome.route !== "doc") return;
    let l = h.latency.get(outcome.route);
    if (!l) h.latency.set(outcome.route, l = { recent: [], next: 0, usual: Infinity, samples: 0 });
    l.recent[l.next] = outcome.ms;
    l.next = (l.next + 1) % LATENCY_WINDOW;
    if (++l.samples < LATENCY_WINDOW) return;
    // The median of the last answers: a few slow ones (large documents) do not move it.
    const m = median(l.recent);
    // The usual creeps up (0.05% an answer) so that a lasting change becomes the usual.
    l.usual = Math.min(l.usual * 1.0005, m);
    if (l.samples < HOST_PACE.latencySamples) return;
    if (m <= HOST_PACE.latencyFactor * l.usual || m - l.usual <= HOST_PACE.latencyMinMs) return;
    // Grown, but not our pace's doing: in the host's first seconds of answers (a start's first
    // burst queues behind itself), or asked this rarely (just resumed, or only slow documents
    // left: a cut from this rate would be to a few a second). Looked at only once it has grown:
    // the served window is not counted on every answer.
    if (now - h.servingSince < HOST_PACE.latencyWarmMs) return;
    if (h.served.perSecond(now) < HOST_PACE.minAnswers) return;
    const times = Math.round((m / Math.max(l.usual, 1)) * 10) / 10;
    this.#cut(h, now, { signal: "latency", route: outcome.route, atCut: m }, {
      factor: HOST_PACE.latencyCutFactor,
      reason: `latency ${times}x its usual`,
    });
  }

  /** This pacer's cap and its hosts' paces; `only` keeps the hosts of those URLs. */
  state(only?: readonly string[]): PaceState {
    const wanted = only?.map((u) => new URL(u).host);
    return {
      ratePerSecond: this.#rate,
      hosts: this.hosts().filter((h) => !wanted || wanted.includes(h.host)),
    };
  }

  /** What every host's pace is now (this pacer's hosts, or its parent's). */
  hosts(): HostPace[] {
    if (this.#parent) return this.#parent.hosts();
    const now = this.#clock.now();
    const paused = new Map(this.#breaker.paused().map((p) => [p.host, p]));
    return [...this.#hosts].map(([host, h]) => ({
      host,
      limitPerSecond: h.limit === null ? null : Math.round(h.limit * 10) / 10,
      reason: h.reason,
      cutAt: h.cutAt,
      heldUntil: h.heldUntil > now ? h.heldUntil : null,
      sentPerSecond: h.sent.perSecond(now),
      requests: h.requests,
      pushbacks: h.pushbacks,
      pausedAt: paused.get(host)?.pausedAt ?? null,
      pauseReason: paused.get(host)?.reason ?? null,
    }));
  }

  #host(host: string): HostState {
    let h = this.#hosts.get(host);
    if (!h) this.#hosts.set(host, h = new HostState());
    return h;
  }

  /**
   * Multiplicative decrease from what the host served over the last second (what it was sent
   * when it served nothing), so that a host that serves 200 a second is slowed below 200 at its
   * first 429, not after a cut a second; at most once per cool-down, one cut on trial at a time,
   * none from a signal the host was found deaf to.
   */
  #cut(
    h: HostState,
    now: number,
    trial: Pick<Trial, "signal" | "route" | "atCut">,
    o: { factor: number; reason: string },
  ): void {
    if (h.cutAt !== null && now - h.cutAt < HOST_PACE.cutCooldownMs) return;
    if (h.trial !== null || now < h.deafUntil[trial.signal]) return;
    const served = h.served.perSecond(now) || h.sent.perSecond(now);
    const base = Math.max(served, HOST_PACE.minPerSecond);
    h.trial = { ...trial, before: h.limit, reason: h.reason, answers: 0, pushed: 0, ms: [] };
    h.limit = Math.max(HOST_PACE.minPerSecond, Math.min(h.limit ?? Infinity, base) * o.factor);
    h.reason = o.reason;
    h.cutAt = now;
    h.grownAt = now;
    h.held = false;
  }

  /** Of the answers over the last 10 s, the share that pushed back. */
  #share(h: HostState, now: number): number {
    const pushed = h.pushed10.perSecond(now);
    return pushed / Math.max(1, pushed + h.served10.perSecond(now));
  }

  /**
   * A cut on trial, `trialMs` after it and once `minAnswers` came at the slower pace: a host that
   * limits our rate pushes back far less once slowed, an overloaded one answers faster; one that
   * fails a share of requests whatever the pace (a flaky proxy), or whose documents are slow
   * whatever the pace, does as before. Then the cut is undone, and that signal is not taken for a
   * pace signal for `deafMs` (a `Retry-After` still holds the host).
   */
  #judgeTrial(h: HostState, now: number): void {
    const t = h.trial;
    if (t === null || h.cutAt === null) return;
    // Pushback going on at the slower pace as often as before is plain early: no need to wait.
    if (Number.isNaN(t.atCut)) return; // still in its cool-down
    const goesOn = t.signal === "pushback" && t.pushed >= HOST_PACE.trialEarlyPushbacks &&
      t.pushed / t.answers >= Math.max(HOST_PACE.trialShare * t.atCut, HOST_PACE.tolerableShare);
    if (!goesOn && now - h.cutAt < HOST_PACE.trialMs) return;
    // Enough answers that a share unchanged would have shown `trialPushbacks` pushbacks: a
    // flaky host's few must not pass for a cut that helped by chance.
    const enough = t.signal === "pushback"
      ? Math.max(HOST_PACE.minAnswers, HOST_PACE.trialPushbacks / Math.max(t.atCut, 1e-6))
      : HOST_PACE.minAnswers;
    if (!goesOn && t.answers < enough) {
      // Too few yet to tell. After long enough, none pushing back is a cut that helped; some
      // are a host that pushes back whatever the pace (undone below).
      if (now - h.cutAt < HOST_PACE.trialMaxMs) return;
      if (t.signal === "pushback" && t.pushed === 0) return void (h.trial = null);
      if (t.signal === "latency") return void (h.trial = null);
    }
    h.trial = null;
    const after = t.signal === "pushback" ? t.pushed / t.answers : median(t.ms);
    const share = t.signal === "pushback" ? HOST_PACE.trialShare : HOST_PACE.latencyTrialShare;
    // The cut helped: pushback fell by half, or to a share a crawl bears (a limiter's stray 429s).
    const bearable = t.signal === "pushback" ? HOST_PACE.tolerableShare : 0;
    if (after < Math.max(share * t.atCut, bearable)) return;
    h.limit = t.before;
    h.reason = t.reason;
    h.deafUntil[t.signal] = now + HOST_PACE.deafMs;
  }

  /**
   * Additive increase: once a second the rate held something back without pushback; faster
   * (`quietGrowShare`) once the host has been quiet for `quietMs`, so that a host slowed far by
   * a burst of pushback comes back in seconds, not minutes.
   */
  #grow(h: HostState, now: number): void {
    if (h.limit === null || now - h.grownAt < 1000) return;
    // Not while a cut is on trial: it is judged at the pace it set.
    if (h.trial !== null) return void (h.grownAt = now, h.held = false);
    const share = h.cutAt !== null && now - h.cutAt > HOST_PACE.quietMs
      ? HOST_PACE.quietGrowShare
      : HOST_PACE.growShare;
    if (h.held) h.limit += Math.max(1, h.limit * share);
    h.held = false;
    h.grownAt = now;
  }

  async #wait(ms: number, signal?: AbortSignal): Promise<void> {
    if (ms > 0) await this.#clock.sleep(ms, signal);
    else signal?.throwIfAborted();
  }
}
