/**
 * The verify room: the one place that says a shard or a crawl is done. A shard whose page reached
 * its end is checked at once where the registry held still (`shard_end.ts`); a crawl whose shards
 * are all done has its feed applied to a proven end and every range held against the registry's
 * ranks, round after round (`completion.ts`, its rounds in `_final_rounds.ts`, a range that never
 * holds still checked a part at a time in `_range_parts.ts`, registries without ranks row by row
 * in `_listed_check.ts`); a followed crawl applies the feed tick after tick (`follow.ts`) and is
 * proven again, a few ranges' counts at a time (`reprove.ts`) and a few pages of rows at a time
 * (`row_sweep.ts`). Every count is decided by one comparison,
 * `countVerdict` in `_verdicts.ts`.
 *
 * @module
 */
export { checkShardEnd } from "./shard_end.ts";
export { checkCompletion } from "./completion.ts";
export type { FollowContext, VerifyContext } from "./_pass.ts";
export { followPauseMs, followTick, quietTicks } from "./follow.ts";
export type { FollowOptions, FollowTick } from "./follow.ts";
export { VERIFY_EVERY_MS } from "./reprove.ts";
export { differences, VERIFY_ROWS_EVERY_MS } from "./row_sweep.ts";
