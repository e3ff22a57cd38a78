/**
 * Views as string keys: CouchDB view rows `(key, docid)` encoded so that their code point order is
 * the view's row order, under either collation rankcrawl implements (`view_keys.ts`).
 *
 * @module
 */
export * from "./view_keys.ts";
export * from "./row_value.ts";
