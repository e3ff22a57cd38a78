/**
 * The rank search: finds the keys at target ranks over a listing whose offsets are ranks
 * ({@linkcode BoundarySearch}, started in {@linkcode spreadOrder}), over known (key, rank) points
 * ({@linkcode PointSet}), and the fallbacks for listings whose offsets are not ranks (by `skip`, or
 * by one pass). `locate.ts` and the planner above it are its users; rebalancing splits a running
 * shard with {@linkcode findKeysAtRanks}.
 *
 * @module
 */
export {
  BoundarySearch,
  type BoundarySearchOptions,
  findKeysAtRanks,
  WIDE_PAGE_SPAN,
} from "./boundary_search.ts";
export { planByListing, planBySkip, skipWorks } from "./fallback_plans.ts";
export { type Point, PointSet } from "./points.ts";
export { spreadOrder } from "./search_order.ts";
