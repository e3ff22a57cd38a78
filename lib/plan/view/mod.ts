/**
 * Views as string keys: CouchDB view rows `(key, docid)` encoded so that their code point order is
 * the view's row order, under either collation rankcrawl implements (`view_keys.ts`), and a row's
 * value kept as its revision, or, when long, as a digest with the value stored beside it
 * (`row_value.ts`).
 *
 * @module
 */
export {
  ceilViewRow,
  type Collation,
  compareJson,
  compareViewRows,
  decodeViewRow,
  encodeViewRow,
  type Json,
  type ViewRowKey,
} from "./view_keys.ts";
export { isValueDigest, splitValueBlob, valueBlob, valueRev } from "./row_value.ts";
