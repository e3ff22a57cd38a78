/**
 * Reads a whole key range page by page, the way a plain client would (the benches' baseline).
 *
 * @module
 */
import type { Row, Source } from "../plan/source.ts";

/**
 * Pages through [start, end) with pages of `limit` rows, the last row of each only serving as the
 * next start; `visit` sees each page's rows. Returns the number of rows read.
 */
export async function pageThrough(
  src: Source,
  range: { start: string | null; end: string | null },
  visit: (rows: Row[]) => void = () => {},
  options: { limit?: number } = {},
): Promise<number> {
  const limit = options.limit ?? 1000;
  let cursor = range.start;
  let n = 0;
  for (;;) {
    const page = await src.list({ start: cursor, end: range.end, limit });
    const rows = page.rows.slice(0, limit - 1);
    visit(rows);
    n += rows.length;
    if (page.rows.length < limit) return n;
    cursor = page.rows[limit - 1].id;
  }
}
