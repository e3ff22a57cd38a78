/**
 * Proving a crawl complete on a registry that changes while it is crawled.
 *
 * Where offsets are ranks, the registry says how many keys a shard's range `[start, end)` holds:
 * `rank(end) - rank(start)`. Once the change feed is applied to its proven end (sequence S), the
 * store holds, in every range, the items listed there plus the changes applied there; every item
 * it holds is in the registry at S (listed, and any later change applied). So if a range's stored
 * count equals what the registry lists there at S, the range holds exactly the registry's items.
 *
 * The registry does not stand still while the ranks are read, so each check reads them (all at
 * once), then reads the feed after S without applying it: the changes that landed meanwhile. The
 * changes that can have moved a range's count are those inside it when its span comes from one
 * answer, or from two answers computed on the same state of the registry (the same `update_seq`,
 * which CouchDB and pouchdb-server give with `update_seq=true`; where listings carry none, as on
 * npm's replica, the round's probes are bracketed by two reads of the database's `update_seq`, and
 * equal reads make the whole round one state, {@linkcode probeRound}); otherwise every change
 * below its end (one below its start can move one end and not the other). Sequences are compared
 * for equality only: they are opaque (a cluster's, npm's). A range is decided only by what
 * those changes cannot explain:
 * - none landed: its count is exact at S, and it is `equal` or a `mismatch`;
 * - its count is off by more than they can explain: a `mismatch` whatever they were;
 * - otherwise it is `undecided`, and is checked again after those changes are applied (a range
 *   left undecided twice is checked in parts, `_range_parts.ts`).
 * A mismatch is a range whose listing lost or kept rows: it is listed again, and a range that
 * still disagrees after that fails the crawl with the numbers. Each check also samples the row at
 * every range's start: a row the store holds under another revision (or not at all) that no change
 * explains is a mismatch too (a database replaced by one with as many rows in that range).
 *
 * At a shard's own end (`checkShardEnd`) the same comparison is made early, when the registry has
 * not changed at all since the crawl started: then the shard is proven at once, or listed again
 * before the crawl ends.
 *
 * @module
 */
import { allSettledOrThrow, mapPool } from "../../base/pool.ts";
import { compareKeys, lowerBound } from "../../plan/keys.ts";
import type { ChangeRow, Page, Source } from "../../plan/source.ts";
import { FatalError } from "../../base/errors.ts";
import type { Clock } from "../../base/clock.ts";
import { feedQuiet, SinceUnknownError } from "../crawl/mod.ts";

/** Times a shard's range is listed again after a count that disagrees, before the crawl fails. */
export const MAX_RELISTS = 2;

/** A shard that disagrees with the registry after being listed again. */
export class CompletenessError extends FatalError {
  /** Error name. */
  override name = "CompletenessError";
}

/** Shows a key in a message. */
export function showKey(key: string | null): string {
  return key === null ? "(open)" : JSON.stringify(key.length > 60 ? key.slice(0, 60) + "…" : key);
}

/** The failure of a range that still disagrees after being listed again. */
export function completenessError(
  range: { id: number; start: string | null; end: string | null; relists: number; view?: boolean },
  counts: { stored: number; span: number; why?: string },
  at: string | null,
): CompletenessError {
  return new CompletenessError(
    `shard ${range.id} ${showKey(range.start)} → ${showKey(range.end)} holds ${counts.stored} ` +
      `items but the registry lists ${counts.span} there${at === null ? "" : ` at seq ${at}`}` +
      `${counts.why ? ` (${counts.why})` : ""}, also after listing it again ${range.relists} ` +
      `time(s)` +
      // A view's rows move with every document change and nothing applies those changes: on a
      // live registry the likeliest cause, said so.
      (range.view
        ? "; views have no catch-up, so a view whose rows change while it is crawled cannot be " +
          "proven (docs/design.md, Views)"
        : ""),
  );
}

/** A range as the check needs it: its bounds and what the store holds there. */
export interface RangeToCheck {
  /** Shard id. */
  id: number;
  /** First key; null = open. */
  start: string | null;
  /** End key (exclusive); null = open. */
  end: string | null;
  /** Items the store holds in the range (listed plus changes applied). */
  stored: number;
  /** Times the range was listed again already. */
  relists: number;
}

/** What a check found for one range. */
export interface RangeVerdict {
  /** Shard id. */
  id: number;
  /** `equal`, `mismatch` or `undecided` (see the module comment). */
  verdict: "equal" | "mismatch" | "undecided";
  /** What the registry lists in the range. */
  span: number;
  /** What the store holds there. */
  stored: number;
  /** Changes that landed meanwhile and could move the count (0: the count is exact). */
  margin: number;
  /** Why a mismatch is one, in a few words. */
  why?: string;
}

/**
 * The changes that landed since the store was caught up: read from the feed, or `no-feed` (the
 * registry is taken to have held still), or `too-many` to be worth reading (nothing is decided).
 */
export type ChangeWindow = ChangeRow[] | "no-feed" | "too-many";

/**
 * Checks `ranges` against the registry's ranks, then asks `window` for the changes that landed
 * since the store was caught up. `storedRev` looks a sampled row up in the store. When every rank
 * was computed at `at` itself (the sequence the store is caught up to) and every range agrees, no
 * change can have moved anything: the window is not read (one round trip less at the end of every
 * crawl of a registry that held still).
 */
export async function checkRanges(
  source: Source,
  ranges: readonly RangeToCheck[],
  o: {
    window: () => Promise<ChangeWindow>;
    storedRev: (id: string) => Promise<string | null>;
    sampleStored?: (range: RangeToCheck) => Promise<{ id: string; rev: string }[]>;
    concurrency?: number;
    /** The sequence the store is caught up to; null or absent: unknown. */
    at?: string | null;
    /** Time, for reads of the feed: the environment's. */
    clock: Clock;
  },
): Promise<RangeVerdict[]> {
  const concurrency = o.concurrency ?? 32;
  const bounds = [...new Set(ranges.flatMap((r) => [r.start, r.end]))].filter((b) => b !== null);
  const probes = new Map<string | null, Page>();
  // The ranks and the stored items' revisions are read together; the window is read after both,
  // so that it holds every change either could have seen.
  const storing = storedAgainstRegistry(source, ranges, o.sampleStored, concurrency);
  await allSettledOrThrow<unknown>([
    probeRound(source, [null, ...bounds], { concurrency, at: o.at ?? null, clock: o.clock })
      .then((got) => {
        for (const [b, p] of got) probes.set(b, p);
      }),
    storing,
  ]);
  const seen = { probes, stored: await storing, storedRev: o.storedRev };
  if (o.at && [...probes.values()].every((p) => p.seq === o.at)) {
    const still = await verdictsAgainst(ranges, seen, []);
    if (still.every((v) => v.verdict === "equal")) return still;
  }
  return await verdictsAgainst(ranges, seen, await o.window());
}

/**
 * One listing of one row from each of `bounds` (null: from the start), asked at once: each page's
 * `seq` is the state its rank was computed at where that is known. Listings that carry the
 * sequence say it themselves. Where they do not (ignored or refused, as on npm's replica) and the
 * store is caught up to `at`, the feed is asked once the ranks are read: no change after `at`
 * means every rank was computed at `at`, and every page gets it. (The database info's
 * `update_seq` read before and after is not enough: a stuck or cached one reads the same both
 * times.) Otherwise pages stay without one (not one state).
 * @throws SinceUnknownError when the feed does not know `at`.
 */
export async function probeRound(
  source: Source,
  bounds: readonly (string | null)[],
  o: { concurrency?: number; at?: string | null; clock: Clock },
): Promise<Map<string | null, Page>> {
  const probes = new Map<string | null, Page>();
  await mapPool([...new Set(bounds)], async (b) => {
    probes.set(b, await source.list({ start: b, limit: 1, updateSeq: true }));
  }, { concurrency: o.concurrency ?? 32 });
  const at = o.at ?? null;
  if (at === null || [...probes.values()].every((p) => p.seq !== undefined)) return probes;
  const still = await feedQuiet(source, at, o.clock).catch((err) => {
    if (err instanceof SinceUnknownError) throw err;
    return false; // the feed could not say: not one state
  });
  if (!still) return probes;
  return new Map([...probes].map(([b, p]) => [b, p.seq === undefined ? { ...p, seq: at } : p]));
}

/** Each range's verdict from the ranks and revisions read, given the changes meanwhile. */
async function verdictsAgainst(
  ranges: readonly RangeToCheck[],
  seen: {
    probes: Map<string | null, Page>;
    stored: Map<number, HeldItem[]>;
    storedRev: (id: string) => Promise<string | null>;
  },
  window: ChangeWindow,
): Promise<RangeVerdict[]> {
  const changed = new Set(Array.isArray(window) ? window.map((c) => c.id) : []);
  const sorted = [...changed].sort(compareKeys);
  const below = (key: string | null) => key === null ? sorted.length : lowerBound(sorted, key);
  return await allSettledOrThrow(ranges.map(async (r): Promise<RangeVerdict> => {
    const from = seen.probes.get(r.start)!;
    const to = r.end === null ? undefined : seen.probes.get(r.end)!;
    const span = rangeSpan(r, { from, to });
    // One answer gives both ends of an open-ended range, and two answers computed on the same
    // state of the registry (the same update_seq) count as one: only changes inside the range can
    // have moved its count. Otherwise changes below its start may have moved one end only.
    const snapshot = !to || r.start === null || (from.seq !== undefined && from.seq === to.seq);
    const margin = window === "no-feed"
      ? 0
      : window === "too-many"
      ? Infinity
      : snapshot
      ? below(r.end) - (r.start === null ? 0 : below(r.start))
      : below(r.end);
    const base = { id: r.id, span, stored: r.stored, margin };
    const counted = countVerdict(span, r.stored, margin);
    if (counted === "mismatch") {
      return { ...base, verdict: "mismatch", why: "more than the changes meanwhile explain" };
    }
    const why = staleItem(seen.stored.get(r.id) ?? [], changed) ??
      await staleRow(r, from, changed, seen.storedRev);
    if (why) return { ...base, verdict: "mismatch", why };
    return { ...base, verdict: counted };
  }));
}

/**
 * What the registry lists in a range, from the one-row listings at its bounds (`from` at its
 * start, `to` at its end; either may give the total of an open end): `rank(end) - rank(start)`,
 * the rank of an open start being 0 and that of an open end the total. A count where offsets are
 * ranks.
 */
export function rangeSpan(
  range: { start: string | null; end: string | null },
  at: { from: Pick<Page, "offset" | "total">; to?: Pick<Page, "offset" | "total"> },
): number {
  const high = range.end === null ? (at.to ?? at.from).total : (at.to ?? at.from).offset;
  return high - (range.start === null ? 0 : at.from.offset);
}

/**
 * The one comparison that proves a range's count: `stored` items against the `span` the registry
 * lists there, when at most `margin` changes that landed meanwhile could have moved either. Off
 * by more than the margin: `mismatch`; within a margin above 0: `undecided`; with none: `equal`
 * or `mismatch`. A shard's own end check and every round of the final check decide by it.
 */
export function countVerdict(
  span: number,
  stored: number,
  margin: number,
): "equal" | "mismatch" | "undecided" {
  if (Math.abs(span - stored) > margin) return "mismatch";
  if (margin > 0) return "undecided";
  return span === stored ? "equal" : "mismatch";
}

/** An item the store holds, with the revision the registry has for it now. */
type HeldItem = { id: string; rev: string; now: string | null };

/** Items the store holds at each range's start, with the registry's revisions (one lookup). */
async function storedAgainstRegistry(
  source: Source,
  ranges: readonly RangeToCheck[],
  sample: ((range: RangeToCheck) => Promise<{ id: string; rev: string }[]>) | undefined,
  concurrency: number,
): Promise<Map<number, HeldItem[]>> {
  const stored = new Map<number, { id: string; rev: string }[]>();
  if (!source.revs || !sample) return new Map();
  await mapPool(ranges, async (r) => void stored.set(r.id, await sample(r)), { concurrency });
  const asked = [...stored.values()].flat();
  const now = asked.length > 0 ? await source.revs(asked.map((s) => s.id)) : [];
  const byId = new Map(asked.map((s, i) => [s.id, now[i]]));
  return new Map([...stored].map(([id, items]) => [
    id,
    items.map((it) => ({ ...it, now: byId.get(it.id) ?? null })),
  ]));
}

/** Why a stored item no change explains disagrees with the registry, if one does. */
function staleItem(items: HeldItem[], changed: Set<string>): string | undefined {
  const it = items.find((it) => !changed.has(it.id) && it.now !== it.rev);
  if (!it) return undefined;
  return `${showKey(it.id)} is stored as revision ${it.rev}, the registry ` +
    (it.now === null ? "has no such item" : `has ${it.now}`);
}

/** Why the registry's row at a range's start disagrees with the store, if it does. */
async function staleRow(
  r: RangeToCheck,
  from: Page,
  changed: Set<string>,
  storedRev: (id: string) => Promise<string | null>,
): Promise<string | undefined> {
  const row = r.start === null ? undefined : from.rows[0];
  if (!row || changed.has(row.id) || (r.end !== null && compareKeys(row.id, r.end) >= 0)) {
    return undefined;
  }
  const rev = await storedRev(row.id);
  if (rev === row.rev) return undefined;
  return rev === null
    ? `${showKey(row.id)} is missing`
    : `${showKey(row.id)} is stored as revision ${rev}, the registry has ${row.rev}`;
}

/**
 * Where offsets are not ranks, each shard's stored count against the count its plan found there
 * (the key at each boundary was found by `skip`, or by one pass over the listing): an independent
 * count, valid while the registry holds what it held when planned (the caller checks the total
 * and that no change was seen). A shard that differs is a `mismatch` (listed again); the rest are
 * `equal`.
 */
export function plannedCountVerdicts(
  shards: { id: number; expected: number }[],
  stored: number[],
): RangeVerdict[] {
  return shards.map((s, i) => ({
    id: s.id,
    verdict: stored[i] === s.expected ? "equal" : "mismatch",
    span: s.expected,
    stored: stored[i],
    margin: 0,
    why: "the count its plan found there, the registry unchanged since",
  }));
}

/**
 * The total against `total_rows`, for registries whose offsets are not ranks: `equal` when it
 * matches and nothing changed, `undecided` while changes could explain a difference, `mismatch`
 * beyond them. `id` is -1 (the whole key space).
 */
export async function checkTotal(
  source: Source,
  stored: number[],
  window: () => Promise<ChangeWindow>,
): Promise<RangeVerdict> {
  const page = await source.list({ limit: 1 });
  const w = await window();
  const sum = stored.reduce((a, b) => a + b, 0);
  const margin = w === "no-feed" ? 0 : w === "too-many" ? Infinity : w.length;
  const off = Math.abs(page.total - sum);
  const verdict = off > margin ? "mismatch" : margin > 0 ? "undecided" : "equal";
  return { id: -1, verdict, span: page.total, stored: sum, margin };
}
