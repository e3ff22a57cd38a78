import assert from "node:assert/strict";
import { allSettledOrThrow, mapPool, Semaphore } from "../../lib/base/pool.ts";

Deno.test("pool: mapPool keeps order and never exceeds its concurrency", async () => {
  let active = 0;
  let peak = 0;
  const out = await mapPool([5, 1, 4, 2, 3, 0, 6], async (x) => {
    active++;
    peak = Math.max(peak, active);
    await new Promise((r) => setTimeout(r, x));
    active--;
    return x * 10;
  }, { concurrency: 3 });
  assert.deepEqual(out, [50, 10, 40, 20, 30, 0, 60]);
  assert.equal(peak, 3);
  await assert.rejects(
    () =>
      mapPool([1, 2], (x) => x === 2 ? Promise.reject(new Error("no")) : Promise.resolve(x), {
        concurrency: 2,
      }),
    /no/,
  );
});

Deno.test("pool: a semaphore releases its permit when the work throws", async () => {
  const s = new Semaphore(1);
  await assert.rejects(() => s.run(() => Promise.reject(new Error("x"))));
  assert.equal(await s.run(() => Promise.resolve(7)), 7);
});

Deno.test("pool: after a rejection no call starts, and calls in flight end before the map does", async () => {
  const started: number[] = [];
  let running = 0;
  await assert.rejects(
    () =>
      mapPool([0, 1, 2, 3, 4, 5], async (x) => {
        started.push(x);
        running++;
        try {
          if (x === 0) throw new Error("first fails");
          await new Promise((r) => setTimeout(r, 20));
          return x;
        } finally {
          running--;
        }
      }, { concurrency: 2 }),
    /first fails/,
  );
  assert.equal(running, 0, "nothing of the map runs on after it rejected");
  assert.deepEqual(started, [0, 1], "no call started after the failure");
});

Deno.test("pool: allSettledOrThrow waits for every promise, then rejects with the first failure", async () => {
  let lateDone = false;
  const late = new Promise<number>((r) => setTimeout(() => (lateDone = true, r(2)), 20));
  await assert.rejects(
    () =>
      allSettledOrThrow([Promise.reject(new Error("one")), late, Promise.reject(new Error("two"))]),
    /one/,
  );
  assert.ok(lateDone, "the slow one had settled before the rejection came");
  assert.deepEqual(await allSettledOrThrow([Promise.resolve(1), late]), [1, 2]);
});
