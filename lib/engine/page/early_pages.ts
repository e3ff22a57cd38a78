/**
 * Early pages: a shard's first pages, listed while the plan is still being searched, so that a
 * far registry's round trips and its serving time overlap the planning (which mostly waits)
 * instead of following it. A shard's start is known as soon as the boundary below it is found
 * (the first shard's at once); its end often is not yet: an early page is listed from the start
 * without an end, and answers the shard's own request later only where that answer can be told
 * exactly from it (see {@linkcode answerFrom}): the rows the registry would list for
 * `[start, end)` with that limit, as it stood a moment earlier. A moment earlier is still after the
 * crawl's start sequence was read (planning reads it first), so catch-up covers what changed since.
 *
 * Bounded: at most `maxRows` rows held or asked for over all crawls of the process, and
 * `maxDocBytes` of documents held (pages of crawls whose listing carries documents: a page that
 * arrives beyond it is dropped at once; the source caps each answer); at most `maxInFlight`
 * listings at once (the plan's own probes come first at a busy registry). An entry not taken within
 * `ttlMs` (its shard runs in another process, or the plan failed) is dropped at the next use, and
 * one not sent yet when its shard asks is withdrawn. Crawls that fetch documents by id get no
 * early pages: their listing is not what they wait for.
 *
 * @module
 */
import { compareKeys, isLongKey } from "../../plan/keys.ts";
import type { DocMode, Listing, ListOptions, Page, Source } from "../../plan/source.ts";
import { heldBytes } from "./page_docs.ts";
import { PlanReads } from "./_plan_reads.ts";
import type { CrawlRecord } from "../store/mod.ts";
import { ROWS_IN_FLIGHT, rowsPerPage } from "./page_listing.ts";
import { type Clock, SYSTEM_CLOCK } from "../../base/clock.ts";

/**
 * The default budget of early rows: two pages of each shard's share of {@linkcode ROWS_IN_FLIGHT}
 * (each page one row longer than it commits, for up to 256 shards).
 */
export const EARLY_ROWS = 2 * (ROWS_IN_FLIGHT + 256);

/** Options of {@linkcode EarlyPages}. */
export interface EarlyPagesOptions {
  /** Rows held or asked for at once, over all crawls. @default EARLY_ROWS */
  maxRows?: number;
  /** An entry not taken within this many milliseconds is dropped. @default 60000 */
  ttlMs?: number;
  /**
   * Early listings in flight at once: more would hold the plan's own probes up behind them at a
   * busy registry. @default 8
   */
  maxInFlight?: number;
  /** Bytes of documents held at once, over all crawls. @default EARLY_DOC_BYTES */
  maxDocBytes?: number;
  /** Rows of the planner's reads kept at once, over all crawls (see `_plan_reads.ts`). @default EARLY_ROWS */
  maxPlanRows?: number;
  /** What entries are timed by (their ttl). @default SYSTEM_CLOCK */
  clock?: Clock;
}

/** The default budget of documents held in early pages: 64 MiB. */
export const EARLY_DOC_BYTES = 64 * 1024 * 1024;

interface Entry {
  /** The answer, or null when the listing failed or never started (the shard asks itself). */
  answer: Promise<Page | null>;
  /** Whether the listing was sent (it may wait for a slot). */
  sent: boolean;
  /** Withdraws a listing not sent yet (its answer becomes null). */
  withdraw: () => void;
  /** Rows asked for (counted against the budget until taken or dropped). */
  limit: number;
  /** Bytes of the documents it holds, once arrived (counted until taken or dropped). */
  docBytes: number;
  /** When listed, epoch ms. */
  at: number;
  /** Where it was listed from. */
  start: string | null;
  /** Where its chain began (the shard's start; null: the first key). */
  origin: string | null;
}

/** Early pages of the crawls planned in this process (see the module comment). */
export class EarlyPages {
  #entries = new Map<string, Entry>();
  #held = 0;
  #docBytes = 0;
  #maxDocBytes: number;
  #maxRows: number;
  #ttlMs: number;
  #clock: Clock;
  #maxInFlight: number;
  /** Chains with a listing whose answer (and its next page's start) is still to come. */
  #chains = new Set<Promise<void>>();
  #inFlight = 0;
  #waiting: (() => void)[] = [];
  /** The planner's reads, which answer shards too (see `_plan_reads.ts`); same ttl and clock. */
  readonly reads: PlanReads;

  /** An empty set of early pages with its bounds. */
  constructor(options: EarlyPagesOptions = {}) {
    this.#maxRows = options.maxRows ?? EARLY_ROWS;
    this.#ttlMs = options.ttlMs ?? 60_000;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 8);
    this.#maxDocBytes = options.maxDocBytes ?? EARLY_DOC_BYTES;
    this.reads = new PlanReads({
      maxRows: options.maxPlanRows ?? EARLY_ROWS,
      ttlMs: this.#ttlMs,
      clock: this.#clock,
    });
  }

  /** Bytes of documents held now. */
  get heldDocBytes(): number {
    return this.#docBytes;
  }

  /** Rows held or asked for now. */
  get heldRows(): number {
    return this.#held;
  }

  /**
   * Lists up to `pages` pages of `limit` rows from `start` (null: the first key) for `crawlId`,
   * each following on from the last row of the one before (as the shard's own pages do), while
   * the budget allows and until `stop(lastKey)` says the shard's end was passed. Never throws: a
   * failed listing leaves the shard to ask for itself.
   */
  list(
    source: Listing,
    crawlId: string,
    o: {
      start: string | null;
      limit: number;
      pages: number;
      stop?: (lastKey: string) => boolean;
      /** Each row carries its document. @default false */
      includeDocs?: boolean;
      /** Where the chain began (the shard's start). @default start */
      origin?: string | null;
    },
  ): void {
    this.#sweep();
    if (o.pages < 1 || o.limit < 2 || this.#held + o.limit > this.#maxRows) return;
    const docs = o.includeDocs ?? false;
    const key = entryKey(crawlId, o.start, docs);
    if (this.#entries.has(key)) return;
    this.#held += o.limit;
    const request = { start: o.start, limit: o.limit, ...(docs ? { includeDocs: true } : {}) };
    const origin = o.origin === undefined ? o.start : o.origin;
    const entry = this.#send(() => source.list(request), o.limit, { start: o.start, origin });
    this.#entries.set(key, entry);
    const chain = entry.answer.then((page) => {
      if (page && docs && this.#entries.get(key) === entry) {
        entry.docBytes = heldBytes(page.rows);
        this.#docBytes += entry.docBytes;
        // Over the budget: dropped now (the shard lists it again), never held on speculation.
        if (this.#docBytes > this.#maxDocBytes) return this.#remove(key, entry);
      }
      // A full page goes on from its last row, which the shard's next page starts at (a long id
      // is never a cursor: the chain stops there and the shard lists on by itself).
      const last = page?.rows.at(-1)?.id;
      if (!page || page.rows.length < o.limit || last === undefined || isLongKey(last)) return;
      if (o.stop?.(last) || this.#entries.get(key) === undefined) return;
      this.list(source, crawlId, { ...o, start: last, pages: o.pages - 1, origin });
    });
    this.#track(chain);
  }

  /** Counts `work` (a chain's next step) until it ends: see {@linkcode settled}. */
  #track(work: Promise<void>): void {
    this.#chains.add(work);
    const end = () => this.#chains.delete(work);
    work.then(end, end);
  }

  /**
   * Resolves once no listing of this process is in flight or waiting for a slot, no chain has a
   * next page to list and no start told is waiting to be listed (for a clean stop, and for tests
   * that look at what was held).
   */
  async settled(): Promise<void> {
    // A chain's next page starts as its answer is handled, before that chain counts as ended.
    while (this.#chains.size > 0) await Promise.allSettled([...this.#chains]);
  }

  /** An entry whose listing is sent when a slot is free (at once, or when one ends). */
  #send(
    list: () => Promise<Page>,
    limit: number,
    from: { start: string | null; origin: string | null },
  ): Entry {
    let resolve!: (page: Page | null) => void;
    const entry: Entry = {
      ...from,
      at: this.#clock.now(),
      limit,
      docBytes: 0,
      sent: false,
      answer: new Promise((r) => resolve = r),
      withdraw: () => {
        const at = this.#waiting.indexOf(go);
        if (at >= 0) this.#waiting.splice(at, 1);
        resolve(null);
      },
    };
    const go = () => {
      entry.sent = true;
      this.#inFlight++;
      list().catch(() => null).then((page) => {
        this.#inFlight--;
        this.#waiting.shift()?.();
        resolve(page);
      });
    };
    if (this.#inFlight < this.#maxInFlight) go();
    else this.#waiting.push(go);
    return entry;
  }

  /**
   * What planning calls with each shard's start of `crawl` as soon as it is final (see
   * `PlanOptions.onShardStart`): its first pages are listed from there, as many pages of the
   * shard's own size as an even share of the budget allows (at most 4), each chain stopping once it
   * passes a start found meanwhile (the next shard's). With documents (`docMode`, once known),
   * only where the listing carries them. Nothing is listed before `after` settles (the crawl's
   * start sequence: every row must be listed after it was read, for catch-up to cover changes).
   * A start inside one of the planner's reads (`reads`) is listed from that read's last row: the
   * shard takes the rows before it from the read.
   */
  starts(
    source: Source,
    crawl: CrawlRecord,
    o: { docMode?: Promise<DocMode | null>; after?: Promise<unknown> } = {},
  ): (start: string | null) => void {
    const starts: string[] = [];
    const mode = Promise.all([o.docMode, o.after]).then(([m]) => m ?? null, () => null);
    return (start) => {
      if (start !== null) {
        starts.push(start);
        this.#passed(crawl.id, start);
      }
      this.#track(mode.then((docMode) => {
        if (crawl.docs && docMode !== "include_docs") return;
        const limit = rowsPerPage(crawl, source, { docMode: docMode ?? undefined }) + 1;
        const stop = (last: string) =>
          starts.some((s) =>
            (start === null || compareKeys(s, start) > 0) && compareKeys(s, last) <= 0
          );
        // Documents never come with the planner's reads.
        const read = start !== null && !crawl.docs
          ? this.reads.covering(crawl.id, start)
          : undefined;
        const from = read ? read.rows[read.rows.length - 1].id : start;
        if (read && (read.toEnd || isLongKey(from!) || stop(from!))) return;
        this.list(source, crawl.id, {
          start: from,
          limit,
          pages: Math.min(4, Math.floor(this.#maxRows / crawl.shards / (limit - 1))),
          includeDocs: crawl.docs,
          stop,
          origin: start,
        });
      }));
    };
  }

  /**
   * The answer to the shard's listing `request` from an early page listed from the same start, if
   * there is one and it tells the answer exactly (the entry is used up either way); else, with
   * `source`, from the planner's reads (see {@linkcode PlanReads.answer}: it may ask `source` for
   * the rows before one). Only crawls planned by ranks over `_all_docs` in code-point order may be
   * answered from the planner's reads (`planReads`, @default false). Undefined: ask the registry.
   */
  async take(
    crawlId: string,
    request: ListOptions,
    o: { source?: Listing; planReads?: boolean } = {},
  ): Promise<Page | undefined> {
    this.#sweep();
    if (request.descending || request.skip || request.updateSeq) return undefined;
    const fromReads = () =>
      o.source && o.planReads
        ? this.reads.answer(crawlId, request, { source: o.source })
        : undefined;
    const key = entryKey(crawlId, request.start ?? null, request.includeDocs ?? false);
    const entry = this.#entries.get(key);
    if (!entry) return await fromReads();
    this.#entries.delete(key);
    // Not sent yet: the shard's own request is sooner than waiting for a slot here.
    if (!entry.sent) entry.withdraw();
    const page = await entry.answer;
    this.#held -= entry.limit;
    this.#docBytes -= entry.docBytes;
    return (page ? answerFrom(page, entry.limit, request) : undefined) ?? await fromReads();
  }

  /** Drops every early page and kept read of `crawlId` (its plan failed, or it ended). */
  drop(crawlId: string): void {
    this.reads.drop(crawlId);
    for (const [key, entry] of this.#entries) {
      if (key.startsWith(`${crawlId}\u0000`)) this.#remove(key, entry);
    }
  }

  /**
   * Drops the pages of `crawlId` that chains listed past `start` before it was known: they begin
   * inside the shard that starts there, where no shard's request begins (that shard lists from
   * its start, in pages of its own), so nothing would take them before the ttl.
   */
  #passed(crawlId: string, start: string): void {
    for (const [key, entry] of this.#entries) {
      if (!key.startsWith(`${crawlId}\u0000`) || entry.start === null) continue;
      const below = entry.origin === null || compareKeys(entry.origin, start) < 0;
      if (below && compareKeys(entry.start, start) > 0) this.#remove(key, entry);
    }
  }

  #sweep(): void {
    const before = this.#clock.now() - this.#ttlMs;
    for (const [key, entry] of this.#entries) if (entry.at < before) this.#remove(key, entry);
  }

  #remove(key: string, entry: Entry): void {
    entry.withdraw();
    this.#entries.delete(key);
    this.#held -= entry.limit;
    this.#docBytes -= entry.docBytes;
    entry.docBytes = 0;
  }
}

function entryKey(crawlId: string, start: string | null, docs: boolean): string {
  return `${crawlId}\u0000${docs ? "docs" : "keys"}\u0000${JSON.stringify(start)}`;
}

/**
 * What the registry would have answered `request` (same start, an end, a limit) at the moment it
 * answered `page` (listed from that start with no end, `limit` rows asked): its first
 * `request.limit` rows below the end when it has that many; all of them when a row at or past the
 * end shows the range ended within the page (`ended`); all of them when the page was the
 * registry's whole answer (shorter than asked, so its end or its cap). Undefined otherwise (the
 * page ran out before the end and before the limit).
 */
export function answerFrom(page: Page, limit: number, request: ListOptions): Page | undefined {
  const end = request.end ?? null;
  const cut = end === null ? -1 : page.rows.findIndex((r) => compareKeys(r.id, end) >= 0);
  const inRange = cut < 0 ? page.rows : page.rows.slice(0, cut);
  const base = { offset: page.offset, total: page.total };
  if (inRange.length >= request.limit) {
    return { ...base, rows: inRange.slice(0, request.limit) };
  }
  if (cut >= 0) return { ...base, rows: inRange, ended: true };
  if (page.rows.length < (page.limit ?? limit)) return { ...base, rows: inRange };
  return undefined;
}
