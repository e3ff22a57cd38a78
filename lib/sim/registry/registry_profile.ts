/**
 * How the simulated registry plays servers other than a full CouchDB, so that the crawler is tried
 * against what users really point it at: npm's replica since its 2025 migration (GET only, unknown
 * parameters refused, no sequence on listings, documents only from another host, its own database
 * info), a CouchDB behind a read-only proxy (every POST a 405), and a CouchDB 2+ cluster's opaque
 * sequences whose leading number jitters (`N-g1AAAA…`, lower when another shard copy answers).
 *
 * @module
 */
import { prng } from "../names.ts";

/** What a listing does with `update_seq=true`. */
export type ListingSeq = "serve" | "ignore" | "reject";

/** Every way a listing may treat `update_seq=true`. */
export const LISTING_SEQ_KINDS: readonly ListingSeq[] = ["serve", "ignore", "reject"];

/** How the registry departs from a full CouchDB. */
export interface ProfileOptions {
  /** Query parameters a route does not know are a 400 naming them (npm's replica). @default false */
  strictParams?: boolean;
  /**
   * What a listing does with `update_seq=true`: `serve` it (CouchDB), `ignore` it (an answer
   * without one), or `reject` it (a 400 naming it). @default "serve"
   */
  listingSeq?: ListingSeq;
  /** Every POST answers 405 (npm's replica, a read-only proxy). @default false */
  getOnly?: boolean;
  /** `keys` on a GET listing is a 400 naming it (servers older than CouchDB 2). @default false */
  refuseKeys?: boolean;
  /** Sequences are opaque strings as a CouchDB 2+ cluster spells them. @default false */
  opaqueSeq?: boolean;
  /**
   * Share of opaque sequences whose leading number is spelled lower than the state's (another
   * shard copy answered); the state they stand for is the same. @default 0
   */
  seqJitter?: number;
  /** `_changes` answers carry `pending`. @default true */
  pending?: boolean;
  /** The database info (and the root) answer as npm's replica does (`engine: npm-replicate`). */
  npmInfo?: boolean;
  /**
   * Text every sequence is spelled with at its end (a hostile registry's: escape sequences, a
   * forged line), read back without it. @default none
   */
  seqDecoration?: string;
}

/**
 * npm's replica as design.md describes it: `skip` and `include_docs` are a 400, `limit` at most
 * 10,000, no `_bulk_get` and no POST at all, `update_seq` on a listing refused (or, with
 * `listingSeq: "ignore"`, ignored), integer sequences, no `pending`, documents from another host.
 */
export function npmReplicaProfile(listingSeq: ListingSeq = "reject"): ProfileOptions & {
  docsElsewhere: true;
  skip: false;
  includeDocs: false;
  bulkGet: false;
  maxLimit: number;
} {
  return {
    strictParams: true,
    listingSeq,
    getOnly: true,
    pending: false,
    npmInfo: true,
    docsElsewhere: true,
    skip: false,
    includeDocs: false,
    bulkGet: false,
    maxLimit: 10_000,
  };
}

/** `_all_docs` parameters npm's replica takes (design.md). */
const LISTING_PARAMS = new Set([
  "startkey",
  "endkey",
  "start_key",
  "end_key",
  "startkey_docid",
  "start_key_doc_id",
  "inclusive_end",
  "key",
  "keys",
  "descending",
  "limit",
]);

/** `_changes` parameters npm's replica takes (design.md). */
const CHANGES_PARAMS = new Set(["since", "limit", "descending", "doc_ids"]);

/**
 * The first query parameter a strict registry refuses on `route`, or null. `update_seq` on a
 * listing is known only where the profile serves or ignores it.
 */
export function refusedParam(
  route: "listing" | "changes",
  query: Record<string, string>,
  o: ProfileOptions,
): string | null {
  const seq = o.listingSeq ?? "serve";
  for (const name of Object.keys(query)) {
    if (route === "listing" && name === "keys" && o.refuseKeys) return name;
    if (route === "listing" && name === "update_seq") {
      if (seq === "reject") return name;
      continue;
    }
    if (!o.strictParams) continue;
    if (!(route === "listing" ? LISTING_PARAMS : CHANGES_PARAMS).has(name)) return name;
  }
  return null;
}

const OPAQUE = /^(\d+)-g1AAA[AB]([A-Za-z0-9_-]+)$/;

/**
 * Sequences as the registry spells them and reads them back. Plain ones are JSON numbers; opaque
 * ones carry the state's number in their tail (so any spelling of a state reads back as it) behind
 * a leading number that is lower where `seqJitter` says so.
 */
export class SeqCodec {
  #opaque: boolean;
  #jitter: number;
  #rand: () => number;
  #shift: () => number;
  #decoration: string;

  /**
   * A codec for `o` (`seed` makes the jitter repeatable); `shift` tells how far above its state
   * a sequence is shown now (a renumbered registry's, `RegistryData.seqShift`). @default none
   */
  constructor(o: ProfileOptions & { seed?: number; shift?: () => number } = {}) {
    this.#opaque = o.opaqueSeq ?? false;
    this.#jitter = o.seqJitter ?? 0;
    this.#rand = prng((o.seed ?? 42) + 77);
    this.#shift = o.shift ?? (() => 0);
    this.#decoration = o.seqDecoration ?? "";
  }

  /**
   * The JSON value that stands for state `n`; `other`: spelled another way than the feed's rows
   * spell it (a cluster's database info behind a proxy), read back as the same state.
   */
  show(n: number, o: { other?: boolean } = {}): number | string {
    const plain = this.#plain(n, o);
    return this.#decoration ? `${plain}${this.#decoration}` : plain;
  }

  #plain(n: number, o: { other?: boolean }): number | string {
    const shown = n + this.#shift();
    if (!this.#opaque) return shown;
    const lower = shown > 0 && this.#rand() < this.#jitter ? 1 + Math.floor(this.#rand() * 3) : 0;
    const tail = btoa(`rc:${shown}`).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
    return `${Math.max(0, shown - lower)}-g1AAA${o.other ? "B" : "A"}${tail}`;
  }

  /** The JSON text of {@linkcode show}, for answers built by hand. */
  json(n: number): string {
    return JSON.stringify(this.show(n));
  }

  /** The state a `since` names: a plain number, `now` (the caller's), or an opaque spelling. */
  parse(raw: string | undefined, now: number): number | Error {
    if (raw === undefined) return 0;
    if (this.#decoration && raw.endsWith(this.#decoration)) {
      raw = raw.slice(0, -this.#decoration.length);
    }
    if (raw === "now") return now;
    if (/^\d+$/.test(raw)) return Number(raw) - this.#shift();
    const m = OPAQUE.exec(raw);
    if (m) {
      try {
        const inner = atob(m[2].replace(/-/g, "+").replace(/_/g, "/"));
        if (/^rc:\d+$/.test(inner)) return Number(inner.slice(3)) - this.#shift();
      } catch {
        // not ours: refused below
      }
    }
    return new Error(`Malformed sequence supplied in 'since' parameter: ${raw.slice(0, 60)}`);
  }
}
