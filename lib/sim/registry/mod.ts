/**
 * The project's CouchDB-compatible registry, served over HTTP for the demo, the tests and the
 * benches (`registry_server.ts`): its data, which changes as asked (`registry_data.ts`), listings
 * and views as CouchDB, pouchdb-server or npm's replica answer them (`registry_listing.ts`,
 * `registry_view.ts`, `registry_profile.ts`), documents (`registry_docs.ts`), and the faults and
 * hostile answers it can be told to give (`registry_faults.ts`, `registry_hostile.ts`).
 *
 * @module
 */
export { CHURN_KINDS, type ChurnKind, RegistryData } from "./registry_data.ts";
export { ALL_FAULT_KINDS, FAULT_KINDS, type FaultOptions } from "./registry_faults.ts";
export { ALL_BAD_DOC_KINDS, BAD_DOC_KINDS, type HostileOptions } from "./registry_hostile.ts";
export { LISTING_SEQ_KINDS, npmReplicaProfile, type ProfileOptions } from "./registry_profile.ts";
export { type RegistryOptions, type RunningRegistry, startRegistry } from "./registry_server.ts";
export type { FeedControls } from "./registry_feed.ts";
