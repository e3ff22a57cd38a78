/**
 * An in-memory {@linkcode Source} over any {@linkcode MemoryData} (the simulator's registry data is
 * one; {@linkcode MemorySource.fromKeys} makes one from keys), for tests, benchmarks and library
 * users that want the planner's and the engine's logic without HTTP. It answers what the HTTP
 * registry would, and can misbehave the same ways (offsets that are not ranks, no descending
 * listings, a silent cap on page size).
 *
 * @module
 */
import { PermanentError } from "../base/errors.ts";
import { compareKeys, lowerBound, sortKeys } from "../plan/keys.ts";
import {
  type ChangeRow,
  type DocMode,
  type DocResult,
  type LearnedCaps,
  type ListOptions,
  type Page,
  type Row,
  type Source,
  UNKNOWN_CAPS,
} from "../plan/source.ts";

/**
 * What a {@linkcode MemorySource} serves: keys sorted in code point order with revisions,
 * documents, and a change log numbered from 1.
 */
export interface MemoryData {
  /** The keys, sorted (read only). */
  readonly keys: readonly string[];
  /** Number of keys. */
  readonly size: number;
  /** The sequence of the latest change. */
  readonly updateSeq: number;
  /** Number of keys sorting before `key`. */
  rank(key: string): number;
  /** The current revision of `id`, or undefined when absent. */
  rev(id: string): string | undefined;
  /** The document of `id`, or undefined when absent. */
  doc(id: string): Record<string, unknown> | undefined;
  /** Changes after `since`, oldest first, at most `limit`, each id at its latest state. */
  changes(
    since: number,
    limit: number,
  ): { results: { seq: number; id: string; rev: string; deleted: boolean }[]; lastSeq: number };
  /** The feed read backwards, newest first (a feed without it: only `updateSeq` tells its head). */
  changesDescending?(limit: number): { results: { seq: number }[]; lastSeq: number };
  /**
   * How much higher than the state it stands for a sequence is shown (a registry that numbered
   * its changes anew). @default 0
   */
  readonly seqShift?: number;
}

/** Keys that never change: revision `1-…`, a document `{_id, _rev}`, each key one change. */
class FixedKeys implements MemoryData {
  readonly keys: readonly string[];
  constructor(keys: string[]) {
    this.keys = keys;
  }
  get size(): number {
    return this.keys.length;
  }
  get updateSeq(): number {
    return this.keys.length;
  }
  rank(key: string): number {
    return lowerBound(this.keys, key);
  }
  rev(id: string): string | undefined {
    return this.keys[this.rank(id)] === id ? "1-fixed" : undefined;
  }
  doc(id: string): Record<string, unknown> | undefined {
    const rev = this.rev(id);
    return rev === undefined ? undefined : { _id: id, _rev: rev };
  }
  changes(since: number, limit: number) {
    const from = Math.max(0, Math.floor(since));
    const results = this.keys.slice(from, from + limit).map((id, i) => ({
      seq: from + i + 1,
      id,
      rev: "1-fixed",
      deleted: false,
    }));
    return { results, lastSeq: from + results.length };
  }
}

/** Options of {@linkcode MemorySource}. */
export interface MemorySourceOptions {
  /** Largest page accepted; a larger limit is a 400. @default 1000 */
  maxPage?: number;
  /** Pages are cut to this many rows without a word, whatever the limit. @default no cap */
  silentCap?: number;
  /** Whether `skip` is accepted. @default false */
  skip?: boolean;
  /** Answer `offset` like pouchdb-server (0, or = skip) instead of the rank. @default false */
  brokenOffsets?: boolean;
  /** Refuse descending listings (400), as some CouchDB-like servers do. @default false */
  noDescending?: boolean;
  /** How documents are served in bulk. @default "get" */
  docMode?: DocMode;
  /**
   * What listings do with `updateSeq`: `served` (the page carries it) or `ignored` (it never
   * does, as on npm's replica). @default "served"
   */
  listingSeq?: "served" | "ignored";
}

/**
 * A registry listing held in memory.
 *
 * @example
 * ```ts
 * const source = MemorySource.fromKeys(["b", "a", "c", "d"], { maxPage: 2 });
 * const plan = await planShards(source, 2); // two shards of two keys
 * ```
 */
export class MemorySource implements Source {
  readonly description = "memory";
  readonly capabilities: { skip: boolean; maxPage: number };
  #data: MemoryData;
  #o: MemorySourceOptions;
  #limit: number;
  #requests = 0;
  /** Document requests answered (one per `doc`, one per `bulkDocs` call). */
  docRequests = 0;

  /**
   * A source over any keys (sorted by code point and deduplicated here).
   *
   * @example
   * ```ts
   * const plan = await planShards(MemorySource.fromKeys(["b", "a", "c", "d"]), 2);
   * ```
   */
  static fromKeys(keys: Iterable<string>, options: MemorySourceOptions = {}): MemorySource {
    return new MemorySource(new FixedKeys(sortKeys([...new Set(keys)])), options);
  }

  /** Serves `data` as the HTTP registry would. */
  constructor(data: MemoryData, options: MemorySourceOptions = {}) {
    this.#data = data;
    this.#o = options;
    this.#limit = options.maxPage ?? 1000;
    this.capabilities = { skip: options.skip ?? false, maxPage: this.#limit };
  }

  /** Listing requests made. */
  get requests(): number {
    return this.#requests;
  }

  /** See {@linkcode Source.list}. */
  list(options: ListOptions): Promise<Page> {
    this.#requests++;
    const skip = options.skip ?? 0;
    if (skip && !this.capabilities.skip) {
      return Promise.reject(new PermanentError("skip not supported", { status: 400 }));
    }
    if (options.descending && this.#o.noDescending) {
      return Promise.reject(new PermanentError("descending not supported", { status: 400 }));
    }
    if (options.limit > this.#limit) {
      return Promise.reject(
        new PermanentError(`HTTP 400 at memory/_all_docs: limit above ${this.#limit}`, {
          status: 400,
        }),
      );
    }
    const limit = Math.min(options.limit, this.#o.silentCap ?? Infinity);
    const { ids, offset } = options.descending
      ? this.#down(options, skip, limit)
      : this.#up(options, skip, limit);
    return Promise.resolve({
      offset: this.#o.brokenOffsets ? skip : offset,
      total: this.#data.size,
      ...(options.updateSeq && this.#o.listingSeq !== "ignored"
        ? { seq: String(this.#data.updateSeq) }
        : {}),
      rows: ids.map((id): Row => {
        const row: Row = { id, rev: this.#data.rev(id)! };
        if (options.includeDocs) row.doc = this.#doc(id);
        return row;
      }),
    });
  }

  #up(options: ListOptions, skip: number, limit: number): { ids: string[]; offset: number } {
    const keys = this.#data.keys;
    const from = options.start == null ? 0 : this.#data.rank(options.start);
    const to = options.end == null ? keys.length : this.#data.rank(options.end);
    const offset = Math.min(from + skip, keys.length);
    const ids: string[] = [];
    for (let i = offset; i < to && ids.length < limit; i++) ids.push(keys[i]);
    return { ids, offset };
  }

  #down(options: ListOptions, skip: number, limit: number): { ids: string[]; offset: number } {
    const keys = this.#data.keys;
    let from = keys.length - 1;
    if (options.start != null) {
      const r = this.#data.rank(options.start);
      from = r < keys.length && keys[r] === options.start ? r : r - 1;
    }
    const first = from - skip;
    const ids: string[] = [];
    for (let i = first; i >= 0 && ids.length < limit; i--) {
      if (options.end != null && compareKeys(keys[i], options.end) <= 0) break;
      ids.push(keys[i]);
    }
    return { ids, offset: keys.length - 1 - first };
  }

  #doc(id: string): DocResult {
    const doc = this.#data.doc(id);
    return doc
      ? { kind: "doc", json: JSON.stringify(doc) }
      : { kind: "error", status: 404, reason: "not found" };
  }

  /** See {@linkcode Source.doc}. */
  doc(id: string): Promise<DocResult> {
    this.docRequests++;
    return Promise.resolve(this.#doc(id));
  }

  /** See {@linkcode Source.bulkDocs}. */
  bulkDocs(ids: string[]): Promise<DocResult[]> {
    this.docRequests++;
    return Promise.resolve(ids.map((id) => this.#doc(id)));
  }

  /** See {@linkcode Source.learned}: what its options say it serves. */
  get learned(): Readonly<LearnedCaps> {
    return {
      ...UNKNOWN_CAPS,
      listingSeq: this.#o.listingSeq ?? "served",
      docs: this.#o.docMode ?? "get",
    };
  }

  /** See {@linkcode Source.revs}. */
  revs(ids: string[]): Promise<(string | null)[]> {
    this.#requests++;
    return Promise.resolve(ids.map((id) => this.#data.rev(id) ?? null));
  }

  /** See {@linkcode Source.docMode}. */
  docMode(): Promise<DocMode> {
    return Promise.resolve(this.#o.docMode ?? "get");
  }

  /** See {@linkcode Source.updateSeq}. */
  updateSeq(): Promise<string | null> {
    return Promise.resolve(this.#show(this.#data.updateSeq));
  }

  /** See {@linkcode Source.feedHead}: null where the data cannot read its feed backwards. */
  feedHead(): Promise<string | null> {
    const down = this.#data.changesDescending?.(1);
    return Promise.resolve(
      down && down.results.length > 0 ? this.#show(down.results[0].seq) : null,
    );
  }

  /** See {@linkcode Source.changes}. */
  changes(since: string, limit: number): Promise<{ rows: ChangeRow[]; lastSeq: string }> {
    const from = Number(since) - (this.#data.seqShift ?? 0);
    const { results, lastSeq } = this.#data.changes(Math.max(0, from), limit);
    return Promise.resolve({
      rows: results.map((c) => ({
        seq: this.#show(c.seq),
        id: c.id,
        rev: c.rev,
        deleted: c.deleted,
      })),
      // (A sequence past the head is answered as itself, as npm's replica answers it.)
      lastSeq: this.#show(lastSeq),
    });
  }

  /** A sequence as the registry shows it (see `MemoryData.seqShift`). */
  #show(seq: number): string {
    return String(seq + (this.#data.seqShift ?? 0));
  }
}
