import assert from "node:assert/strict";
import { LevelGates, spreadOrder } from "../../lib/plan/search/search_order.ts";

/** Whether `p` has settled by the end of the current round of microtasks. */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  p.then(() => done = true);
  await new Promise((r) => setTimeout(r, 0));
  return done;
}

Deno.test("search order: each level waits for every first answer of the level before, counted once", async () => {
  assert.deepEqual(spreadOrder(7), [3, 1, 5, 0, 2, 4, 6]);
  const gates = new LevelGates(7); // levels: position 0 | 1, 2 | 3, 4, 5, 6
  assert.equal(await settled(gates.before(0)), true, "the first level never waits");
  const second = gates.before(1);
  const third = gates.before(5);
  assert.equal(await settled(second), false);
  gates.stepped(0);
  assert.equal(await settled(second), true);
  gates.stepped(1);
  gates.stepped(1); // a search that steps again (or ends after its first answer) counts once
  assert.equal(await settled(third), false, "one of two on the level before has stepped");
  gates.stepped(2);
  assert.equal(await settled(third), true);
  // The last level opens nothing; stepping it is harmless.
  for (const p of [3, 4, 5, 6]) gates.stepped(p);
});
