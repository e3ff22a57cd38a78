/**
 * An in-memory {@linkcode Source} over {@linkcode RegistryData}, for tests and benchmarks that want
 * the planner's logic without HTTP. It answers exactly what the HTTP registry would.
 *
 * @module
 */
import { compareKeys } from "../plan/keys.ts";
import { PermanentError } from "../base/errors.ts";
import type { RegistryData } from "../sim/registry_data.ts";
import type { ChangeRow, DocResult, ListOptions, Page, Source } from "../plan/source.ts";

/** Options of {@linkcode MemorySource}. */
export interface MemorySourceOptions {
  /** Largest page accepted. @default 1000 */
  maxPage?: number;
  /** Whether `skip` is accepted. @default false */
  skip?: boolean;
  /** Answer `offset` like pouchdb-server (0, or = skip) instead of the rank. @default false */
  brokenOffsets?: boolean;
  /** Refuse descending listings (400), as some CouchDB-like servers do. @default false */
  noDescending?: boolean;
}

/** A registry listing held in memory. */
export class MemorySource implements Source {
  readonly description = "memory";
  readonly capabilities: { skip: boolean; maxPage: number };
  #data: RegistryData;
  #broken: boolean;
  #noDescending: boolean;
  #requests = 0;

  /** Serves `data` as the HTTP registry would. */
  constructor(data: RegistryData, options: MemorySourceOptions = {}) {
    this.#data = data;
    this.#broken = options.brokenOffsets ?? false;
    this.#noDescending = options.noDescending ?? false;
    this.capabilities = { skip: options.skip ?? false, maxPage: options.maxPage ?? 1000 };
  }

  get requests(): number {
    return this.#requests;
  }

  list(options: ListOptions): Promise<Page> {
    this.#requests++;
    const keys = this.#data.keys;
    const n = keys.length;
    const skip = options.skip ?? 0;
    if (skip && !this.capabilities.skip) {
      return Promise.reject(new PermanentError("skip not supported", { status: 400 }));
    }
    if (options.descending && this.#noDescending) {
      return Promise.reject(new PermanentError("descending not supported", { status: 400 }));
    }
    if (options.limit > this.capabilities.maxPage) {
      return Promise.reject(new Error(`limit above ${this.capabilities.maxPage}`));
    }
    const ids: string[] = [];
    let offset: number;
    if (!options.descending) {
      const from = options.start == null ? 0 : this.#data.rank(options.start);
      const to = options.end == null ? n : this.#data.rank(options.end);
      offset = Math.min(from + skip, n);
      for (let i = offset; i < to && ids.length < options.limit; i++) ids.push(keys[i]);
    } else {
      let from = n - 1;
      if (options.start != null) {
        const r = this.#data.rank(options.start);
        from = r < n && keys[r] === options.start ? r : r - 1;
      }
      const first = from - skip;
      offset = n - 1 - first;
      for (let i = first; i >= 0 && ids.length < options.limit; i--) {
        if (options.end != null && compareKeys(keys[i], options.end) <= 0) break;
        ids.push(keys[i]);
      }
    }
    if (this.#broken) offset = skip;
    return Promise.resolve({
      offset,
      total: n,
      rows: ids.map((id) => ({ id, rev: this.#data.rev(id)! })),
    });
  }

  doc(id: string): Promise<DocResult> {
    const doc = this.#data.doc(id);
    return Promise.resolve(
      doc ? { ok: true, json: JSON.stringify(doc) } : { ok: false, status: 404, reason: "missing" },
    );
  }

  updateSeq(): Promise<string | null> {
    return Promise.resolve(String(this.#data.updateSeq));
  }

  changes(since: string, limit: number): Promise<{ rows: ChangeRow[]; lastSeq: string }> {
    const { results, lastSeq } = this.#data.changes(Number(since), limit);
    return Promise.resolve({
      rows: results.map((c) => ({ seq: String(c.seq), id: c.id, rev: c.rev, deleted: c.deleted })),
      lastSeq: String(lastSeq),
    });
  }
}
