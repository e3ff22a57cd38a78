/**
 * CouchDB views as listings: pages of a view's rows from any `(key, docid)` position, on servers
 * that honour `startkey_docid` and on those that ignore it (`view_listing.ts`, the rows of a page
 * settled in `view_rows.ts`), and which collation a view's keys are in (`view_collation.ts`).
 *
 * @module
 */
export { listViewPage } from "./view_listing.ts";
export { ViewState } from "./view_rows.ts";
export { type GetJson, serverKind, viewCollation } from "./view_collation.ts";
