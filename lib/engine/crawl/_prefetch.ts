/**
 * Listing ahead while a crawl is planned: as soon as the planner knows a shard's start, the
 * shard's first pages are listed from there into the process's listing cache, so that a far
 * registry's round trips and serving time overlap the planning (which mostly waits) instead of
 * following it. A shard's start is known as soon as the boundary below it is found (the first
 * shard's at once); its end often is not yet: its pages are listed without an end, and its own
 * requests later take what they tell exactly.
 *
 * @module
 */
import { compareKeys, isLongKey } from "../../plan/keys.ts";
import type { DocMode, Source } from "../../plan/source.ts";
import type { ListingCache } from "../../sources/cache/mod.ts";
import { rowsPerPage } from "../page/mod.ts";
import type { CrawlRecord } from "../store/mod.ts";

/** Pages a shard's chain lists ahead at most. */
const AHEAD_PAGES = 4;

/**
 * What planning calls with each shard's start of `crawl` as soon as it is final (see
 * `PlanOptions.onShardStart`): its first pages are listed ahead from there, as many pages of the
 * shard's own size as an even share of half the cache allows (the planner's reads take about the
 * other half; at most {@linkcode AHEAD_PAGES}), each chain stopping once it passes a start found
 * meanwhile (the next shard's). With documents (`docMode`, once known), only where the listing
 * carries them. Nothing is listed before `after` settles (the crawl's start sequence: every row
 * must be listed after it was read, for catch-up to cover the changes since). A start inside one
 * of the planner's reads is listed from that read's last row: the shard takes the rows before it
 * from the read.
 */
export function listAheadOf(
  cache: ListingCache,
  source: Source,
  o: { crawl: CrawlRecord; docMode?: Promise<DocMode | null>; after?: Promise<unknown> },
): (start: string | null) => void {
  const { crawl } = o;
  const starts: string[] = [];
  const mode = Promise.all([o.docMode, o.after]).then(([m]) => m ?? null, () => null);
  return (start) => {
    if (start !== null) starts.push(start);
    cache.prefetch(
      source,
      crawl.id,
      mode.then((docMode) => {
        if (crawl.docs && docMode !== "include_docs") return null;
        const limit = rowsPerPage(crawl, source, { docMode: docMode ?? undefined }) + 1;
        const stop = (last: string) =>
          starts.some((s) =>
            (start === null || compareKeys(s, start) > 0) && compareKeys(s, last) <= 0
          );
        // Documents never come with the planner's reads.
        const read = start !== null && !crawl.docs ? cache.covering(crawl.id, start) : undefined;
        const from = read ? read.rows[read.rows.length - 1].id : start;
        if (read && (read.toEnd || isLongKey(from!) || stop(from!))) return null;
        const share = Math.floor(cache.maxRows / 2 / crawl.shards / (limit - 1));
        return {
          start: from,
          limit,
          pages: Math.min(AHEAD_PAGES, share),
          includeDocs: crawl.docs,
          stop,
        };
      }),
    );
  };
}
