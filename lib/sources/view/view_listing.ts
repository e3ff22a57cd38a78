/**
 * Listing a CouchDB view as rows of string keys (`lib/plan/view/view_keys.ts`), on any server: one that
 * honours `startkey_docid`/`endkey_docid` (CouchDB, the project's registry) or one that ignores
 * them and starts every listing at the first row of a key (pouchdb-server).
 *
 * The server is asked for a superset, by key (and docid where honoured), and the rows are cut to
 * the exact bounds here, by their encodings. Repeats of a `(key, docid)` pair (a document emitting
 * one key several times) are told apart by their ordinal in the pair, so every row is a distinct
 * key. Inside a run of equal keys on a server that ignores docids, the listing goes on by `skip`
 * from the run's first row; where a position in a run was seen before, the next listing starts
 * there (one row early, to check it still is). A server that ignores docids and refuses `skip`
 * cannot list past a page of one key: that is refused naming what the server lacks.
 *
 * @module
 */
import { FatalError, PermanentError, TransientError } from "../../base/errors.ts";
import type { ListOptions, Page } from "../../plan/source.ts";
import { ceilViewRow, compareJson, valueRev, type ViewRowKey } from "../../plan/view/mod.ts";
import { compareKeys } from "../../plan/keys.ts";
import { checkPage } from "../answers/mod.ts";
import {
  MAX_ROUNDS,
  pairOf,
  type RawAnswer,
  rawAnswer,
  type RawRow,
  type SendView,
  settle,
  type ViewCtx,
  type ViewState,
} from "./view_rows.ts";

/**
 * Lists one page of a view: `o.limit` rows within `[o.start, o.end)` (descending: `(o.end,
 * o.start]`), fewer only where the view has no more. `offset` is the server's offset of its first
 * row plus the rows cut before the start (a rank where the server's offsets are ranks). `skip` is
 * taken only without a start, ascending (how rank-less sources are planned).
 */
export async function listViewPage(
  o: ListOptions,
  ctx: ViewCtx,
): Promise<Page> {
  const desc = o.descending ?? false;
  if ((o.skip ?? 0) > 0 && (desc || o.start != null)) {
    throw new FatalError("a view listing takes skip only from its first row, ascending");
  }
  const collation = ctx.state.collation;
  const start = o.start == null ? null : ceilViewRow(o.start, collation);
  const end = o.end == null ? null : ceilViewRow(o.end, collation);
  // Bounds above every row: nothing at all in that direction.
  if ((o.start != null && start === null && !desc) || (o.end != null && end === null && desc)) {
    return await emptyAtEnd(o, ctx);
  }
  const params: Params = (from, skip, limit) => viewParams(o, { from, end, skip, limit });
  const first = await firstRound(o, start, params, ctx);
  const { rows: raw, pairs } = first;
  const how = {
    o,
    complete: first.complete,
    lead: first.lead,
    description: ctx.description,
    collation,
  };
  let settled = settle(raw, pairs, how);
  for (let round = 1; !how.complete && !settled.ended && settled.rows.length < o.limit; round++) {
    if (round > MAX_ROUNDS) throw new FatalError(`${ctx.description}: a listing made no progress`);
    how.complete = await nextRound(raw, pairs, { o, first, params, ctx });
    settled = settle(raw, pairs, how);
  }
  if (!desc && ctx.state.ignoresDocid && first.globalSkip === null) {
    rememberRuns(raw, pairs, first.runBase, ctx.state);
  }
  const rows = settled.rows.slice(0, o.limit).map(({ raw: r, id }) => listedRow(r, id));
  const offset = typeof first.offset === "number" ? first.offset + settled.before : first.offset;
  return checkPage(
    { total_rows: first.total, offset, rows, update_seq: first.seq },
    o,
    ctx.description,
  );
}

/** The parameters of one view request: from a pair (or the start), to the end pair inclusive. */
function viewParams(
  o: ListOptions,
  at: { from: ViewRowKey | null; end: ViewRowKey | null; skip: number; limit: number },
): URLSearchParams {
  const p = new URLSearchParams();
  if (at.from !== null) {
    p.set("startkey", JSON.stringify(at.from.key));
    p.set("startkey_docid", at.from.docid);
  }
  if (at.end !== null) {
    // Inclusive, by pair: a superset on every server; the exact end is cut here.
    p.set("endkey", JSON.stringify(at.end.key));
    p.set("endkey_docid", at.end.docid);
    p.set("inclusive_end", "true");
  }
  p.set("limit", String(at.limit));
  if (o.descending) p.set("descending", "true");
  if (at.skip > 0) p.set("skip", String(at.skip));
  if (o.includeDocs) p.set("include_docs", "true");
  if (o.updateSeq) p.set("update_seq", "true");
  return p;
}

/** A view row as the `_all_docs`-shaped row `checkPage` takes: id = key = the encoded row. */
function listedRow(r: RawRow, id: string) {
  const v = r.value as Record<string, unknown> | null;
  const linked = typeof v === "object" && v !== null && typeof v._id === "string";
  return {
    id,
    key: id,
    // A long value's digest is its revision; the value goes along (`row_value.ts`).
    value: valueRev(JSON.stringify(r.value ?? null)),
    // The document a row carries: its own, or (null) the one its value links to.
    docid: linked ? null : r.docid,
    ...(r.hasDoc ? { doc: r.doc } : {}),
  };
}

/** The first answer of a listing. */
interface FirstRound extends RawAnswer {
  /** Each row's pair, as in `rows` (later rounds append to both). */
  pairs: string[];
  complete: boolean;
  /** Listed from the view's first row by `skip` (no start key): later rounds go on by `skip`. */
  globalSkip: number | null;
  /** Rows of the first row's key before the first row, when the first row is inside a run. */
  runBase: number;
  /** Rows at the front listed only to tell where the first wanted row's pair begins. */
  lead: number;
}

type Params = (from: ViewRowKey | null, skip: number, limit: number) => URLSearchParams;

async function firstRound(
  o: ListOptions,
  start: ViewRowKey | null,
  params: Params,
  ctx: ViewCtx,
): Promise<FirstRound> {
  const desc = o.descending ?? false;
  const skip = o.skip ?? 0;
  if (start === null) {
    // From the first (or last) row; by `skip`, a few rows early so that the first wanted row's
    // ordinal in its pair is known (the rows before it show where its pair begins).
    for (let back = Math.min(skip, 4);; back = Math.min(skip, back * 4)) {
      const ask = Math.max(1, Math.min(o.limit + back, Math.max(o.limit, ctx.maxPage)));
      const a = rawAnswer(await ctx.send(params(null, skip - back, ask)), ctx.description);
      const pairs = a.rows.map((r) => pairOf(r, ctx));
      const known = skip - back === 0 || pairs.slice(0, back).some((p) => p !== pairs[back]);
      if (!known && back < skip) continue;
      return {
        ...a,
        pairs,
        complete: a.rows.length < ask,
        globalSkip: skip - back,
        runBase: 0,
        lead: back,
      };
    }
  }
  const at = start === null ? null : pairOf(start, ctx);
  const hinted = at === null || desc || !ctx.state.ignoresDocid ? 0 : ctx.state.hints.get(at) ?? 0;
  // The caller's limit plus a few of the pair's rows before the start, within the server's cap
  // (a start between made-up repeats may name an ordinal far above any real one).
  const ask = Math.max(
    1,
    Math.min(o.limit + Math.min(start?.dup ?? 0, 64), Math.max(o.limit, ctx.maxPage)),
  );
  const from = hinted > 0 ? hinted - 1 : 0;
  const a = rawAnswer(await ctx.send(params(start, from, ask)), ctx.description);
  const pairs = a.rows.map((r) => pairOf(r, ctx));
  const head = a.rows[0];
  if (
    start !== null && head !== undefined &&
    compareJson(head.key, start.key, ctx.state.collation) === 0
  ) {
    const c = compareKeys(head.docid, start.docid);
    if (from === 0 && (desc ? c > 0 : c < 0)) ctx.state.ignoresDocid = true;
  }
  if (hinted > 0) {
    // The row before the remembered position must be another pair of the same key; else the view
    // changed: list the run from its first row instead.
    const ok = head !== undefined && compareJson(head.key, start!.key, ctx.state.collation) === 0 &&
      pairs[0] !== at &&
      compareKeys(pairs[0], at!) < 0;
    if (!ok) {
      ctx.state.hints.delete(at!);
      return await firstRound(o, start, params, ctx);
    }
  }
  const complete = a.rows.length < ask;
  return { ...a, pairs, complete, globalSkip: null, runBase: from, lead: 0 };
}

/**
 * One more round after `raw`: from the last row's pair (where docids are honoured; its rows seen
 * are dropped, or skipped when a whole answer was that pair), or from its key's first row by
 * `skip` (where they are not), or by `skip` from the view's first row. Appends to `raw`/`pairs`;
 * true when the server has nothing more.
 */
async function nextRound(
  raw: RawRow[],
  pairs: string[],
  c: {
    o: ListOptions;
    first: FirstRound;
    params: Params;
    ctx: ViewCtx;
  },
): Promise<boolean> {
  const { o, first, params, ctx } = c;
  // Rounds ask for the caller's limit in all, the rows seen again included.
  const ask = Math.max(2, o.limit);
  const last = raw.at(-1)!;
  const lastPair = pairs.at(-1)!;
  let from: ViewRowKey | null = { key: last.key, docid: last.docid };
  let skip: number;
  let drop = 0;
  if (first.globalSkip !== null) {
    from = null;
    skip = first.globalSkip + raw.length;
  } else if (ctx.state.ignoresDocid) {
    skip = runSeen(raw, first.runBase);
  } else {
    const seen = trailing(pairs, (p) => p === lastPair);
    if (seen < ask / 2) [skip, drop] = [0, seen];
    else skip = seen;
  }
  // Going on by skip, one row early: the row there must be the last one seen, or the view
  // changed under the listing (rows inserted or removed before the position shift it).
  const overlap = skip > 0 ? 1 : 0;
  let body: unknown;
  try {
    body = await ctx.send(params(from, skip - overlap, ask + overlap));
  } catch (err) {
    if (skip > 0 && err instanceof PermanentError && err.status === 400) {
      throw new FatalError(
        `${ctx.description}: cannot list past one page of equal keys: the server ` +
          (ctx.state.ignoresDocid ? "ignores startkey_docid and " : "") +
          `refuses skip (${err.message})`,
        { cause: err },
      );
    }
    throw err;
  }
  const a = rawAnswer(body, ctx.description);
  const got = a.rows.map((r) => pairOf(r, ctx));
  for (let i = 0; i < drop; i++) {
    if (got[i] === lastPair) continue;
    // The server went back to the key's first row: it ignores docids. Go on by skip instead.
    if (
      i === 0 && got[0] !== undefined &&
      compareJson(a.rows[0].key, last.key, ctx.state.collation) === 0
    ) {
      ctx.state.ignoresDocid = true;
      return await nextRound(raw, pairs, c);
    }
    throw new TransientError(`${ctx.description}: the view changed while it was listed`);
  }
  if (overlap) {
    const same = got[0] === lastPair &&
      JSON.stringify(a.rows[0].value ?? null) === JSON.stringify(last.value ?? null);
    if (!same) throw new TransientError(`${ctx.description}: the view changed while it was listed`);
    drop = 1;
  }
  raw.push(...a.rows.slice(drop));
  pairs.push(...got.slice(drop));
  return a.rows.length < ask + overlap;
}

/** How many rows at the end of `xs` satisfy `f`. */
function trailing<T>(xs: T[], f: (x: T) => boolean): number {
  let n = 0;
  while (n < xs.length && f(xs[xs.length - 1 - n])) n++;
  return n;
}

/** Rows of the last row's key from its run's first row (the first round began `base` into it). */
function runSeen(raw: RawRow[], base: number): number {
  const key = raw.at(-1)!.key;
  const n = trailing(raw, (r) => compareJson(r.key, key) === 0);
  return n === raw.length ? base + n : n;
}

/** Remembers where the last pairs of `raw` begin in their runs, for the next listing from them. */
function rememberRuns(raw: RawRow[], pairs: string[], base: number, state: ViewState): void {
  let inRun = base;
  for (let i = 0; i < raw.length; i++) {
    if (i > 0 && compareJson(raw[i].key, raw[i - 1].key) !== 0) inRun = 0;
    if ((i === 0 || pairs[i] !== pairs[i - 1]) && i >= raw.length - 3 && inRun > 0) {
      state.hint(pairs[i], inRun);
    }
    inRun++;
  }
}

/** An answer with no rows at the end of the listing (the bound is beyond every row). */
async function emptyAtEnd(
  o: ListOptions,
  ctx: { send: SendView; description: string },
): Promise<Page> {
  const a = rawAnswer(await ctx.send(new URLSearchParams({ limit: "0" })), ctx.description);
  const page = checkPage(
    { total_rows: a.total, offset: a.offset, rows: [] },
    { limit: 0 },
    ctx.description,
  );
  return { offset: o.descending ? 0 : page.total, total: page.total, rows: [] };
}
