/**
 * A part of a range proven by its rows: one listing of the whole part is one answer, computed on
 * one state of the registry, so it needs no snapshot of ranks and no quiet moment. A registry that
 * changes faster than a round of rank probes takes (20 changes a second with listings that carry
 * no sequence, as npm's replica serves them) leaves every range undecided by ranks; its parts
 * (`_range_parts.ts`) are decided this way instead.
 *
 * The store holds the registry's items at sequence `at` (the feed applied to there). The listing
 * is answered at a later moment, and the window (the changes after `at`, read after the listing)
 * names every id that may differ between the two states. Every other id must be listed exactly
 * when the store holds it, at the same revision: then the part holds exactly the registry's items
 * but for ids the feed brings up to date (`equal`); an id that differs is a `mismatch` (the part's
 * range is listed again). A listing that fills its limit may hold more rows: `undecided`.
 *
 * @module
 */
import { mapPool } from "../../base/pool.ts";
import type { Source } from "../../plan/source.ts";
import type { StoredRow } from "../items/mod.ts";
import { type ChangeWindow, type RangeToCheck, type RangeVerdict, showKey } from "./_verdicts.ts";

/** Rows a listed check asks for beyond what the store holds (changes may have added some). */
function limitFor(stored: number): number {
  return stored + Math.max(16, Math.ceil(stored / 8));
}

/** True when a part holding `stored` items can be checked by one listing of at most `maxPage`. */
export function listable(stored: number, maxPage: number): boolean {
  return limitFor(stored) <= maxPage;
}

/**
 * Checks each of `ranges` (each {@linkcode listable}) by one listing of it against the items the
 * store holds there (`storedItems`; null: it cannot tell, the range is `undecided`), then reads
 * `window` (see the module comment).
 */
export async function checkListed(
  source: Source,
  ranges: readonly RangeToCheck[],
  o: {
    window: () => Promise<ChangeWindow>;
    storedItems: (range: RangeToCheck) => Promise<StoredRow[] | null>;
    concurrency?: number;
  },
): Promise<RangeVerdict[]> {
  const seen = await mapPool(ranges, async (r) => {
    const limit = limitFor(r.stored);
    const [page, held] = await Promise.all([
      source.list({ start: r.start, end: r.end, limit }),
      o.storedItems(r),
    ]);
    return { r, page, held, full: page.rows.length >= (page.limit ?? limit) };
  }, { concurrency: o.concurrency ?? 16 });
  const window = await o.window();
  const changed = new Set(Array.isArray(window) ? window.map((c) => c.id) : []);
  return seen.map(({ r, page, held, full }): RangeVerdict => {
    const base = { id: r.id, span: page.rows.length, stored: r.stored, margin: 0 };
    if (window === "too-many" || held === null || full) {
      return { ...base, verdict: "undecided", margin: Math.max(1, page.rows.length - r.stored) };
    }
    const listed = new Map(page.rows.map((row) => [row.id, row.rev]));
    const why = differs(listed, held, changed);
    if (why) return { ...base, verdict: "mismatch", why };
    return { ...base, verdict: "equal", span: r.stored };
  });
}

/** Why the rows listed and the rows stored differ on an id no change names, if they do. */
function differs(
  listed: Map<string, string>,
  held: StoredRow[],
  changed: Set<string>,
): string | undefined {
  const stored = new Map(held.map((row) => [row.id, row.rev]));
  for (const [id, rev] of listed) {
    if (changed.has(id)) continue;
    const mine = stored.get(id);
    if (mine === undefined) return `${showKey(id)} is missing (listed by the registry)`;
    if (mine !== rev) {
      return `${showKey(id)} is stored as revision ${mine}, the registry has ${rev}`;
    }
  }
  for (const id of stored.keys()) {
    if (!changed.has(id) && !listed.has(id)) {
      return `${showKey(id)} is stored but the registry does not list it`;
    }
  }
  return undefined;
}
