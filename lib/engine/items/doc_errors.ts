/**
 * The documents a crawl could not have (404, 403, bodies that were not JSON, another document's
 * answer…), page by page: they are item records (`item_codec.ts`) whose `error` is set, never in
 * blocks, so a page reads records only, a bounded number per call.
 *
 * @module
 */
import { InputError } from "../../base/errors.ts";
import { keys } from "../store/mod.ts";
import { decodeItem } from "./item_codec.ts";

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

/** The cursor after the record keyed `part`: its kind and bytes in base64url. */
function encodeCursor(part: Deno.KvKeyPart): string {
  const bytes = typeof part === "string" ? new TextEncoder().encode(part) : part as Uint8Array;
  const b64 = btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
  return (typeof part === "string" ? "s" : "b") + b64;
}

/** The record key part a cursor is after. @throws InputError for one that is not ours */
function decodeCursor(cursor: string): Deno.KvKeyPart {
  const m = /^([sb])([A-Za-z0-9_-]*)$/.exec(cursor);
  if (m === null) throw new InputError("cursor is malformed");
  try {
    const bin = atob(m[2].replaceAll("-", "+").replaceAll("_", "/"));
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return m[1] === "b" ? bytes : new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch (err) {
    throw new InputError("cursor is malformed", { cause: err });
  }
}

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
  const after = options.cursor === undefined ? null : decodeCursor(options.cursor);
  const selector = after === null ? { prefix } : { prefix, start: [...prefix, after] };
  const errors: DocError[] = [];
  let scanned = 0;
  for await (const e of kv.list<Uint8Array>(selector, { batchSize: 500 })) {
    const part = e.key[2];
    if (after !== null && scanned === 0 && samePart(part, after)) continue; // the cursor's own
    scanned++;
    const r = decodeItem(e.value);
    if (r.error) {
      const id = r.id ?? (typeof part === "string" ? part : "");
      errors.push({ id, status: r.error.status, reason: r.error.reason });
    }
    if (errors.length === options.limit || scanned === MAX_SCAN) {
      return { errors, cursor: encodeCursor(part) };
    }
  }
  return { errors, cursor: null };
}

function samePart(a: Deno.KvKeyPart, b: Deno.KvKeyPart): boolean {
  if (typeof a === "string" || typeof b === "string") return a === b;
  const x = a as Uint8Array;
  const y = b as Uint8Array;
  return x.length === y.length && x.every((v, i) => v === y[i]);
}
