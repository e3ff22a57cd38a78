/**
 * The pieces of a view listing (`view_listing.ts`): rows as the server sent them, what the server
 * was seen to do, and the rows collected so far encoded with their ordinals and cut to the bounds.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import type { ListOptions } from "../../plan/source.ts";
import { type Collation, encodeViewRow, type Json, type ViewRowKey } from "../../plan/view/mod.ts";
import { compareKeys } from "../../plan/keys.ts";
import { refuseErrorBody } from "../answers/mod.ts";

/** Sends one view request with these parameters and gives back its parsed JSON body. */
export type SendView = (params: URLSearchParams) => Promise<unknown>;

/** One row as the server sent it. */
export interface RawRow {
  key: Json;
  docid: string;
  value: unknown;
  doc?: unknown;
  hasDoc: boolean;
}

/** One answer, checked for shape. */
export interface RawAnswer {
  total: unknown;
  offset: unknown;
  seq: unknown;
  rows: RawRow[];
}

/** What a listing works with. */
export interface ViewCtx {
  /** Sends one request. */
  send: SendView;
  /** What the server was seen to do. */
  state: ViewState;
  /** The source, for messages. */
  description: string;
  /** The largest limit the server takes, as far as known. */
  maxPage: number;
}

/** Most rounds one listing may take before it is refused (each round makes progress). */
export const MAX_ROUNDS = 10_000;
/** Positions in runs remembered per view (`ViewState.hints`). */
const MAX_HINTS = 4_096;

/** What a view's server was seen to do, kept for the life of its source. */
export class ViewState {
  /** The view's collation, once known (`view_collation.ts`): rows are encoded in its order. */
  collation: Collation = "typed";
  /** The server was seen to ignore `startkey_docid` (it lists from a key's first row). */
  ignoresDocid = false;
  /** Where a pair's first row is in its key's run (rows of that key before it), where seen. */
  readonly hints = new Map<string, number>();

  /** Remembers `at` for the pair `pair`, forgetting the oldest beyond {@linkcode MAX_HINTS}. */
  hint(pair: string, at: number): void {
    this.hints.delete(pair);
    this.hints.set(pair, at);
    if (this.hints.size > MAX_HINTS) this.hints.delete(this.hints.keys().next().value!);
  }
}

/** The pair `(key, docid)` as one string (its first row's encoding). */
export function pairOf(r: { key: Json; docid: string }, ctx: ViewCtx): string {
  const description = ctx.description;
  try {
    return encodeViewRow({ key: r.key, docid: r.docid }, ctx.state.collation);
  } catch (err) {
    throw new FatalError(
      `${description}: a row cannot be listed (${(err as Error).message}): ` +
        JSON.stringify(r.docid).slice(0, 200),
      { cause: err },
    );
  }
}

/** A view answer's rows, checked for shape (order and bounds are checked after mapping). */
export function rawAnswer(body: unknown, description: string): RawAnswer {
  const b = refuseErrorBody(body, description, "rows") as Record<string, unknown> | null;
  if (typeof b !== "object" || b === null || !Array.isArray(b.rows)) {
    throw new FatalError(`${description} answered garbage: no rows array (not a view?)`);
  }
  const rows = b.rows.map((r: Record<string, unknown> | null): RawRow => {
    if (typeof r !== "object" || r === null || typeof r.id !== "string" || !("key" in r)) {
      throw new FatalError(`${description} answered garbage: a row is not {id, key, value}`);
    }
    return { key: r.key as Json, docid: r.id, value: r.value, doc: r.doc, hasDoc: "doc" in r };
  });
  return { total: b.total_rows, offset: b.offset, seq: b.update_seq, rows };
}

/** Where the listing stands after the rows collected so far. */
export interface Settled {
  /** Rows within the bounds, in listing order, encoded with their ordinals. */
  rows: { raw: RawRow; id: string }[];
  /** Rows collected before the start bound. */
  before: number;
  /** A row past the end bound was seen: nothing more is wanted. */
  ended: boolean;
}

/**
 * Encodes the rows collected (ordinals counted within each pair; descending, a pair's ordinals
 * are known only once its last row is seen, so an open last pair waits unless `complete`), and
 * cuts them to the bounds. Rows must come in strictly monotone order, or the view is not listed in
 * the collation implemented (or changed while listed).
 */
export function settle(
  raw: RawRow[],
  pairs: string[],
  c: { o: ListOptions; complete: boolean; lead: number; description: string; collation: Collation },
): Settled {
  const { o, complete, description } = c;
  const desc = o.descending ?? false;
  const out: Settled = { rows: [], before: 0, ended: false };
  let prev: string | null = null;
  for (let i = 0; i < raw.length;) {
    let j = i + 1;
    while (j < raw.length && pairs[j] === pairs[i]) j++;
    if (desc && j === raw.length && !complete) break; // the pair may go on below
    for (let k = i; k < j; k++) {
      const dup = desc ? j - 1 - k : k - i;
      const id = encodeViewRow({ ...raw[k], dup } as ViewRowKey, c.collation);
      if (prev !== null && (desc ? compareKeys(prev, id) <= 0 : compareKeys(prev, id) >= 0)) {
        throw new FatalError(
          `${description}: rows are not in the ${c.collation} order rankcrawl implements for ` +
            `it: ${JSON.stringify(raw[k - 1]?.key ?? null)} then ` +
            `${JSON.stringify(raw[k].key)}; see docs/design.md, "Views"`,
        );
      }
      prev = id;
      if (k < c.lead) {
        out.before++; // rows listed early only to tell where the first wanted row's pair begins
        continue;
      }
      const c0 = o.start == null ? (desc ? -1 : 1) : compareKeys(id, o.start);
      if (desc ? c0 > 0 : c0 < 0) {
        out.before++;
        continue;
      }
      const c1 = o.end == null ? (desc ? 1 : -1) : compareKeys(id, o.end);
      if (desc ? c1 <= 0 : c1 >= 0) {
        out.ended = true;
        return out;
      }
      out.rows.push({ raw: raw[k], id });
    }
    i = j;
  }
  return out;
}
