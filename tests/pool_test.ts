import assert from "node:assert/strict";
import { mapPool, Semaphore } from "../lib/base/pool.ts";

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
