/**
 * What a CouchDB answer means, checked before anything is taken from it: listings, changes,
 * revision lookups, `_bulk_get` and documents as the server sent them (`couch_answers.ts`: an
 * error body, an HTML page or JSON cut short is told apart from an answer), and a listing with
 * documents read one row at a time (`docs_listing.ts`).
 *
 * @module
 */
export {
  checkBulkGet,
  checkChanges,
  checkKeyRevs,
  checkPage,
  docFromBody,
  oneLine,
  parseJsonAnswer,
  refuseErrorBody,
} from "./couch_answers.ts";
export { parseDocsListing } from "./docs_listing.ts";
