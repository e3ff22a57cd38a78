/**
 * Reading a registry's change feed to its end, and telling that end from a feed that does not know
 * where the crawl stands. Everything a proof rests on here is checked, not trusted:
 *
 * - **The database info may lie.** Its `update_seq` can be stuck (a replica that stopped), served
 *   from a cache, run ahead of the feed's numbering, or spell a state otherwise than the feed's rows
 *   do (a cluster behind a proxy). So a read aims at the feed's own head
 *   (`_changes?descending=true&limit=1`, {@linkcode Source.feedHead}) where the registry answers
 *   it, and at the database info only where it does not; and the feed itself is always read (one
 *   batch at least, however equal the target looks).
 * - **A feed may not know the crawl's sequence.** After a registry numbers its changes anew (npm's
 *   root `update_seq` fell by ~22M in May 2025) a follower's `since` names nothing, and the feed
 *   answers it with no rows, as it answers a follower at its end. An empty answer is taken for the
 *   end only when the target stands at `since`; when the feed's head (read again before the feed
 *   is asked again) is another integer sequence and the feed still gives nothing from `since`,
 *   that is a {@linkcode SinceUnknownError}: the caller re-anchors on the feed's head and proves
 *   every row again (never "0 behind" meanwhile). Opaque sequences (a cluster's) are never judged
 *   by their spelling: there the row sweep is the backstop.
 * - **The end is proven, or the read is bounded.** A short batch is not the end (registries cap
 *   `_changes` per request); the end is an empty batch confirmed as above, `pending: 0`, the target
 *   reached (by `last_seq` or a row's sequence), the feed's head passed (a sequence whose leading
 *   number is at or above the head's: a registry changing faster than a round trip supersedes the
 *   head's own row before it is read), or a batch shorter than the largest this read was given,
 *   asked after the target was read (the feed's head at that moment was reached). A read still
 *   chasing the head after {@linkcode FEED_READ_MAX_MS} stops, `bounded`: whatever lands later is
 *   the next read's, or explained by the window a check reads.
 *
 * @module
 */
import type { Clock } from "../../../base/clock.ts";
import { FatalError } from "../../../base/errors.ts";
import type { ChangeRow, FeedAsk, Source } from "../../../plan/source.ts";

/** Longest a read of the feed goes on before it stops short of the end, in milliseconds. */
export const FEED_READ_MAX_MS = 120_000;

/** Changes asked for per request. */
export const FEED_BATCH = 200;

/**
 * The feed does not know the sequence asked from (`since`): the registry numbered its changes
 * anew, or its database info runs ahead of its feed. Carries the feed's head, where a follower
 * starting now stands. Not a failure of the crawl: the caller re-anchors and proves every row.
 */
export class SinceUnknownError extends FatalError {
  /** Error name. */
  override name = "SinceUnknownError";
  /** The sequence the feed did not know. */
  readonly since: string;
  /** The feed's own head when it was found (its newest change), or the database info's. */
  readonly head: string;
  /** Why, in a few words. */
  constructor(since: string, head: string, why: string) {
    super(`the change feed does not know seq ${since} (${why}; its newest is ${head})`);
    this.since = since;
    this.head = head;
  }
}

/**
 * The number a sequence starts with (CouchDB 2+ seqs are `N-opaque`, older ones and pouchdb's are
 * numbers), or null. Only these numbers can be compared; the rest of a sequence is opaque.
 */
export function seqNumber(seq: string | null | undefined): number | null {
  const m = seq === null || seq === undefined ? null : /^(\d+)/.exec(seq);
  return m ? Number(m[1]) : null;
}

/** A sequence that is a plain integer (npm's, pouchdb-server's, CouchDB 1's), as a number. */
function plainInteger(seq: string | null): number | null {
  return seq !== null && /^\d+$/.test(seq) ? Number(seq) : null;
}

/**
 * True when the feed read up to `seq` has reached `target` (an `update_seq` read earlier): the
 * same sequence (sequences are opaque: never compared by order). Never true without a target.
 */
export function reached(seq: string, target: string | null): boolean {
  return target !== null && seq === target;
}

/**
 * True when a `_changes` answer ends the feed by what it says itself: `pending: 0`, or `target`
 * reached by its `last_seq` or by one of its rows.
 */
export function atEnd(
  answer: { rows: ChangeRow[]; lastSeq: string; pending?: number },
  target: string | null,
): boolean {
  return answer.pending === 0 || reached(answer.lastSeq, target) ||
    (target !== null && answer.rows.some((r) => r.seq === target));
}

/**
 * Where a follower starting now stands, in the feed's own numbering: its head where the source
 * tells it, else the database info's `update_seq` (null: no change feed). A crawl's start
 * sequence, and where a feed that forgot the crawl's sequence is taken up again.
 */
export async function feedAnchor(source: Source): Promise<string | null> {
  const head = await source.feedHead?.().catch(() => null) ?? null;
  return head ?? await source.updateSeq();
}

/**
 * Why the feed, having answered nothing from `since` twice, does not know it, or null when it
 * may be its end: plain integer sequences only. A feed's head numbered below `since` with the
 * database info below it too (a registry numbered anew: both fell; a head alone may sit below a
 * `last_seq` that covered changes the feed does not show), or a head numbered above it (nothing
 * comes after a sequence the feed has passed); where the feed's head cannot be read, a database
 * info below it.
 */
export function sinceUnknown(
  since: string,
  o: { head: string | null; info: string | null },
): string | null {
  const s = plainInteger(since);
  if (s === null) return null;
  const h = plainInteger(o.head);
  const i = plainInteger(o.info);
  if (h !== null && h > s) {
    return "its newest change is numbered above it, yet nothing comes after it";
  }
  if (h !== null && h < s && (i === null || i < s)) {
    return "its newest change is numbered below it: the registry numbered its changes anew";
  }
  if (o.head === null && i !== null && i < s) {
    return "the registry's update_seq is below it: the registry numbered its changes anew";
  }
  return null;
}

/**
 * True when the feed has no change after `since` (its end confirmed as {@linkcode FeedReader}
 * confirms it): nothing the registry holds moved since the store was caught up to `since`.
 * @throws SinceUnknownError when the feed does not know `since`.
 */
export async function feedQuiet(source: Source, since: string, clock: Clock): Promise<boolean> {
  const first = await new FeedReader(source, { clock, batch: 1 }).next(since);
  return first.rows.length === 0;
}

/** One batch of a read: its rows, where it read to, and whether it ends the read. */
export interface FeedBatch {
  /** The changes (oldest first). */
  rows: ChangeRow[];
  /** The sequence the feed was read to (`since` when no row came). */
  lastSeq: string;
  /** The feed's proven end (`end`), the read's bound (`bounded`), or neither (null). */
  end: "end" | "bounded" | null;
}

/**
 * A read of the feed from one sequence to its end (see the module comment); one per pass, since
 * it remembers its target and the largest batch it was given.
 */
export class FeedReader {
  readonly #source: Source;
  readonly #batch: number;
  readonly #clock: Clock;
  readonly #deadline: number;
  readonly #ask: FeedAsk;
  #target: string | null | undefined = undefined;
  #fromHead = false;
  #largest = 0;

  /**
   * A read of `source`'s feed, `batch` changes a request, bounded by `maxMs` on `clock`, each
   * request tried `attempts` times at most (@default the source's own).
   */
  constructor(
    source: Source,
    o: { clock: Clock; batch?: number; maxMs?: number; attempts?: number },
  ) {
    this.#source = source;
    this.#batch = o.batch ?? FEED_BATCH;
    this.#clock = o.clock;
    this.#deadline = o.clock.now() + (o.maxMs ?? FEED_READ_MAX_MS);
    this.#ask = o.attempts === undefined ? {} : { attempts: o.attempts };
  }

  /**
   * Where this read aims, as last read (undefined before the first batch): the feed's head (its
   * newest change) where the source tells it, else the database info's `update_seq`.
   */
  get target(): string | null | undefined {
    return this.#target;
  }

  /** Reads the target: the feed's head, else the database info (see {@linkcode target}). */
  async #readTarget(): Promise<string | null> {
    const head = await this.#source.feedHead?.(this.#ask) ?? null;
    this.#fromHead = head !== null;
    return head ?? await this.#source.updateSeq(this.#ask);
  }

  /**
   * The next batch after `since`.
   * @throws SinceUnknownError when the feed does not know `since`.
   */
  async next(since: string): Promise<FeedBatch> {
    let answer;
    if (this.#target === undefined) {
      // The first look asks both at once: one round trip.
      [this.#target, answer] = await Promise.all([
        this.#readTarget(),
        this.#source.changes(since, this.#batch, this.#ask),
      ]);
    } else {
      answer = await this.#source.changes(since, this.#batch, this.#ask);
    }
    if (answer.rows.length === 0) {
      const more = await this.#afterEmpty(since);
      if (!more) return { rows: [], lastSeq: since, end: "end" };
      answer = more;
    }
    const { rows, lastSeq } = answer;
    if (lastSeq === since) {
      // A feed that answers changes without moving on would be read forever: a broken contract.
      throw new FatalError(
        `${this.#source.description}/_changes answers changes but stays at ${since}`,
      );
    }
    // (Where the registry counts what is pending, it says whether more follow.)
    const short = answer.pending === undefined && rows.length < this.#largest;
    this.#largest = Math.max(this.#largest, rows.length);
    if (atEnd(answer, this.#target) || this.#passed(answer) || short) {
      return { rows, lastSeq, end: "end" };
    }
    if (this.#clock.now() >= this.#deadline) return { rows, lastSeq, end: "bounded" };
    // Short of what was asked without reaching the target: near the head, where the target's own
    // change may have been superseded since; where the head is now says it.
    if (rows.length < this.#batch) this.#target = await this.#readTarget();
    return { rows, lastSeq, end: null };
  }

  /**
   * True when the answer went past the feed's own head as read before it: its last sequence (or a
   * row's) numbered at or above the head's. Only the feed's own head counts (a database info may
   * be stuck: passing it proves nothing); only sequences that start with a number are compared
   * (within one read: a registry that numbered anew is told apart by `SinceUnknownError`).
   */
  #passed(answer: { rows: ChangeRow[]; lastSeq: string }): boolean {
    const head = this.#fromHead ? seqNumber(this.#target) : null;
    if (head === null) return false;
    const at = seqNumber(answer.lastSeq);
    return at !== null && at >= head;
  }

  /**
   * After an empty answer from `since`: null when that is the feed's end; the changes asked again
   * when some came meanwhile. The feed's head is read again before the feed is asked again, so
   * that a change it names was there to be given.
   */
  async #afterEmpty(since: string) {
    if (this.#target === since) return null;
    this.#target = await this.#readTarget();
    if (this.#target === since) return null;
    const again = await this.#source.changes(since, this.#batch, this.#ask);
    if (again.rows.length > 0) return again;
    const head = this.#fromHead ? this.#target : null;
    // A head below `since` is told from a `last_seq` past changes the feed does not show by the
    // database info (asked only then).
    const below = head !== null && (seqNumber(head) ?? 0) < (seqNumber(since) ?? 0);
    const info = this.#fromHead
      ? below ? await this.#source.updateSeq(this.#ask) : null
      : this.#target;
    const why = sinceUnknown(since, { head, info });
    if (why) throw new SinceUnknownError(since, this.#target!, why);
    return null;
  }
}
