/**
 * The documents a crawl could not have (404, 403, bodies that were not JSON, another document's
 * answer…), page by page (pending ones, behind their revision and asked again, are not among them): they are item records (`_item_codec.ts`) whose `error` is set, never in
 * blocks, so a page reads records only, a bounded number per call.
 *
 * @module
 */
import { keys, partOfKey } from "../store/mod.ts";
import { decodeItem } from "./_item_codec.ts";
import { decodePartCursor, encodePartCursor } from "./item_read.ts";
import { comparePart } from "./_item_runs.ts";

/** One document error. */
export interface DocError {
  /** The item's key (its id, or for a view the encoded row). */
  id: string;
  /** The HTTP status the document was answered with (0: no answer, or no URL could name it). */
  status: number;
  /** Why, in a line. */
  reason: string;
}

/** Records read per call at most, errors or not: a page may come back short with a cursor. */
const MAX_SCAN = 5_000;

/**
 * Up to `limit` document errors of crawl `crawlId` in key order, after `cursor` (opaque, from the
 * previous page); the next cursor is null when no record is left. A page reads at most 5,000
 * records, so it may hold fewer than `limit` errors and still have a cursor.
 * @throws InputError for a cursor that is not one of ours
 */
export async function pageDocErrors(
  kv: Deno.Kv,
  crawlId: string,
  options: { limit: number; cursor?: string },
): Promise<{ errors: DocError[]; cursor: string | null }> {
  const prefix = keys.items(crawlId);
  const after = options.cursor === undefined ? null : decodePartCursor(options.cursor);
  const selector = after === null ? { prefix } : { prefix, start: [...prefix, after] };
  const errors: DocError[] = [];
  let scanned = 0;
  for await (const e of kv.list<Uint8Array>(selector, { batchSize: 500 })) {
    const part = partOfKey(e.key) as string | Uint8Array;
    if (after !== null && comparePart(part, after) <= 0) continue; // the cursor's own
    scanned++;
    const r = decodeItem(e.value);
    if (r.error && !r.pending) { // a pending document is asked again, not an error
      const id = r.id ?? (typeof part === "string" ? part : "");
      errors.push({ id, status: r.error.status, reason: r.error.reason });
    }
    if (errors.length === options.limit || scanned === MAX_SCAN) {
      return { errors, cursor: encodePartCursor(part) };
    }
  }
  return { errors, cursor: null };
}
