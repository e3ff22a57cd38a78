/**
 * What a stored item key stands for, as exports and pages show it: for a view, its row's key and
 * document id (`view/view_keys.ts`); otherwise the document id, mapped back from the key it was
 * carried as where the registry orders ids by UTF-16 unit (`id_order.ts`).
 *
 * @module
 */
import { idOfKey, type IdOrder } from "./id_order.ts";
import { decodeViewRow, type Json } from "./view/mod.ts";

/** The row key (views only) and document id a stored key shows as. */
export function shownKey(
  stored: string,
  o: { view: boolean; idOrder?: IdOrder },
): { key?: Json; id: string } {
  if (!o.view) return { id: idOfKey(stored, o.idOrder) };
  const { key, docid } = decodeViewRow(stored);
  return { key, id: docid };
}
