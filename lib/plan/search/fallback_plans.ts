/**
 * Plans for sources whose `offset` is not a rank (pouchdb-server answers 0): the key at each target
 * rank by `skip` where the source honours it, else by one pass over the whole listing.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import { allSettledOrThrow, Semaphore } from "../../base/pool.ts";
import { type Listing, OPEN_END, type Page } from "../source.ts";

/** True when `skip` is accepted and means what it should (probed on the first page). */
export async function skipWorks(source: Listing, first: Page): Promise<boolean> {
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
export async function planBySkip(
  source: Listing,
  targets: number[],
  _maxPage: number,
  concurrency: number,
): Promise<string[]> {
  const pool = new Semaphore(concurrency);
  return await allSettledOrThrow(targets.map((t) =>
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
export async function planByListing(
  source: Listing,
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
