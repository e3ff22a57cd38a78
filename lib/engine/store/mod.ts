/**
 * The store room: the only code that knows where things live in Deno KV. The key layout
 * (`keys.ts`), records of crawls, shards and splits (`records.ts`) and the operations on them
 * (`store.ts`: every multi-key update is one atomic op guarded by versionstamps, every
 * `{ ok: false }` goes back to the caller), a locked file retried and one read-modify-write loop
 * (`kv_ops.ts`), the changes counted per shard range (`range_drift.ts`), KV's limits counted
 * exactly (`kv_limits.ts`), and whether a lease is held, by whom, and whether its owner's process
 * is alive (`leases.ts`).
 *
 * The engine's rooms stand on one another: `store` ← `items` ← `page` ← `crawl` ← `dispatch`; a
 * room imports only rooms below it, through their `mod.ts`.
 *
 * @module
 */
export * from "./store.ts";
export * from "./kv_limits.ts";
export * from "./leases.ts";
