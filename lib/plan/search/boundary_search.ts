/**
 * The boundary search: finds the real key at each target rank with as few listing requests as
 * possible. Every answer becomes known (key, rank) points shared by all targets
 * ({@linkcode PointSet}); each target's next request is decided by `nextStep` from its bracket
 * alone (`next_step.ts`), and {@linkcode BoundarySearch} runs the targets concurrently, in an order
 * that spreads the first probes over the whole key space.
 *
 * @module
 */
import { FatalError, PermanentError } from "../../base/errors.ts";
import { AdaptiveLimit, type Slot } from "../../base/adaptive_limit.ts";
import { Alphabet, NAME_CHARS } from "../keys.ts";
import { inconsistent, type Point, PointSet } from "./points.ts";
import type { Listing, Page } from "../source.ts";
import { allSettledOrThrow } from "../../base/pool.ts";
import { LevelGates, spreadOrder } from "./search_order.ts";
import { fullPageProbes, nextStep, type ProbeMemory, type SearchTuning } from "./next_step.ts";

/**
 * Pages within which a target is finished by one read where the registry allows reads that big.
 * With it, full-page probes from 300 pages out and the later Illinois pull, on 4,000,000 names
 * 50 ms away (N = 56): 5.5-5.7 requests a boundary instead of 7.0 where reads of 10,000 rows are
 * allowed, 7.2-7.4 instead of 7.9 where 1,000 is the cap, and 10% less time in both. Then 8
 * instead of 5 (a read of 8,000 rows costs less than the probe or two it saves where answers
 * are 50 ms away; with searches starting 32 at once): 4,000,000 names, N = 56, reads of 10,000
 * allowed: 6.09 -> 5.38 requests a boundary and 25.7 -> 21.4 round trips from start to plan;
 * 300,000 names, N = 16: 3.67 -> 3.13 and 11.5 -> 6.6 round trips.
 */
const FINISH_PAGES = 8;

/**
 * Probes read a full page once a bracket is at most this many pages wide (the page likely holds
 * the target, and its ends are two real points); wider brackets get rank probes of one row.
 */
export const WIDE_PAGE_SPAN = 300;

/** A probe above t that moves the bracket's top by less than this share of a page has stalled. */
const STALL_SHARE = 0.2;

/** Options of {@linkcode BoundarySearch}. */
export interface BoundarySearchOptions {
  /** Largest page to request with a probe. */
  maxPage: number;
  /**
   * Largest page to read from the nearer end of a bracket once probes keep missing: one read
   * instead of several, where the registry allows big pages. @default maxPage
   */
  readPage?: number;
  /** Known points: at least one at or below and one above every target. */
  points: Point[];
  /** Answers already in hand (the planner's first page). */
  pages?: { start: string | null; page: Page }[];
  /** Listing requests in flight at first (more while answers stay fast, fewer when they slow). */
  concurrency: number;
  /** Listing requests in flight at most. @default 64 */
  maxConcurrency?: number;
  /**
   * Probe with a full page once a bracket is at most this many pages wide.
   * @default WIDE_PAGE_SPAN
   */
  widePageSpan?: number;
  /**
   * Characters the key model assumes before it has seen any key (each as a one-character key).
   * @default NAME_CHARS
   */
  priorChars?: string;
  /** Called with each target as soon as its key is found. @default none */
  onFound?: (rank: number, key: string) => void;
}

/** One search over one source for a set of target ranks; {@linkcode run} resolves their keys. */
export class BoundarySearch {
  #source: Listing;
  #targets: number[];
  #targetSet: Set<number>;
  #found = new Map<number, string>();
  #points: PointSet;
  #alphabet: Alphabet;
  #pool: AdaptiveLimit;
  /** Requests in flight by direction and start key: each with its limit. */
  #inflight = new Map<string, { limit: number; page: Promise<Page> }[]>();
  #tuning: SearchTuning;
  #failed = false;
  #onFound?: (rank: number, key: string) => void;

  /** A search for the keys at `targets` (each strictly inside the known points' rank range). */
  constructor(source: Listing, targets: number[], options: BoundarySearchOptions) {
    this.#source = source;
    this.#targets = targets;
    this.#targetSet = new Set(targets);
    this.#onFound = options.onFound;
    this.#points = new PointSet({ maxConflicts: 50 + 4 * targets.length });
    this.#alphabet = new Alphabet([...(options.priorChars ?? NAME_CHARS)]);
    this.#pool = new AdaptiveLimit({
      start: Math.max(1, options.concurrency),
      max: Math.max(options.concurrency, options.maxConcurrency ?? 64),
      slowStart: true,
    });
    const readPage = Math.max(options.maxPage, options.readPage ?? options.maxPage);
    this.#tuning = {
      maxPage: options.maxPage,
      readPage,
      widePageSpan: options.widePageSpan ?? WIDE_PAGE_SPAN,
      finishRows: Math.min(readPage, FINISH_PAGES * options.maxPage),
      descending: true,
    };
    for (const p of options.points) {
      this.#points.add(p);
      this.#alphabet.addKey(p.key);
    }
    for (const { start, page } of options.pages ?? []) this.#absorb(start, page);
  }

  /** The key at each target rank, in target order. */
  async run(): Promise<string[]> {
    const order = spreadOrder(this.#targets.length);
    const gates = new LevelGates(order.length);
    await allSettledOrThrow(
      order.map((i, p) =>
        this.#search(this.#targets[i], gates, p).catch((err) => {
          this.#failed = true; // the other searches stop at their next step
          throw err;
        })
      ),
    );
    return this.#targets.map((t) => this.#found.get(t)!);
  }

  async #search(t: number, gates: LevelGates, position: number): Promise<void> {
    try {
      if (this.#wide(t)) await gates.before(position);
      await this.#searchFor(t, () => gates.stepped(position));
    } finally {
      gates.stepped(position); // a search that ends or fails before its first answer
    }
    const key = this.#found.get(t);
    if (key !== undefined && !this.#failed) this.#onFound?.(t, key);
  }

  /** The bracket of `t` is open or wider than full-page probes are sent in. */
  #wide(t: number): boolean {
    const { a, b } = this.#points.bracket(t);
    return !a || !b || !fullPageProbes(b.rank - a.rank, this.#tuning);
  }

  async #searchFor(t: number, stepped: () => void): Promise<void> {
    const memory: ProbeMemory = { high: 0, low: 0 };
    for (let step = 0; !this.#found.has(t) && !this.#failed; step++) {
      if (step > 200) throw new FatalError(`boundary search for rank ${t} did not converge`);
      // The next request is decided once a slot is free to send it: what other targets learned
      // while this one waited narrows its bracket too. On 4,500,000 names, N = 56, capped at
      // 1,000: 7.22 -> 6.99 requests a boundary in memory (5 seeds), 7.33 -> 7.05 over HTTP 50 ms
      // away (mean of 8), in the same 1.6 s.
      const slot = await this.#pool.reserve();
      try {
        await this.#step(t, memory, slot);
      } finally {
        slot.release();
      }
      stepped();
    }
  }

  async #step(t: number, memory: ProbeMemory, slot: Slot): Promise<void> {
    const next = nextStep(t, this.#points, memory, { ...this.#tuning, alphabet: this.#alphabet });
    if (next.kind !== "probe") memory.stalled = false;
    switch (next.kind) {
      case "found":
        this.#found.set(t, next.key);
        return;
      case "anchor-start":
        this.#points.add({ key: "", rank: 0, real: false });
        return;
      case "relearn-end":
        return await this.#relearnEnd(t, slot);
      case "read":
        return void await this.#list(next.start, next.limit, slot);
      case "read-down":
        return await this.#listDown(next.from, next.limit, slot);
      case "probe": {
        const top = this.#points.bracket(t).b?.rank ?? Infinity;
        const page = await this.#list(next.key, next.limit, slot);
        memory.stalled = page.offset > t &&
          top - page.offset < this.#tuning.maxPage * STALL_SHARE;
        // Landing on the other side halves the streak rather than ending it: a probe that just
        // crossed over is often still far from t, and the pull it had earned still applies.
        if (page.offset > t) [memory.high, memory.low] = [memory.high + 1, memory.low >> 1];
        else [memory.high, memory.low] = [memory.high >> 1, memory.low + 1];
      }
    }
  }

  /**
   * Learns what `start=key&limit` teaches. A request from the same key with at least this limit
   * already in flight answers it too: targets near one known point (the last key, say) often ask
   * to read from it at once, each as far as it needs.
   */
  #list(start: string | null, limit: number, slot: Slot): Promise<Page> {
    return this.#shared(`up\u0000${start}`, limit, slot, async () => {
      const page = await this.#source.list({ start, limit });
      this.#absorb(start, page);
      return page;
    });
  }

  async #listDown(from: Point, limit: number, slot: Slot): Promise<void> {
    try {
      await this.#shared(`down\u0000${from.key}`, limit, slot, async () => {
        const page = await this.#source.list({ start: from.key, limit, descending: true });
        this.#absorbDown(from, page);
        return page;
      });
    } catch (err) {
      if (!(err instanceof PermanentError)) throw err;
      this.#tuning.descending = false; // refused: search upwards only
    }
  }

  /**
   * `list()` run in `slot`, or an answer to a request covering it that is in flight
   * (the slot is then left unused).
   */
  #shared(
    key: string,
    limit: number,
    slot: Slot,
    list: () => Promise<Page>,
  ): Promise<Page> {
    const same = this.#inflight.get(key) ?? [];
    const covering = same.find((r) => r.limit >= limit);
    if (covering) return covering.page;
    const mine = { limit, page: slot.run(list) };
    this.#inflight.set(key, [...same, mine]);
    // The derived promise only cleans up; callers of `page` see its rejection.
    mine.page.finally(() => {
      const left = (this.#inflight.get(key) ?? []).filter((r) => r !== mine);
      if (left.length) this.#inflight.set(key, left);
      else this.#inflight.delete(key);
    }).catch(() => {});
    return mine.page;
  }

  async #relearnEnd(t: number, slot: Slot): Promise<void> {
    const last = await slot.run(() => this.#source.list({ descending: true, limit: 1 }));
    if (last.rows.length === 0 || last.total - 1 <= t) throw inconsistent();
    this.#points.add({ key: last.rows[0].id, rank: last.total - 1, real: true });
  }

  #absorb(start: string | null, page: Page): void {
    if (start !== null) this.#points.add({ key: start, rank: page.offset, real: false });
    const n = page.rows.length;
    page.rows.forEach((row, j) => {
      // Only the ends of each answer train the key model: a whole page is one dense local
      // sample and would skew it towards wherever pages happened to be read.
      if (j === 0 || j === n - 1) {
        this.#alphabet.addKey(row.id);
        this.#points.add({ key: row.id, rank: page.offset + j, real: true });
      }
      if (this.#targetSet.has(page.offset + j)) this.#found.set(page.offset + j, row.id);
    });
    if (n === 0 && page.offset !== page.total && start !== null) throw inconsistent();
  }

  /**
   * Reading down from a point: row j sits at rank top - j (top = the point's rank when its key is
   * real, one below it otherwise). Offsets of descending answers are not used.
   */
  #absorbDown(from: Point, page: Page): void {
    const top = from.real ? from.rank : from.rank - 1;
    page.rows.forEach((row, j) => {
      const r = top - j;
      if (j === page.rows.length - 1) {
        this.#alphabet.addKey(row.id);
        this.#points.add({ key: row.id, rank: r, real: true });
      }
      if (this.#targetSet.has(r)) this.#found.set(r, row.id);
    });
  }
}

/**
 * Finds the real key at each target rank between known points (`lower.rank <= t < upper.rank` for
 * every target). Used by rebalancing to split a running shard's remaining range at its middle.
 */
export function findKeysAtRanks(
  source: Listing,
  targets: number[],
  options: { lower: Point; upper: Point; maxPage?: number; concurrency?: number },
): Promise<string[]> {
  return new BoundarySearch(source, targets, {
    maxPage: Math.min(options.maxPage ?? source.capabilities.maxPage, source.capabilities.maxPage),
    points: [options.lower, options.upper],
    concurrency: options.concurrency ?? 4,
  }).run();
}
