/**
 * The crawl room: a crawl's life as a whole. Creation and planning (`planning.ts`), resuming,
 * pausing, cancelling, failing and deleting (`lifecycle.ts`), catching up with the registry's
 * change feed (`catch_up.ts`), proving it complete (`verify.ts`, `completion.ts` and its rounds in
 * `final_rounds.ts`), keeping work moving after a crash (`watchdog.ts`), splitting stragglers
 * (`rebalance.ts`), what readers see (`status.ts`) and the source a crawl reads (`open_source.ts`).
 *
 * @module
 */
export * from "./planning.ts";
export * from "./lifecycle.ts";
export * from "./catch_up.ts";
export * from "./follow.ts";
export * from "./follow_loop.ts";
export * from "./reprove.ts";
export * from "./verify.ts";
export * from "./completion.ts";
export * from "./watchdog.ts";
export * from "./rebalance.ts";
export * from "./status.ts";
export * from "./open_source.ts";
