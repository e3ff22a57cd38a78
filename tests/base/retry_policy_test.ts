/** The one backoff: schedules and growth, caps, and the three kinds of jitter, exactly. */
import assert from "node:assert/strict";
import { backoff, SHARD_RETRY } from "../../lib/base/retry_policy.ts";

Deno.test("backoff: a schedule's steps by attempt, its last repeating; below 1 counts as 1", () => {
  const schedule = { scheduleMs: SHARD_RETRY.delaysMs, jitter: "none" } as const;
  assert.deepEqual(
    [0, 1, 2, 3, 7, 8, 100].map((n) => backoff(schedule, n)),
    [1_000, 1_000, 2_000, 5_000, 60_000, 60_000, 60_000],
  );
});

Deno.test("backoff: doubling and linear growth stop at the cap", () => {
  const double = { firstMs: 100, maxMs: 1_000, growth: "double", jitter: "none" } as const;
  assert.deepEqual([1, 2, 3, 4, 5, 60].map((n) => backoff(double, n)), [
    100,
    200,
    400,
    800,
    1_000,
    1_000,
  ]);
  const linear = { firstMs: 5, maxMs: 200, growth: "linear", jitter: "none" } as const;
  assert.deepEqual([1, 2, 39, 40, 41].map((n) => backoff(linear, n)), [5, 10, 195, 200, 200]);
});

Deno.test("backoff: full jitter is uniform below the delay, half jitter 0.5-1.5 of it", () => {
  const full = { firstMs: 100, maxMs: 1_000, growth: "double", jitter: "full" } as const;
  assert.equal(backoff(full, 3, () => 0), 0);
  assert.equal(backoff(full, 3, () => 0.5), 200);
  assert.equal(backoff(full, 3, () => 0.999999), 399);
  const half = { scheduleMs: [1_000], jitter: "half" } as const;
  assert.equal(backoff(half, 1, () => 0), 500);
  assert.equal(backoff(half, 1, () => 0.5), 1_000);
  assert.equal(backoff(half, 1, () => 0.999999), 1_500);
});
