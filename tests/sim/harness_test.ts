import assert from "node:assert/strict";
import { checkExported, pairedRatio, rounds, timeTask } from "../../lib/bench/harness.ts";

Deno.test("timeTask sends stdout to a file as a shell redirect would, and checkExported reads the count", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const script = `${dir}/task.ts`;
    await Deno.writeTextFile(
      script,
      'console.log("a b"); console.log(Deno.args.join(",")); console.error("exported 2 items of crawl x");',
    );
    const out = `${dir}/out with space.ndjson`;
    const run = await timeTask(script, ["--kv", "x y"], { stdoutTo: out });
    assert.equal(await Deno.readTextFile(out), "a b\n--kv,x y\n");
    assert.equal(run.stdout, "");
    assert.equal(run.code, 0);
    checkExported(run, 2);
    assert.throws(() => checkExported(run, 3), /export wrote 2 items, expected 3/);

    const piped = await timeTask(script, []);
    assert.equal(piped.stdout, "a b\n\n");
    assert.throws(() => checkExported({ ...piped, stderr: "" }, 2), /no count of/);

    await Deno.writeTextFile(script, 'console.error("boom"); Deno.exit(3);');
    await assert.rejects(timeTask(script, [], { stdoutTo: out }), /failed: boom/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("rounds time every side once a round in order, and ratios are taken within a round", async () => {
  const order: string[] = [];
  // Times grow with the steps taken: the machine slows as the part goes on.
  const t = await rounds(3, {
    peer: () => (order.push("peer"), Promise.resolve(10 * order.length)),
    ours: () => (order.push("ours"), Promise.resolve(5 * order.length)),
  });
  assert.deepEqual(order, ["peer", "ours", "peer", "ours", "peer", "ours"]);
  assert.deepEqual(t, { peer: [10, 30, 50], ours: [10, 20, 30] });
  assert.equal(pairedRatio(t.ours, t.peer), 0.6666666666666666);
  assert.ok(Number.isNaN(pairedRatio([1, 2], [NaN, NaN])), "a side that could not run");
});
