import assert from "node:assert/strict";
import {
  checkPlan,
  checkPlanOrigin,
  checkPlanTotal,
  planOrigin,
  readPlanFile,
} from "../../lib/plan/plan_file.ts";
import { InputError } from "../../lib/base/errors.ts";

const good = {
  total: 10,
  shards: [
    { start: null, end: "d", items: 4 },
    { start: "d", end: "k", items: 3 },
    { start: "k", end: null, items: 3 },
  ],
  requests: 5,
  method: "rank",
};

Deno.test("plan file: a valid plan round-trips; broken ones are refused", async () => {
  assert.equal(checkPlan(good).shards.length, 3);
  const bad: [unknown, RegExp][] = [
    [null, /not a JSON object/],
    [{ ...good, total: 0 }, /total/],
    [{ ...good, shards: [] }, /no shards/],
    [{ ...good, shards: [{ start: "a", end: null, items: 1 }] }, /open/],
    [
      { ...good, shards: [good.shards[0], { start: "e", end: null, items: 6 }] },
      /does not start where/,
    ],
    [{
      ...good,
      shards: [good.shards[0], { start: "d", end: "b", items: 1 }, {
        start: "b",
        end: null,
        items: 1,
      }],
    }, /strictly increasing/],
    [{ ...good, shards: [{ start: null, end: null, items: -1 }] }, /items/],
  ];
  for (const [v, re] of bad) {
    assert.throws(() => checkPlan(v), (e: Error) => e instanceof InputError && re.test(e.message));
  }
  const f = await Deno.makeTempFile();
  await Deno.writeTextFile(f, JSON.stringify(good));
  assert.equal((await readPlanFile(f)).total, 10);
  await Deno.writeTextFile(f, "{nope");
  await assert.rejects(() => readPlanFile(f), /not JSON/);
  await Deno.remove(f);
});

Deno.test("plan file: one made for another registry or view is refused, naming both", () => {
  const origin = planOrigin({ sourceUrl: "http://a.example/db", total: 3 });
  assert.deepEqual(origin, { sourceUrl: "http://a.example/db" });
  checkPlanOrigin(origin, { sourceUrl: "http://a.example/db" });
  assert.throws(
    () => checkPlanOrigin(origin, { sourceUrl: "http://b.example/db" }, "p.json"),
    /^InputError: p.json was made for http:\/\/a.example\/db, not http:\/\/b.example\/db$/,
  );
  assert.throws(
    () => checkPlanOrigin(origin, { sourceUrl: "http://a.example/db", view: "d/v" }),
    /was made for _all_docs, not view d\/v/,
  );
  // Files of earlier versions carry no origin: only the view is checked.
  checkPlanOrigin(planOrigin({ total: 3 }), { sourceUrl: "http://c.example/db" });
});

Deno.test("plan file: a plan's total is held against the registry's, within 1%", () => {
  checkPlanTotal(20_000, 20_000);
  checkPlanTotal(20_000, 20_150); // a registry that changes as it is crawled
  assert.throws(
    () => checkPlanTotal(20_000, 10_000, "p.json"),
    /^InputError: p.json was made for 20,000 items; the registry lists 10,000 now/,
  );
  assert.throws(() => checkPlanTotal(3, 5), /made for 3 items/);
});
