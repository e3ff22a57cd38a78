/**
 * The CouchDB source over HTTP (`couch_source.ts`): `_all_docs` or a view as a rank-aware listing
 * (`listing_dialect.ts`), documents by id, in bulk or with the listing (`couch_docs.ts`),
 * revisions of many ids at once (`couch_revs.ts`), requests sent in the forms the registry was
 * seen to take (`couch_exchange.ts`, what it learned in `learned_caps.ts`), documents cut to the
 * fields asked for (`doc_fields.ts`).
 *
 * @module
 */
export { CouchSource, type CouchSourceOptions } from "./couch_source.ts";
export { capabilityLine } from "./learned_caps.ts";
