/**
 * The dispatch room: how work reaches workers and what a worker does with it. A shard is run under
 * its lease (`_shard_runner.ts`) and followed by what comes after it (`work.ts`); work arrives by KV
 * queue messages in one process (`_queue_dispatch.ts`, `_messages.ts`) or is found by lease workers
 * (`_lease_workers.ts`, for Deploy, KV Connect and many processes); the watchdog keeps work moving
 * after a crash (`_watchdog.ts`), followed crawls are ticked (`_follow_loop.ts`) and sinks are fed
 * (`_sink_loop.ts`); `runtime.ts`
 * wires it all once, over one environment (`env.ts`: every engine default resolved in one place).
 *
 * @module
 */
export { createRuntime } from "./runtime.ts";
export type { DispatchMode, Runtime, RuntimeOptions } from "./runtime.ts";
export { DEFAULT_WORKERS, MAX_WORKERS } from "./work.ts";
export {
  crawlContext,
  ENGINE_DEFAULTS,
  engineEnv,
  type Env,
  type EnvOptions,
  type WorkEvent,
} from "./env.ts";
export type { FollowConfig } from "./_follow_loop.ts";
export { SINK_POLL_MS, type SinkLoopOptions } from "./_sink_loop.ts";
