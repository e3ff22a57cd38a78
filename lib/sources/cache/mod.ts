/**
 * The listing cache: answers a registry gave once (recorded as they passed, or listed ahead),
 * kept a short while as segments of its rows, under one budget and one clock, so that the same
 * rows are not asked for again (`listing_cache.ts`, what it holds counted in `_segment_store.ts`);
 * what one answer tells of others (`segment.ts`).
 *
 * @module
 */
export {
  CACHE_DOC_BYTES,
  CACHE_ROWS,
  ListingCache,
  type ListingCacheOptions,
  type PrefetchOptions,
} from "./listing_cache.ts";
export { MIN_PARTIAL_ROWS, type Segment, segmentAnswer, segmentOf } from "./segment.ts";
