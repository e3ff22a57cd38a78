/**
 * The rank-balanced planner: finds the N-1 keys at ranks floor(i·total/N) exactly, so that every
 * shard holds floor or ceil of total/N items, with as few listing requests as possible.
 *
 * How: `startkey=k&limit=m` answers rank(k) and the real keys at ranks rank(k)..rank(k)+m-1. Every
 * answer becomes a known (key, rank) point shared by all boundary searches. Each search brackets its
 * target rank between two known points, interpolates a probe key between them over the alphabet seen
 * so far (safeguarded towards bisection when interpolation stalls), and once the bracket spans at most
 * one page it reads that page and takes the key at the exact rank. Searches run concurrently, in an
 * order that spreads the first probes over the whole key space.
 *
 * @module
 */
import { FatalError, InputError, PermanentError } from "../base/errors.ts";
import { Alphabet, compareKeys, keyBetween } from "./keys.ts";
import { OPEN_END, type Page, type Source } from "./source.ts";
import { Semaphore } from "../base/pool.ts";

/** One shard: keys k with start <= k < end (`null` = open). */
export interface ShardSpec {
  /** First key (inclusive); null = the start of the key space. */
  start: string | null;
  /** End key (exclusive); null = the end of the key space. */
  end: string | null;
  /** Items in [start, end) when planned. */
  items: number;
}

/** A plan, as `deno task plan --json` prints it. */
export interface Plan {
  /** Items in the registry when planned. */
  total: number;
  /** The shards, contiguous, in key order. */
  shards: ShardSpec[];
  /** Listing requests the planner made. */
  requests: number;
  /** How ranks were found: `rank` (offset oracle), `skip`, or `listing` (a full pass). */
  method: "rank" | "skip" | "listing";
  /** Page size used. */
  maxPage: number;
}

/** Options of {@linkcode planShards}. */
export interface PlanOptions {
  /** Largest page to request. @default source.capabilities.maxPage */
  maxPage?: number;
  /** Listing requests in flight at once. @default 8 */
  concurrency?: number;
  /** Probe with a full page once a bracket is at most this many pages wide. @default 100 */
  widePageSpan?: number;
}

/** A key with a known rank. */
export interface Point {
  /** The key. */
  key: string;
  /** Keys sorting before it. */
  rank: number;
  /** True when `key` is a real key (at rank `rank`); false for a probe key (rank = keys below it). */
  real: boolean;
}

/** The target ranks floor(i·total/N) for i = 1..N-1. */
export function targetRanks(total: number, shards: number): number[] {
  const out: number[] = [];
  for (let i = 1; i < shards; i++) out.push(Math.floor((i * total) / shards));
  return out;
}

/** Shards from boundary keys at the target ranks. */
export function shardsFromBoundaries(total: number, keys: string[], ranks: number[]): ShardSpec[] {
  const starts = [null, ...keys];
  const ends = [...keys, null];
  const rs = [0, ...ranks, total];
  return starts.map((start, i) => ({ start, end: ends[i], items: rs[i + 1] - rs[i] }));
}

/** Visits 0..n-1 in an order that halves the gaps: middle first, then quarters, ... */
export function spreadOrder(n: number): number[] {
  const out: number[] = [];
  const seen = new Set<number>();
  for (let step = 1; out.length < n; step *= 2) {
    for (let j = 1; j < 2 * step; j += 2) {
      const i = Math.min(n - 1, Math.floor((j * n) / (2 * step)));
      if (!seen.has(i)) {
        seen.add(i);
        out.push(i);
      }
    }
    if (step > 2 * n) { for (let i = 0; i < n; i++) if (!seen.has(i)) (seen.add(i), out.push(i)); }
  }
  return out;
}

/**
 * Plans `shards` shards of exactly balanced item counts over `source`.
 *
 * Edge cases: an empty source, `shards < 1` or `shards > total` throw {@linkcode InputError}; a
 * source whose `offset` is not a rank (pouchdb-server answers 0) is detected before any boundary is
 * searched and planned by `skip` where the source allows it, else by one pass over the listing;
 * offsets that contradict each other during the search throw {@linkcode FatalError}.
 */
export async function planShards(
  source: Source,
  shards: number,
  options: PlanOptions = {},
): Promise<Plan> {
  if (!Number.isInteger(shards) || shards < 1) {
    throw new InputError(`shard count must be a whole number >= 1, got ${shards}`);
  }
  const maxPage = Math.min(
    options.maxPage ?? source.capabilities.maxPage,
    source.capabilities.maxPage,
  );
  const before = source.requests;
  const first = await source.list({ limit: maxPage });
  const total = first.total;
  if (total === 0 || first.rows.length === 0) throw new InputError("the registry holds no items");
  if (shards > total) {
    throw new InputError(
      `cannot cut ${total} items into ${shards} shards (more shards than items)`,
    );
  }
  const done = (keys: string[], ranks: number[], method: Plan["method"]): Plan => ({
    total,
    shards: shardsFromBoundaries(total, keys, ranks),
    requests: source.requests - before,
    method,
    maxPage,
  });
  const targets = targetRanks(total, shards);
  // The last key bounds the search from above. A source that refuses descending listings gets a
  // virtual point above every key instead, and its rank oracle is checked on the first page.
  const upper = await lastPoint(source, total);
  const probeKey = upper.real ? upper.key : first.rows[1]?.id;
  const probeRank = upper.real ? total - 1 : 1;
  const check = total > 1 && probeKey !== undefined
    ? await source.list({ start: probeKey, limit: 1 })
    : first;
  const rankOk = total <= 1 ||
    (check.offset === probeRank && check.rows[0]?.id === probeKey);
  if (first.offset !== 0 || !rankOk) {
    // The offset is not a rank: binary search would produce a wrong plan.
    if (source.capabilities.skip || await skipWorks(source, first)) {
      const keys = await planBySkip(source, targets, maxPage, options.concurrency ?? 8);
      return done(keys, targets, "skip");
    }
    const keys = await planByListing(source, targets, maxPage);
    return done(keys, targets, "listing");
  }
  const keys = await searchBoundaries(source, targets, {
    total,
    maxPage,
    pages: [{ start: null, page: first }],
    points: [upper],
    concurrency: options.concurrency ?? 8,
    widePageSpan: options.widePageSpan ?? 100,
  });
  return done(keys, targets, "rank");
}

/**
 * Finds the real key at each target rank between known points (`lower.rank <= t < upper.rank` for
 * every target), with the planner's search. Used by rebalancing to split a running shard's
 * remaining range at its middle rank.
 */
export function findKeysAtRanks(
  source: Source,
  targets: number[],
  options: { lower: Point; upper: Point; maxPage?: number; concurrency?: number },
): Promise<string[]> {
  return searchBoundaries(source, targets, {
    total: options.upper.rank,
    maxPage: Math.min(options.maxPage ?? source.capabilities.maxPage, source.capabilities.maxPage),
    points: [options.lower, options.upper],
    concurrency: options.concurrency ?? 4,
    widePageSpan: 100,
  });
}

/** Finds the key at each target rank with the shared-bracket interpolation search. */
async function searchBoundaries(
  source: Source,
  targets: number[],
  o: {
    total: number;
    maxPage: number;
    /** Answers already in hand (the planner's first page). */
    pages?: { start: string | null; page: Page }[];
    /** Known points: at least one at or below and one above every target. */
    points: Point[];
    /** Read pages downwards from upper points (falls back by itself when refused). @default true */
    descending?: boolean;
    concurrency: number;
    widePageSpan: number;
  },
): Promise<string[]> {
  const alphabet = new Alphabet();
  const points: Point[] = []; // sorted by key; ranks non-decreasing along it
  const found = new Map<number, string>();
  const pool = new Semaphore(Math.max(1, o.concurrency));
  const inflight = new Map<string, Promise<Page>>();

  const indexAfter = (key: string): number => {
    let lo = 0;
    let hi = points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(points[mid].key, key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  // A registry that changes while it is planned (the live npm replica does) makes older answers
  // disagree slightly with newer ones: the newer answer wins and the older points it contradicts
  // are dropped. Only wholesale contradiction means the offsets are not ranks at all.
  let conflicts = 0;
  const conflict = () => {
    if (++conflicts > 50 + 4 * targets.length) throw inconsistent();
  };
  const addPoint = (p: Point) => {
    let i = indexAfter(p.key);
    const prev = points[i - 1];
    if (prev && prev.key === p.key) {
      if (prev.rank === p.rank) {
        prev.real ||= p.real;
        return;
      }
      conflict();
      points.splice(--i, 1);
    }
    while (i > 0 && points[i - 1].rank > p.rank) {
      conflict();
      points.splice(--i, 1);
    }
    while (i < points.length && points[i].rank < p.rank) {
      conflict();
      points.splice(i, 1);
    }
    points.splice(i, 0, p);
  };
  const absorb = (start: string | null, page: Page) => {
    if (start !== null) addPoint({ key: start, rank: page.offset, real: false });
    page.rows.forEach((row, j) => {
      // Only the ends of each answer train the key model: a whole page is one dense local
      // sample and would skew it towards wherever pages happened to be read.
      if (j === 0 || j === page.rows.length - 1) alphabet.addKey(row.id);
      const r = page.offset + j;
      if (j === 0 || j === page.rows.length - 1) addPoint({ key: row.id, rank: r, real: true });
      if (targetSet.has(r)) found.set(r, row.id);
    });
    if (page.rows.length === 0 && page.offset !== page.total && start !== null) {
      throw inconsistent();
    }
  };
  const targetSet = new Set(targets);
  // Reading down from a point: row j sits at rank top - j (top = the point's rank when its key is
  // real, one below it otherwise). Offsets of descending answers are not used.
  const absorbDown = (from: Point, page: Page) => {
    const top = from.real ? from.rank : from.rank - 1;
    page.rows.forEach((row, j) => {
      const r = top - j;
      if (j === page.rows.length - 1) {
        alphabet.addKey(row.id);
        addPoint({ key: row.id, rank: r, real: true });
      }
      if (targetSet.has(r)) found.set(r, row.id);
    });
  };
  let descending = o.descending ?? true;
  const listDown = async (from: Point, limit: number) => {
    try {
      absorbDown(
        from,
        await pool.run(() => source.list({ start: from.key, limit, descending: true })),
      );
      return true;
    } catch (err) {
      if (!(err instanceof PermanentError)) throw err;
      descending = false; // refused: search upwards only
      return false;
    }
  };
  const list = (start: string | null, limit: number) => {
    const key = `${start}\u0000${limit}`;
    let p = inflight.get(key);
    if (!p) {
      p = pool.run(() => source.list({ start, limit })).then((page) => {
        absorb(start, page);
        return page;
      });
      inflight.set(key, p);
      // The derived promise only cleans up; callers of `p` see its rejection.
      p.finally(() => inflight.delete(key)).catch(() => {});
    }
    return p;
  };

  for (const p of o.points) {
    addPoint(p);
    alphabet.addKey(p.key);
  }
  for (const { start, page } of o.pages ?? []) absorb(start, page);

  let failed = false; // once one search fails, the others stop at their next step
  const search = async (t: number) => {
    // Illinois-style memory: when the same end of the bracket survives probe after probe, the
    // rank mass sits near it, so its rank is pulled towards t to push the next probe over there.
    let high = 0; // consecutive own probes that landed above t
    let low = 0; // ... below t
    for (let step = 0; !found.has(t) && !failed; step++) {
      if (step > 200) throw new FatalError(`boundary search for rank ${t} did not converge`);
      // Bracket: a = last point with rank <= t (the real one when tied), b = first with rank > t.
      let i = 0;
      let hi = points.length;
      while (i < hi) {
        const mid = (i + hi) >>> 1;
        if (points[mid].rank <= t) i = mid + 1;
        else hi = mid;
      }
      if (i === 0) {
        // Drift removed every point below t: the start of the key space is always rank 0.
        addPoint({ key: "", rank: 0, real: false });
        continue;
      }
      const top = points[i - 1];
      if (i === points.length && !(top.real && top.rank === t)) {
        // Drift removed every point above t: learn the current last key again.
        const last = await pool.run(() => source.list({ descending: true, limit: 1 }));
        if (last.rows.length === 0 || last.total - 1 <= t) throw inconsistent();
        addPoint({ key: last.rows[0].id, rank: last.total - 1, real: true });
        continue;
      }
      const a = points[i - 1];
      const b = points[i];
      if (a.real && a.rank === t) {
        found.set(t, a.key);
        break;
      }
      const width = b.rank - a.rank;
      if (t - a.rank < o.maxPage) {
        await list(a.key, Math.min(o.maxPage, width));
        continue;
      }
      // Within a page below the upper point: one descending page read finishes it.
      const below = b.real ? b.rank - t + 1 : b.rank - t;
      if (descending && below <= o.maxPage && await listDown(b, below)) continue;
      // Aim below t when a full page will be read, so the page likely covers t.
      const wide = width <= o.widePageSpan * o.maxPage;
      const aim = wide ? Math.max(a.rank + 1, t - Math.floor(o.maxPage / 2)) : t;
      const ra = aim - (aim - a.rank) / 2 ** Math.min(8, Math.max(0, high - 1));
      const rb = aim + (b.rank - aim) / 2 ** Math.min(8, Math.max(0, low - 1));
      const f = (aim - ra) / (rb - ra);
      const probe = keyBetween(a.key, b.key, f, alphabet);
      if (probe === null) throw inconsistent();
      const page = await list(probe, wide ? o.maxPage : 1);
      if (page.offset > t) [high, low] = [high + 1, 0];
      else [high, low] = [0, low + 1];
    }
  };
  await Promise.all(
    spreadOrder(targets.length).map((i) =>
      search(targets[i]).catch((err) => {
        failed = true;
        throw err;
      })
    ),
  );
  return targets.map((t) => found.get(t)!);
}

function inconsistent(): FatalError {
  return new FatalError(
    "the registry's offsets contradict each other (not a rank, or the registry changed while planning)",
  );
}

/** The last key at rank total-1, or (descending refused) a virtual point above every key. */
export async function lastPoint(source: Source, total: number): Promise<Point> {
  try {
    const last = await source.list({ descending: true, limit: 1 });
    const key = last.rows[0]?.id;
    if (key === undefined) throw new FatalError("the registry's descending listing is empty");
    return { key, rank: total - 1, real: true };
  } catch (err) {
    if (!(err instanceof PermanentError)) throw err;
    return { key: OPEN_END, rank: total, real: false };
  }
}

/** True when `skip` is accepted and means what it should (probed on the first page). */
async function skipWorks(source: Source, first: Page): Promise<boolean> {
  if (first.rows.length < 2) return false;
  try {
    const page = await source.list({ limit: 1, skip: 1, end: OPEN_END });
    return page.rows[0]?.id === first.rows[1].id;
  } catch (err) {
    if (err instanceof FatalError) throw err;
    return false; // refused (400): plan by listing instead
  }
}

/** Key at each target rank by `skip` (one request per boundary, O(rank) work on the server). */
async function planBySkip(
  source: Source,
  targets: number[],
  _maxPage: number,
  concurrency: number,
): Promise<string[]> {
  const pool = new Semaphore(concurrency);
  return await Promise.all(targets.map((t) =>
    pool.run(async () => {
      const page = await source.list({ limit: 1, skip: t, end: OPEN_END });
      const key = page.rows[0]?.id;
      if (key === undefined) {
        throw new FatalError(`no key at rank ${t} (skip ${t} answered nothing)`);
      }
      return key;
    })
  ));
}

/**
 * Key at each target rank by paging through the whole listing once (about total / maxPage
 * requests). Each request asks for `maxPage` rows and uses the last one only as the next start, so
 * the limit never exceeds what the source accepts.
 */
async function planByListing(
  source: Source,
  targets: number[],
  maxPage: number,
): Promise<string[]> {
  const step = Math.max(1, maxPage - 1);
  const keys: string[] = [];
  let cursor: string | null = null;
  let seen = 0;
  let next = 0;
  while (next < targets.length) {
    const page: Page = await source.list({ start: cursor, end: OPEN_END, limit: step + 1 });
    const rows = page.rows.slice(0, step);
    if (rows.length === 0) break;
    while (next < targets.length && targets[next] < seen + rows.length) {
      keys.push(rows[targets[next] - seen].id);
      next++;
    }
    seen += rows.length;
    if (page.rows.length <= step) break;
    cursor = page.rows[step].id;
  }
  if (keys.length !== targets.length) {
    throw new FatalError(`the listing ended after ${seen} keys, fewer than its total`);
  }
  return keys;
}
