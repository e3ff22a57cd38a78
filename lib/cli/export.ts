/**
 * NDJSON export of a crawl's items: one JSON object a line (`id`, `rev`, and `doc` when fetched,
 * or `error` / `tooLarge`), the shards' ranges read ahead in parallel and written in key order
 * through a buffered writer, so memory stays flat.
 *
 * @module
 */
import {
  crawlItemBatches,
  crawlNdjsonBlocks,
  type ExportedItem,
  findCrawl,
} from "../engine/mod.ts";
import { oneLine } from "../sources/answers/mod.ts";
import type { IdOrder } from "../plan/id_order.ts";
import { shownKey } from "../plan/shown_key.ts";
import { isValueDigest, splitValueBlob } from "../plan/view/mod.ts";

/** Bytes gathered before each write of an export copied out of blocks. */
const WRITE_BYTES = 1 << 20;

/**
 * One NDJSON line of an item (without the newline). An id too long to keep is written cut, with
 * `"idTruncated": true` and its whole `idLength`. A view's row (`view`) is written as
 * `{"key", "id", "value"}`: its stored id is the encoded row and its `rev` the value's JSON (or,
 * for a long value, its digest: the value is then stored with the document). Under
 * a registry's `utf16` id order (`idOrder`), the stored key is mapped back to its id.
 */
export function itemLine(
  it: ExportedItem,
  options: { view?: boolean; idOrder?: IdOrder } = {},
): string {
  const shown = shownKey(it.id, { view: options.view ?? false, idOrder: options.idOrder });
  // A view row's long value is stored with its document (`row_value.ts`).
  const { value, doc } = options.view && isValueDigest(it.rev) && it.doc !== undefined
    ? splitValueBlob(it.doc)
    : { value: it.rev, doc: it.doc };
  let line = options.view
    ? `{"key":${JSON.stringify(shown.key)},"id":${JSON.stringify(shown.id)},"value":${value}`
    : `{"id":${JSON.stringify(shown.id)},"rev":${JSON.stringify(it.rev)}`;
  // Documents are stored on one line; items stored by earlier versions may not be.
  if (doc !== undefined) line += `,"doc":${oneLine(doc)}`;
  if (it.tooLarge) line += `,"tooLarge":true,"docBytes":${it.docBytes}`;
  if (it.error) line += `,"error":${JSON.stringify(it.error)}`;
  if (it.idLength !== undefined) line += `,"idTruncated":true,"idLength":${it.idLength}`;
  return line + "}";
}

/**
 * Writes every item of crawl `id` to `out` as NDJSON; returns the number of lines written. Every
 * line is one JSON value: a document is embedded as the JSON text the registry served, without
 * the line breaks some servers put between its tokens.
 * @throws NotFoundError for an unknown crawl.
 *
 * @example
 * ```ts
 * using kv = await Deno.openKv("crawl.kv");
 * const lines = await exportNdjson(kv, "c6a984ac0266", Deno.stdout.writable);
 * ```
 */
export async function exportNdjson(
  kv: Deno.Kv,
  id: string,
  out: WritableStream<Uint8Array>,
): Promise<number> {
  const crawl = await findCrawl(kv, id);
  const view = crawl?.view !== undefined;
  const idOrder = crawl?.idOrder ?? "codepoint";
  // Lines copied out of blocks show keys: only where keys are the ids themselves.
  const raw = idOrder === "codepoint" ? await crawlNdjsonBlocks(kv, id) : null;
  const writer = out.getWriter();
  const enc = new TextEncoder();
  let n = 0;
  try {
    // All in blocks (keys, or documents stored raw): the lines are copied out of the blocks.
    if (raw) {
      // Blocks' lines go out in writes of about a megabyte: one write a block waited as long.
      let held: Uint8Array[] = [];
      let size = 0;
      const flush = async () => {
        if (size === 0) return;
        const all = new Uint8Array(size);
        let at = 0;
        for (const b of held) (all.set(b, at), at += b.length);
        held = [];
        size = 0;
        await writer.write(all);
      };
      for await (const { bytes, rows } of raw) {
        n += rows;
        held.push(bytes);
        size += bytes.length;
        if (size >= WRITE_BYTES) await flush();
      }
      await flush();
      return n;
    }
    for await (const batch of crawlItemBatches(kv, id)) {
      let text = "";
      for (const it of batch) text += itemLine(it, { view, idOrder }) + "\n";
      n += batch.length;
      await writer.write(enc.encode(text));
    }
  } finally {
    writer.releaseLock();
  }
  return n;
}
