/**
 * NDJSON export of a crawl's items: one JSON object a line (`id`, `rev`, and `doc` when fetched,
 * or `error` / `tooLarge`), written through a buffered stream so memory stays flat.
 *
 * @module
 */
import { crawlItems } from "../engine/status.ts";

/**
 * Writes every item of crawl `id` to `out` as NDJSON; returns the number of lines written. The
 * document is embedded as the raw JSON text the registry served (byte for byte).
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
  const writer = out.getWriter();
  const enc = new TextEncoder();
  let buf = "";
  let n = 0;
  try {
    for await (const it of crawlItems(kv, id)) {
      let line = `{"id":${JSON.stringify(it.id)},"rev":${JSON.stringify(it.rev)}`;
      if (it.doc !== undefined) line += `,"doc":${it.doc}`;
      if (it.tooLarge) line += `,"tooLarge":true,"docBytes":${it.docBytes}`;
      if (it.error) line += `,"error":${JSON.stringify(it.error)}`;
      buf += line + "}\n";
      n++;
      if (buf.length > 1 << 16) {
        await writer.write(enc.encode(buf));
        buf = "";
      }
    }
    if (buf) await writer.write(enc.encode(buf));
  } finally {
    writer.releaseLock();
  }
  return n;
}
