/**
 * What the listing cache holds: segments per scope, under one budget of rows (reservations for
 * pages listed ahead included) and one of document bytes, each dropped `ttlMs` after it arrived.
 * The cache (`listing_cache.ts`) decides what goes in and what answers; this keeps the count.
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import { compareKeys } from "../../plan/keys.ts";
import type { Page } from "../../plan/source.ts";
import { firstAtOrAbove, remainsOf, type Segment } from "./segment.ts";

/** Bounds of a {@linkcode SegmentStore}. */
export interface StoreBounds {
  /** Rows held or reserved at once, over every scope. */
  maxRows: number;
  /** Bytes of documents held at once, over every scope. */
  maxDocBytes: number;
  /** A segment is dropped this many milliseconds after it arrived. */
  ttlMs: number;
  /** What segments are timed by. */
  clock: Clock;
}

/** Segments per scope within their bounds (see the module comment). */
export class SegmentStore {
  #segments = new Map<string, Segment[]>();
  #heldRows = 0;
  #heldDocBytes = 0;
  #o: StoreBounds;

  /** An empty store. */
  constructor(bounds: StoreBounds) {
    this.#o = bounds;
  }

  /** The most rows held or reserved at once. */
  get maxRows(): number {
    return this.#o.maxRows;
  }

  /** Rows held or reserved now. */
  get heldRows(): number {
    return this.#heldRows;
  }

  /** Bytes of documents held now. */
  get heldDocBytes(): number {
    return this.#heldDocBytes;
  }

  /** Epoch ms before which what arrived is stale. */
  get staleBefore(): number {
    return this.#o.clock.now() - this.#o.ttlMs;
  }

  /** Reserves `rows` of the budget (a page asked for ahead); false when they do not fit. */
  reserve(rows: number): boolean {
    if (this.#heldRows + rows > this.#o.maxRows) return false;
    this.#heldRows += rows;
    return true;
  }

  /** Gives back rows reserved. */
  unreserve(rows: number): void {
    this.#heldRows -= rows;
  }

  /**
   * Keeps `segment` for `scope` within the budget (a document-carrying one over the bytes' budget
   * is dropped at once: never held on speculation). What is left of a segment handed out
   * (`counted: false`) always fits: it was counted already.
   */
  keep(scope: string, segment: Segment | null, o: { counted?: boolean } = {}): void {
    if (!segment) return;
    if (o.counted ?? true) {
      this.sweep();
      if (this.#heldRows + segment.rows.length > this.#o.maxRows) return;
      if (this.#heldDocBytes + segment.docBytes > this.#o.maxDocBytes) return;
    }
    this.#heldRows += segment.rows.length;
    this.#heldDocBytes += segment.docBytes;
    const list = this.#segments.get(scope) ?? [];
    list.push(segment);
    this.#segments.set(scope, list);
  }

  /** Lets `segment` of `scope` go. */
  forget(scope: string, segment: Segment): void {
    const list = this.#segments.get(scope);
    const at = list?.indexOf(segment) ?? -1;
    if (at < 0) return;
    list!.splice(at, 1);
    this.#heldRows -= segment.rows.length;
    this.#heldDocBytes -= segment.docBytes;
    if (list!.length === 0) this.#segments.delete(scope);
  }

  /** Lets every segment of `scope` go. */
  forgetScope(scope: string): void {
    for (const s of [...this.#segments.get(scope) ?? []]) this.forget(scope, s);
  }

  /** Drops what is stale. */
  sweep(): void {
    const before = this.staleBefore;
    for (const [scope, list] of this.#segments) {
      for (const s of list.filter((s) => s.atMs < before)) this.forget(scope, s);
    }
  }

  /**
   * The segment of `scope` holding `key` with the most rows from it, if any (of those whose rows
   * carry documents with `o.docs`, else of those without). What is stale is the caller's to sweep.
   */
  covering(scope: string, key: string, o: { docs?: boolean } = {}): Segment | undefined {
    let best: Segment | undefined;
    let bestLeft = 0;
    for (const s of this.#segments.get(scope) ?? []) {
      if (s.docs !== (o.docs ?? false) || compareKeys(key, s.from) < 0) continue;
      if (compareKeys(key, s.rows[s.rows.length - 1].id) > 0) continue;
      const left = s.rows.length - firstAtOrAbove(s.rows, key);
      if (left > bestLeft) [best, bestLeft] = [s, left];
    }
    return best;
  }

  /** The segment of `scope` without documents starting first above `key`, below `end`. */
  nextAfter(scope: string, key: string, end: string | null): Segment | undefined {
    let best: Segment | undefined;
    for (const s of this.#segments.get(scope) ?? []) {
      if (s.docs || compareKeys(s.from, key) <= 0) continue;
      if (end !== null && compareKeys(s.from, end) >= 0) continue;
      if (!best || compareKeys(s.from, best.from) < 0) best = s;
    }
    return best;
  }

  /**
   * `answer`, told from `segment`, whose rows the taker keeps leave the store: those below `end`
   * (its own), but the last one (its next request starts there).
   */
  handOut(scope: string, segment: Segment, o: { answer: Page; end: string | null }): Page {
    const { answer, end } = o;
    const i = answer.offset - segment.offset;
    let j = i + answer.rows.length - 1;
    if (end !== null) j = Math.min(j, firstAtOrAbove(segment.rows, end, { from: i }));
    if (j <= i) return answer;
    this.forget(scope, segment);
    for (const rest of remainsOf(segment, { from: i, to: j })) {
      this.keep(scope, rest, { counted: false });
    }
    return answer;
  }
}
