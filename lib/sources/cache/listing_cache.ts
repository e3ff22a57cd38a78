/**
 * The listing cache: answers a registry gave once, kept for a short while so that the same rows
 * are not asked for again. Two kinds of answers go in, and both are kept the same way, as
 * segments (`segment.ts`), under one budget and one clock:
 *
 * - answers to requests someone else made, recorded as they pass ({@linkcode ListingCache.recording}):
 *   the planner's reads, whose rows on a registry of a few hundred thousand keys are a third as many
 *   as the crawl's own, and lie around the shards' starts;
 * - pages listed ahead ({@linkcode ListingCache.prefetch}): a shard's first pages, listed from its
 *   start while the plan is still being searched, so that a far registry's round trips overlap the
 *   planning instead of following it.
 *
 * A request is answered ({@linkcode ListingCache.take}) from a segment holding its start, the
 * registry's own answer as it stood a moment earlier; where the listing's offsets are ranks, a
 * request from below a segment is sent up to the segment's first key and the segment's rows
 * follow when the ranks agree that nothing lies between. Rows handed out leave the cache but the
 * last one (where the taker's next request starts). A page listed ahead that has not arrived yet is
 * waited for by the request from its start; one not even sent yet is withdrawn (the request is
 * sooner sent by its taker).
 *
 * Bounded: at most `maxRows` rows held or asked for ahead over every scope (a recorded answer
 * beyond it is not kept, a page beyond it is not listed ahead), `maxDocBytes` of documents (a page
 * that arrives beyond it is dropped at once), `maxInFlight` pages listed ahead at once (the
 * planner's own requests come first at a busy registry); a segment not used within `ttlMs` is
 * dropped at the next use. Whoever fills a scope says whether its answers still hold: a moment
 * earlier must be late enough for the caller (a crawl's answers are recorded only after its start
 * sequence was read, so that its catch-up covers every change since).
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";
import { isLongKey } from "../../plan/keys.ts";
import { type Listing, listingWith, type ListOptions, type Page } from "../../plan/source.ts";
import {
  firstAtOrAbove,
  MIN_PARTIAL_ROWS,
  type Segment,
  segmentAnswer,
  segmentOf,
} from "./segment.ts";
import { SegmentStore } from "./_segment_store.ts";

/**
 * Rows the cache holds or asks for ahead at most, by default: twice two pages of 64,000 rows
 * in flight over up to 256 shards (about 25-40 MB of npm names), half for the planner's reads and
 * half for pages listed ahead in practice.
 */
export const CACHE_ROWS = 4 * (64_000 + 256);

/** Bytes of documents the cache holds at most, by default: 64 MiB. */
export const CACHE_DOC_BYTES = 64 * 1024 * 1024;

/** Options of {@linkcode ListingCache}. */
export interface ListingCacheOptions {
  /** Rows held or asked for ahead at once, over every scope. @default CACHE_ROWS */
  maxRows?: number;
  /** Bytes of documents held at once, over every scope. @default CACHE_DOC_BYTES */
  maxDocBytes?: number;
  /** A segment not used within this many milliseconds of its arrival is dropped. @default 60000 */
  ttlMs?: number;
  /** Pages listed ahead in flight at once. @default 8 */
  maxInFlight?: number;
  /** What segments are timed by. @default SYSTEM_CLOCK */
  clock?: Clock;
}

/** What {@linkcode ListingCache.prefetch} lists. */
export interface PrefetchOptions {
  /** Where the first page starts (null: the first key). */
  start: string | null;
  /** Rows a page asks for (at least 2: each goes on from the last row of the one before). */
  limit: number;
  /** Pages in the chain, at most. */
  pages: number;
  /** Whether the chain stops after a page whose last row is `lastKey`. @default never */
  stop?: (lastKey: string) => boolean;
  /** Each row carries its document. @default false */
  includeDocs?: boolean;
}

/** A page listed ahead, until its answer is a segment. */
interface Ahead {
  /** Settles once the answer is kept (or dropped). */
  landed: Promise<void>;
  /** Whether the listing was sent (it may wait for a slot). */
  sent: boolean;
  /** A request took it before it landed: its taker lists on by itself (the chain ends). */
  taken: boolean;
  /** It was dropped (stale, or its scope): its answer is not kept. */
  dropped: boolean;
  /** Its rows no longer count against the budget. */
  released: boolean;
  /** Withdraws a listing not sent yet (its answer is then null). */
  withdraw: () => void;
  /** Rows asked for, counted against the budget until it lands or is dropped. */
  limit: number;
  /** When it was asked for, epoch milliseconds. */
  atMs: number;
}

/** Answers kept per scope (a crawl), listed ahead or recorded (see the module comment). */
export class ListingCache {
  #store: SegmentStore;
  #ahead = new Map<string, Ahead>();
  #clock: Clock;
  #maxInFlight: number;
  #inFlight = 0;
  #waiting: (() => void)[] = [];
  /** Work still going on: listings ahead and their chains' next steps (see `settled`). */
  #work = new Set<Promise<void>>();

  /** An empty cache with its bounds. */
  constructor(options: ListingCacheOptions = {}) {
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#store = new SegmentStore({
      maxRows: options.maxRows ?? CACHE_ROWS,
      maxDocBytes: options.maxDocBytes ?? CACHE_DOC_BYTES,
      ttlMs: options.ttlMs ?? 60_000,
      clock: this.#clock,
    });
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 8);
  }

  /** The most rows it holds or asks for ahead at once. */
  get maxRows(): number {
    return this.#store.maxRows;
  }

  /** Rows held or asked for ahead now. */
  get heldRows(): number {
    return this.#store.heldRows;
  }

  /** Bytes of documents held now. */
  get heldDocBytes(): number {
    return this.#store.heldDocBytes;
  }

  /**
   * `source` with the answer to every request sent once `after` settled kept for `scope`
   * (ascending or descending, without documents); everything else passes through.
   */
  recording(source: Listing, scope: string, o: { after?: Promise<unknown> } = {}): Listing {
    let open = o.after === undefined;
    o.after?.then(() => open = true, () => open = true);
    return listingWith(source, {
      list: async (request) => {
        const sentOpen = open;
        const page = await source.list(request);
        if (sentOpen && !request.includeDocs) {
          this.#store.keep(scope, segmentOf(request, page, { atMs: this.#clock.now() }));
        }
        return page;
      },
    });
  }

  /**
   * Lists up to `o.pages` pages of `o.limit` rows ahead for `scope`, from `o.start`, each from the
   * last row of the one before (where the taker's next page starts), while the budget allows,
   * until `o.stop` says so or a request took the page before it arrived. `o` may be a promise of
   * the options, when they are not known yet (null: nothing to list). Never throws: a failed
   * listing leaves its taker to ask for itself.
   */
  prefetch(
    source: Listing,
    scope: string,
    o: PrefetchOptions | Promise<PrefetchOptions | null>,
  ): void {
    if (o instanceof Promise) {
      const later = o.then((known) => known && this.prefetch(source, scope, known), () => {});
      return this.#track(later.then(() => {}));
    }
    this.#sweep();
    const docs = o.includeDocs ?? false;
    const key = aheadKey(scope, o.start, docs);
    if (o.pages < 1 || o.limit < 2 || this.#ahead.has(key)) return;
    // Held already (a chain listed it, or a read holds a page's worth from there).
    const have = this.#store.covering(scope, o.start ?? "", { docs });
    if (have && have.rows.length - firstAtOrAbove(have.rows, o.start ?? "") >= o.limit) return;
    if (!this.#store.reserve(o.limit)) return;
    const request: ListOptions = {
      start: o.start,
      limit: o.limit,
      ...(docs ? { includeDocs: true } : {}),
    };
    let answered!: (page: Page | null) => void;
    const answer = new Promise<Page | null>((r) => answered = r);
    const go = () => {
      ahead.sent = true;
      this.#inFlight++;
      source.list(request).catch(() => null).then((page) => {
        this.#inFlight--;
        this.#waiting.shift()?.();
        answered(page);
      });
    };
    const ahead: Ahead = {
      sent: false,
      taken: false,
      dropped: false,
      released: false,
      limit: o.limit,
      atMs: this.#clock.now(),
      withdraw: () => {
        const at = this.#waiting.indexOf(go);
        if (at >= 0) this.#waiting.splice(at, 1);
        answered(null);
      },
      landed: answer.then((page) => {
        if (this.#ahead.get(key) === ahead) this.#ahead.delete(key);
        this.#release(ahead);
        if (!page || ahead.dropped) return;
        this.#store.keep(scope, segmentOf(request, page, { atMs: this.#clock.now() }));
        // A full page goes on from its last row (a long id is never a cursor: the chain stops).
        const last = page.rows.at(-1)?.id;
        if (ahead.taken || last === undefined || isLongKey(last)) return;
        if (page.rows.length < Math.min(o.limit, page.limit ?? o.limit) || o.stop?.(last)) return;
        this.prefetch(source, scope, { ...o, start: last, pages: o.pages - 1 });
      }),
    };
    this.#ahead.set(key, ahead);
    this.#track(ahead.landed);
    if (this.#inFlight < this.#maxInFlight) go();
    else this.#waiting.push(go);
  }

  /**
   * The segment of `scope` holding `key` with the most rows from it, if any (of those whose rows
   * carry documents with `o.docs`, else of those without).
   */
  covering(scope: string, key: string, o: { docs?: boolean } = {}): Segment | undefined {
    this.#sweep();
    return this.#store.covering(scope, key, o);
  }

  /**
   * The answer to `request` from what `scope` holds: a page listed ahead from its start is waited
   * for (withdrawn when not sent yet); then a segment holding its start tells it (see
   * `segmentAnswer`); else, with `o.ranks` (the listing's offsets are ranks and its keys ids in
   * code-point order), when a segment without documents starts between its start and its end,
   * `o.source`'s answer up to that segment followed by the segment's rows (when the answer ended
   * there and the ranks agree that nothing lies between; a segment they contradict is dropped).
   * The rows the answer hands out leave the cache, but its last (the taker's next request starts
   * there) and those at or past `o.end`, the taker's own end when it asks past it (another range
   * starts there; @default the request's end). Undefined: nothing here tells it (the caller asks
   * the registry). Descending, `skip` and update-sequence requests are never answered.
   */
  async take(
    scope: string,
    request: ListOptions,
    o: { source?: Listing; ranks?: boolean; end?: string | null } = {},
  ): Promise<Page | undefined> {
    this.#sweep();
    if (request.descending || request.skip || request.updateSeq) return undefined;
    const docs = request.includeDocs ?? false;
    const key = aheadKey(scope, request.start ?? null, docs);
    const ahead = this.#ahead.get(key);
    if (ahead) {
      this.#ahead.delete(key);
      ahead.taken = true;
      if (!ahead.sent) ahead.withdraw();
      await ahead.landed;
    }
    const start = request.start ?? "";
    const here = this.#store.covering(scope, start, { docs });
    const direct = here && segmentAnswer(here, request);
    const end = o.end === undefined ? request.end ?? null : o.end;
    if (direct) return this.#store.handOut(scope, here, { answer: direct, end });
    if (!o.ranks || !o.source || docs) return undefined;
    return await this.#bridge(scope, request, { source: o.source, end });
  }

  /** Drops everything `scope` holds, and its pages listed ahead. */
  drop(scope: string): void {
    this.#store.forgetScope(scope);
    for (const [key, ahead] of this.#ahead) {
      if (key.startsWith(`${scope}\u0000`)) this.#cancel(key, ahead);
    }
  }

  /** Drops a page listed ahead: withdrawn if not sent, its answer not kept, its rows free now. */
  #cancel(key: string, ahead: Ahead): void {
    this.#ahead.delete(key);
    ahead.dropped = true;
    this.#release(ahead);
    ahead.withdraw();
  }

  #release(ahead: Ahead): void {
    if (ahead.released) return;
    ahead.released = true;
    this.#store.unreserve(ahead.limit);
  }

  /**
   * Resolves once nothing is listed ahead or waits for a slot, and no chain has a next page to
   * list (for a clean stop, and for tests that look at what was kept).
   */
  async settled(): Promise<void> {
    // A chain's next page starts as its answer lands, before the landing counts as ended.
    while (this.#work.size > 0) await Promise.allSettled([...this.#work]);
  }

  /** Counts `work` until it ends: see {@linkcode settled}. */
  #track(work: Promise<void>): void {
    this.#work.add(work);
    const end = () => this.#work.delete(work);
    work.then(end, end);
  }

  /**
   * `source`'s answer to `request` up to the next segment, followed by that segment's rows when
   * the ranks agree (see {@linkcode take}).
   */
  async #bridge(
    scope: string,
    request: ListOptions,
    o: { source: Listing; end: string | null },
  ): Promise<Page | undefined> {
    const { source } = o;
    const next = this.#store.nextAfter(scope, request.start ?? "", request.end ?? null);
    if (!next) return undefined;
    const page = await source.list({ ...request, end: next.from });
    const got = page.rows.length;
    const asked = Math.min(request.limit, page.limit ?? request.limit);
    if (got >= asked) return page;
    if (page.offset + got !== next.offset) {
      this.#store.forget(scope, next); // the registry changed there since
    } else {
      const rest = segmentAnswer(next, {
        ...request,
        start: next.from,
        limit: request.limit - got,
      });
      if (rest) {
        this.#store.handOut(scope, next, { answer: rest, end: o.end });
        const rows = [...page.rows, ...rest.rows];
        const base = { offset: page.offset, total: rest.total };
        // Cut short by the segment's end: a full answer to a request for as many rows.
        if (rest.limit !== undefined) return { ...base, rows, limit: rows.length };
        return { ...base, rows, ...(rest.ended ? { ended: true } : {}) };
      }
    }
    return got >= MIN_PARTIAL_ROWS ? { ...page, limit: got } : undefined;
  }

  #sweep(): void {
    this.#store.sweep();
    const before = this.#store.staleBefore;
    for (const [key, ahead] of this.#ahead) if (ahead.atMs < before) this.#cancel(key, ahead);
  }
}

function aheadKey(scope: string, start: string | null, docs: boolean): string {
  return `${scope}\u0000${docs ? "docs" : "keys"}\u0000${JSON.stringify(start)}`;
}
