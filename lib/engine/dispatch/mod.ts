/**
 * The dispatch room: how work reaches workers and what a worker does with it. A shard is run under
 * its lease (`shard_runner.ts`) and followed by what comes after it (`work.ts`); work arrives by KV
 * queue messages in one process (`queue_dispatch.ts`, `messages.ts`) or is found by lease workers
 * (`lease_workers.ts`, for Deploy, KV Connect and many processes); `runtime.ts` wires it all once.
 *
 * @module
 */
export * from "./runtime.ts";
export * from "./work.ts";
export * from "./shard_runner.ts";
export * from "./lease_workers.ts";
export * from "./queue_dispatch.ts";
export * from "./messages.ts";
