/**
 * Smaller documents: only the top-level fields a crawl keeps (`--doc-fields name,versions,time`,
 * checked by `buildSpec`; `_id` and `_rev` always), so that a mirror of what one needs is a fraction of npm's documents.
 * A document is cut as it arrives, before it is held or stored: its JSON parsed, the fields kept
 * in the order given, written again on one line.
 *
 * @module
 */
import type { DocOptions, DocResult } from "../../plan/source.ts";
import { ALWAYS_KEPT } from "../../base/spec.ts";

const dec = new TextDecoder();
const enc = new TextEncoder();

/**
 * `doc` with only `_id`, `_rev` and `fields` (those it has), as one line of JSON; anything that
 * is not a document (an error, `tooLarge`, already stored) as it is.
 */
export function keepFields(doc: DocResult, fields: readonly string[]): DocResult {
  if (doc.kind !== "doc" && doc.kind !== "raw") return doc;
  const whole = JSON.parse(doc.kind === "doc" ? doc.json : dec.decode(doc.bytes));
  const kept: Record<string, unknown> = {};
  for (const f of [...ALWAYS_KEPT, ...fields]) if (Object.hasOwn(whole, f)) kept[f] = whole[f];
  return { kind: "doc", json: JSON.stringify(kept), docRev: doc.docRev };
}

/**
 * `options` for a document request whose answer is cut to `fields` before anything keeps it: a
 * large document is cut first, and handed to `keep` as bytes only when it is still large.
 */
export function keepingFields(options: DocOptions, fields: readonly string[]): DocOptions {
  const { keep, rawOverBytes } = options;
  return {
    rawOverBytes,
    keep: keep &&
      (async (id, raw) => {
        const cut = keepFields(raw, fields);
        return cut.kind === "doc" && cut.json.length > (rawOverBytes ?? Infinity)
          ? await keep(id, { kind: "raw", bytes: enc.encode(cut.json), docRev: raw.docRev })
          : cut;
      }),
  };
}
