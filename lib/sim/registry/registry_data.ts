/**
 * The simulated registry's database: a code-point-sorted key list with revisions, deterministic
 * documents, mutations and a CouchDB-like change log (`update_seq`, `_changes`).
 *
 * @module
 */
import { compareKeys, lowerBound } from "../../plan/keys.ts";
import { prng } from "../names.ts";

/** One change as `_changes` reports it: the latest state of a document. */
export interface Change {
  /** Sequence number. */
  seq: number;
  /** Document id. */
  id: string;
  /** Revision after the change. */
  rev: string;
  /** True for a deletion. */
  deleted: boolean;
}

/** What `churn` may do to the registry. */
export type ChurnKind = "insert" | "update" | "delete";

/** Every churn kind. */
export const CHURN_KINDS: readonly ChurnKind[] = ["insert", "update", "delete"];

/** Options shaping the generated documents. */
export interface DocOptions {
  /** Every document whose id hashes below this share is a large one. @default 0 */
  largeDocRate?: number;
  /** Size of a large document's padding, in bytes. @default 150000 */
  largeDocBytes?: number;
  /**
   * Sizes with a heavy tail, as real package documents have (`heavyTailSize`): most a few KB, 1%
   * of 1-3 MB, 0.1% of 10-12 MB. @default false
   */
  heavyTail?: boolean;
}

/**
 * The padding of a document in a heavy-tailed registry, from its id: 2-8 KB for most, 1-3 MB for
 * 1%, 10-12 MB for 0.1% (stable across runs).
 */
export function heavyTailSize(id: string): number {
  const u = hash32(`tail:${id}`) / 4294967296;
  const v = hash32(`size:${id}`) / 4294967296;
  if (u < 0.001) return Math.floor((10 + 2 * v) * 1024 * 1024);
  if (u < 0.011) return Math.floor((1 + 2 * v) * 1024 * 1024);
  return Math.floor(2048 + 6144 * v);
}

/** FNV-1a over the UTF-16 units of a string; stable across runs. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function revOf(id: string, gen: number, salt = ""): string {
  const a = hash32(`${id}#${gen}${salt}`).toString(16).padStart(8, "0");
  const b = hash32(`${gen}#${id}${salt}`).toString(16).padStart(8, "0");
  return `${gen}-${a}${b}${a.split("").reverse().join("")}${b.slice(0, 8)}`;
}

/**
 * The registry's contents. Keys are held sorted in code point order; rank lookups are binary
 * searches, so `offset` is exact at any size. Mutations keep the order and append to the change log.
 */
export class RegistryData {
  #keys: string[];
  #gens = new Map<string, number>(); // generation > 1 only; absent = 1
  #initial: readonly string[];
  #initialSeq: number;
  #log: (Change | null)[] = []; // changes after the initial load, by seq - initialSeq - 1
  #latest = new Map<string, number>(); // id -> seq of its latest change after the initial load
  // id -> when it last changed (ms) and the revision it had before (undefined: absent then)
  #before = new Map<string, { atMs: number; rev: string | undefined }>();
  #doc: Required<DocOptions>;
  #salt = "";
  #seqShift = 0; // a renumbering: sequences are shown this much above the state they stand for
  #feedFloor = 0; // the feed forgot every change at or below this sequence
  /** Share of changes (by a hash of id and sequence) the feed never shows. @default 0 */
  feedHideRate = 0;
  #hiddenSeqs = new Set<number>();
  /**
   * Share of changes (by a hash of id and sequence) that reach the feed `feedLateMs` late, under
   * their own sequence: a follower that read past it meanwhile never hears of them from there on.
   * @default 0
   */
  feedLateRate = 0;
  /** How late those changes reach the feed, in milliseconds. @default 5000 */
  feedLateMs = 5000;
  #lateUntil = new Map<number, number>(); // seq -> when it shows, epoch ms

  /** Wraps sorted, distinct keys (the array is kept, not copied). */
  constructor(sortedKeys: string[], docOptions: DocOptions = {}) {
    this.#keys = sortedKeys;
    this.#initial = sortedKeys.slice();
    this.#initialSeq = sortedKeys.length;
    this.#doc = { largeDocRate: 0, largeDocBytes: 150_000, heavyTail: false, ...docOptions };
  }

  /**
   * Replaces the whole database by another one over `sortedKeys`, as a restore from a backup or a
   * deleted and recreated database does behind the same URL: revisions start again at generation
   * 1 with `revSalt` (so the same id gets another revision than before) and the change log starts
   * again at the new keys, so `update_seq` goes back to their count.
   */
  replace(sortedKeys: string[], revSalt = "replaced"): void {
    this.#keys = sortedKeys;
    this.#initial = sortedKeys.slice();
    this.#initialSeq = sortedKeys.length;
    this.#gens = new Map();
    this.#log = [];
    this.#latest = new Map();
    this.#before = new Map();
    this.#hiddenSeqs = new Set();
    this.#feedFloor = 0;
    this.#salt = revSalt;
  }

  /**
   * Numbers the sequences anew, the data unchanged (as npm's replica did in May 2025): from now on
   * every sequence is shown `by` higher than before (lower when negative), so that a follower's
   * cursor from the old numbering names another state, or none (above the head: the feed answers
   * it nothing, as npm's does).
   */
  renumber(by: number): void {
    this.#seqShift += by;
  }

  /** How much higher than the state it stands for a sequence is shown (see {@linkcode renumber}). */
  get seqShift(): number {
    return this.#seqShift;
  }

  /**
   * The feed forgets every change up to the current sequence (a feed whose history was cut): a
   * follower asking from before then never hears of them.
   */
  forgetFeed(): void {
    this.#feedFloor = this.updateSeq;
  }

  /** The latest change made (whether the feed shows it or not), or null before any. */
  get lastChange(): Change | null {
    return this.#log.at(-1) ?? null;
  }

  /** The number of changes made so far that the feed never shows. */
  get hiddenChanges(): number {
    return this.#hiddenSeqs.size;
  }

  /** The number of changes made so far that reached (or will reach) the feed late. */
  get lateChanges(): number {
    return this.#lateUntil.size;
  }

  /** True when the feed shows the change at `seq` now (not hidden, forgotten, or late yet). */
  #shown(seq: number): boolean {
    if (seq <= this.#feedFloor || this.#hiddenSeqs.has(seq)) return false;
    const late = this.#lateUntil.get(seq);
    return late === undefined || Date.now() >= late;
  }

  /** Number of live documents (`total_rows`). */
  get size(): number {
    return this.#keys.length;
  }

  /** The sequence number of the latest change. */
  get updateSeq(): number {
    return this.#initialSeq + this.#log.length;
  }

  /** The sorted live keys (read only: do not mutate). */
  get keys(): readonly string[] {
    return this.#keys;
  }

  /** Number of keys sorting strictly before `key`. */
  rank(key: string): number {
    return lowerBound(this.#keys, key);
  }

  /** The current revision of the live document listed at rank `i` (no search). */
  revAt(i: number): string {
    const id = this.#keys[i];
    return revOf(id, this.#gens.get(id) ?? 1, this.#salt);
  }

  /** The current revision of a live document, or undefined. */
  rev(id: string): string | undefined {
    const i = lowerBound(this.#keys, id);
    if (this.#keys[i] !== id) return undefined;
    return revOf(id, this.#gens.get(id) ?? 1, this.#salt);
  }

  /** The document of a live id, generated deterministically from its id and revision. */
  doc(id: string): Record<string, unknown> | undefined {
    const rev = this.rev(id);
    return rev === undefined ? undefined : this.#docAt(id, rev);
  }

  /**
   * The document a host `lagMs` behind serves at `nowMs` (npm's document host lags its feed): for
   * an id changed less than `lagMs` ago, the state it had before that change (undefined where it
   * did not exist); otherwise the current one.
   */
  docBehind(id: string, lagMs: number, nowMs = Date.now()): Record<string, unknown> | undefined {
    const was = this.#before.get(id);
    if (lagMs <= 0 || !was || nowMs - was.atMs >= lagMs) return this.doc(id);
    return was.rev === undefined ? undefined : this.#docAt(id, was.rev);
  }

  #docAt(id: string, rev: string): Record<string, unknown> {
    const h = hash32(id);
    const doc: Record<string, unknown> = {
      _id: id,
      _rev: rev,
      name: id,
      description: `Package ${id}`,
      "dist-tags": { latest: `1.${h % 20}.${h % 7}` },
      versions: { [`1.${h % 20}.${h % 7}`]: { name: id, dist: { shasum: rev.slice(2, 42) } } },
    };
    if (h / 4294967296 < this.#doc.largeDocRate) {
      doc.readme = "x".repeat(this.#doc.largeDocBytes);
    }
    if (this.#doc.heavyTail) doc.readme = "r".repeat(heavyTailSize(id));
    return doc;
  }

  /** Inserts or updates a document; returns its new revision. */
  put(id: string): string {
    this.#before.set(id, { atMs: Date.now(), rev: this.rev(id) });
    const i = lowerBound(this.#keys, id);
    if (this.#keys[i] === id) {
      this.#gens.set(id, (this.#gens.get(id) ?? 1) + 1);
    } else {
      this.#keys.splice(i, 0, id);
      this.#gens.set(id, (this.#gens.get(id) ?? 0) + 1);
    }
    const rev = revOf(id, this.#gens.get(id) ?? 1, this.#salt);
    this.#record(id, rev, false);
    return rev;
  }

  /** Deletes a live document; returns false when it did not exist. */
  delete(id: string): boolean {
    const i = lowerBound(this.#keys, id);
    if (this.#keys[i] !== id) return false;
    this.#before.set(id, { atMs: Date.now(), rev: this.rev(id) });
    this.#keys.splice(i, 1);
    const gen = (this.#gens.get(id) ?? 1) + 1;
    this.#gens.set(id, gen);
    this.#record(id, revOf(id, gen, this.#salt), true);
    return true;
  }

  #record(id: string, rev: string, deleted: boolean): void {
    const prev = this.#latest.get(id);
    if (prev !== undefined) this.#log[prev - this.#initialSeq - 1] = null;
    const seq = this.updateSeq + 1;
    this.#log.push({ seq, id, rev, deleted });
    this.#latest.set(id, seq);
    const u = hash32(`feed:${id}:${seq}`) / 4294967296;
    if (u < this.feedHideRate) this.#hiddenSeqs.add(seq);
    else if (u < this.feedHideRate + this.feedLateRate) {
      this.#lateUntil.set(seq, Date.now() + this.feedLateMs);
    }
  }

  /**
   * Changes with seq > `since`, oldest first, at most `limit`, each id once at its latest state
   * (like CouchDB). Initial documents count as changes 1..initial size, in key order.
   */
  changes(since: number, limit: number): { results: Change[]; lastSeq: number } {
    const results: Change[] = [];
    let seq = Math.max(0, Math.floor(since));
    while (results.length < limit && seq < this.updateSeq) {
      seq++;
      const c = this.#at(seq);
      if (c) results.push(c);
    }
    return { results, lastSeq: seq };
  }

  /** The feed's row at `seq` (the latest change of its id, shown by the feed), or null. */
  #at(seq: number): Change | null {
    if (!this.#shown(seq)) return null;
    if (seq <= this.#initialSeq) {
      const id = this.#initial[seq - 1];
      if (this.#latest.has(id)) return null;
      return { seq, id, rev: revOf(id, 1, this.#salt), deleted: false };
    }
    return this.#log[seq - this.#initialSeq - 1];
  }

  /**
   * The feed read backwards (`_changes?descending=true`): its latest rows first, at most `limit`;
   * `lastSeq` is the sequence of the last row given (0 for an empty feed).
   */
  changesDescending(limit: number): { results: Change[]; lastSeq: number } {
    const results: Change[] = [];
    for (let seq = this.updateSeq; seq > this.#feedFloor && results.length < limit; seq--) {
      const c = this.#at(seq);
      if (c) results.push(c);
    }
    return { results, lastSeq: results.at(-1)?.seq ?? 0 };
  }

  /**
   * Applies `count` random mutations (inserts of new keys, updates, deletions: 40/30/30 among the
   * `kinds` allowed), deterministic for a seed. Used by `--churn` to move the registry under a
   * running crawl.
   */
  churn(
    count: number,
    rand: () => number = prng(7),
    kinds: readonly ChurnKind[] = CHURN_KINDS,
  ): void {
    const weights = { insert: 0.4, update: 0.3, delete: 0.3 };
    const total = kinds.reduce((n, k) => n + weights[k], 0);
    for (let i = 0; i < count && this.#keys.length > 0; i++) {
      let r = rand() * total;
      const kind = kinds.find((k) => (r -= weights[k]) < 0) ?? kinds[kinds.length - 1];
      const pick = this.#keys[Math.floor(rand() * this.#keys.length)];
      if (kind === "insert") this.put(`${pick}-churn-${Math.floor(rand() * 1e9).toString(36)}`);
      else if (kind === "update") this.put(pick);
      else this.delete(pick);
    }
  }

  /** Keys in [start, end) or (end, start] descending, as the listing serves them. */
  slice(from: number, to: number): string[] {
    return this.#keys.slice(from, to);
  }

  /** Asserts the keys are strictly increasing; for tests of generators. */
  checkSorted(): boolean {
    for (let i = 1; i < this.#keys.length; i++) {
      if (compareKeys(this.#keys[i - 1], this.#keys[i]) >= 0) return false;
    }
    return true;
  }
}
