/**
 * View rows whose values are too long to be their revisions (`plan/view/row_value.ts`): each
 * such row's value, with its document when one was fetched, becomes the item's stored blob,
 * inline when short, in chunks otherwise (`spillDocument`), over the document cap `tooLarge`.
 *
 * @module
 */
import type { Row } from "../../plan/source.ts";
import { valueBlob } from "../../plan/view/mod.ts";
import { type ItemInput, spillDocument } from "../items/mod.ts";

/** The ids of `rows` that carry a value of their own (their documents must not spill alone). */
export function valuedIds(rows: readonly Row[]): Set<string> {
  return new Set(rows.flatMap((r) => r.value === undefined ? [] : [r.id]));
}

/**
 * `items` (the first rows of `rows`, in order) with each large value stored: its blob holds the
 * value, then the row's document when it was had (a document's error or size is not kept beside
 * a value: the value is).
 */
export async function withValues(
  kv: Deno.Kv,
  crawlId: string,
  rows: readonly Row[],
  items: readonly ItemInput[],
  options: { maxDocBytes: number },
): Promise<ItemInput[]> {
  const out = [...items];
  for (let i = 0; i < out.length; i++) {
    const value = rows[i].value;
    if (value === undefined) continue;
    const d = out[i].doc;
    const doc = d?.kind === "doc" ? d.json : d?.kind === "raw" ? d.bytes : undefined;
    const blob = { kind: "raw" as const, bytes: valueBlob(value, doc), docRev: null };
    out[i] = {
      id: out[i].id,
      rev: out[i].rev,
      doc: await spillDocument(kv, crawlId, { id: out[i].id, doc: blob }, options),
    };
  }
  return out;
}
