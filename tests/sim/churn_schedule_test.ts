import { JumpingClock } from "../fake_clock.ts";
import assert from "node:assert/strict";
import { parseChurnSchedule, runChurn } from "../../lib/sim/churn_schedule.ts";
import { dataOf, randomKeys } from "../helpers.ts";

Deno.test("churn schedule: phases parse; a bad one is one line naming it", () => {
  assert.deepEqual(parseChurnSchedule("20x300, 200x60,20"), [
    { perSecond: 20, seconds: 300 },
    { perSecond: 200, seconds: 60 },
    { perSecond: 20, seconds: null },
  ]);
  assert.deepEqual(parseChurnSchedule("0.5x10"), [{ perSecond: 0.5, seconds: 10 }]);
  for (const bad of ["20,200x60", "x5", "20x", "-1x5", "200000x1", ""]) {
    assert.throws(() => parseChurnSchedule(bad), /--churn-schedule: bad phase/, bad);
  }
});

Deno.test("churn schedule: each phase makes exactly its changes, however coarse the clock's looks", async () => {
  const data = dataOf(randomKeys(500, "abcdefgh".split(""), 5, 6));
  const seq0 = data.updateSeq;
  const clock = new JumpingClock(0);
  const seqs: number[] = [];
  const phases: number[] = [];
  await runChurn(data, [{ perSecond: 20, seconds: 3 }, { perSecond: 200, seconds: 1 }], {
    clock,
    lookEveryMs: 37, // looks 37 ms apart
    onChange: (s) => seqs.push(s),
    onPhase: () => phases.push(seqs.length),
  });
  assert.deepEqual(phases, [0, 60], "60 changes in 3 s at 20/s, then the burst");
  assert.equal(seqs.length, 260);
  assert.equal(data.updateSeq, seq0 + 260);
  assert.deepEqual(seqs, seqs.map((_, i) => seq0 + i + 1), "one sequence a change");
});

Deno.test("churn schedule: a last phase without seconds runs until stopped", async () => {
  const data = dataOf(randomKeys(100, "abcdefgh".split(""), 6, 6));
  const clock = new JumpingClock(0);
  const stop = new AbortController();
  let n = 0;
  const seq0 = data.updateSeq;
  await runChurn(data, [{ perSecond: 10, seconds: null }], {
    clock,
    lookEveryMs: 100,
    signal: stop.signal,
    onChange: () => ++n === 50 && stop.abort(),
  });
  assert.equal(n, 50, "no change after the stop");
  assert.equal(data.updateSeq, seq0 + 50);
  assert.equal(clock.now(), 5100, "stopped at its next look");
});
