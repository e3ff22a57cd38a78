/** The adaptive limit: slow start, halving on pushback, and slots reserved before deciding. */
import assert from "node:assert/strict";
import { AdaptiveLimit } from "../../lib/base/adaptive_limit.ts";
import { nextTurn } from "../fake_clock.ts";

Deno.test("adaptive limit: doubles per round in slow start, halves on pushback, then adds one", async () => {
  const limit = new AdaptiveLimit({ start: 2, max: 16, slowStart: true });
  const ok = () => limit.run(() => Promise.resolve(1));
  await Promise.all([ok(), ok()]);
  assert.equal(limit.value, 4);
  await assert.rejects(() => limit.run(() => Promise.reject(new Error("503"))));
  assert.equal(limit.value, 2);
  await Promise.all([ok(), ok()]);
  assert.equal(limit.value, 3, "after pushback: one more per round");
});

Deno.test("adaptive limit: a reserved slot counts as in flight until it runs or is released", async () => {
  const limit = new AdaptiveLimit({ start: 1, max: 1 });
  const first = await limit.reserve();
  let second = false;
  const waiting = limit.reserve().then((s) => (second = true, s));
  await nextTurn();
  assert.equal(second, false, "the only slot is taken");
  first.release();
  const slot = await waiting;
  assert.equal(second, true);
  first.release(); // a second release frees nothing
  let third = false;
  const after = limit.reserve().then((s) => (third = true, s));
  await nextTurn();
  assert.equal(third, false, "still one in flight");
  assert.equal(await slot.run(() => Promise.resolve("answer")), "answer");
  await assert.rejects(() => slot.run(() => Promise.resolve(2)), /one request/);
  (await after).release();
});
