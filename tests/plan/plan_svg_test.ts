/** The plan picture: checked by its structure, not by pixels. */
import assert from "node:assert/strict";
import { keyPosition, planSvg } from "../../lib/plan/plan_svg.ts";
import { evenSplitRanks } from "../../lib/plan/baselines.ts";
import { planShards } from "../../lib/plan/planner.ts";
import { bundledNames } from "../../lib/sim/names.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { dataOf, spawnRegistry, taskArgs } from "../helpers.ts";

function count(svg: string, cls: string): number {
  return (svg.match(new RegExp(`class="${cls}"`, "g")) ?? []).length;
}

Deno.test("plan svg: key positions follow key order over printable ASCII", () => {
  const keys = [" ", "!", "0", "9", "@", "@types", "A", "a", "ab", "m", "z", "~"];
  const pos = keys.map(keyPosition);
  for (let i = 1; i < pos.length; i++) assert.ok(pos[i] >= pos[i - 1], keys[i]);
  assert.ok(pos.every((p) => p >= 0 && p < 1));
  assert.equal(keyPosition("\u0001"), 0, "below the axis clamps to its start");
  assert.ok(keyPosition("\u4e2d") < 1, "above it clamps to its end");
});

Deno.test("plan svg: the bundled npm names: pieces, cuts, and the largest share labelled", async () => {
  const data = dataOf(await bundledNames());
  const source = new MemorySource(data, { maxPage: 1000 });
  const plan = await planShards(source, 56);
  const even = await evenSplitRanks(source, 56);
  const cuts = plan.shards.slice(1).map((s) => s.start!);
  const svg = planSvg({ total: plan.total, even, cuts, title: "npm <names> & co" });
  assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  assert.match(svg, /<\/svg>$/);
  assert.equal(count(svg, "even-piece"), even.length + 1);
  assert.equal(count(svg, "even-cut"), even.length);
  assert.equal(count(svg, "balanced-cut"), 55);
  const items = [...svg.matchAll(/class="even-piece" data-items="(\d+)"/g)].map((m) => +m[1]);
  assert.equal(items.reduce((a, b) => a + b, 0), plan.total, "the pieces hold every item");
  const share = (100 * Math.max(...items)) / plan.total;
  assert.ok(share > 45, `one even piece holds ${share.toFixed(1)}% of npm names`);
  assert.match(svg, new RegExp(`class="largest-share"[^>]*>${share.toFixed(1)}% of items<`));
  assert.ok(svg.includes("npm &#60;names&#62; &#38; co"), "text is escaped");
  // The balanced cuts crowd where the keys are: more than half of them sit in the '@' piece.
  const at = [keyPosition("@"), keyPosition("A")];
  const near = cuts.filter((k) => keyPosition(k) >= at[0] && keyPosition(k) < at[1]).length;
  assert.ok(near >= 27, `${near} of 55 balanced cuts inside the "@" piece`);
  // Read at a glance: the cuts stand at 55 different heights (equal steps of items), each on the
  // curve of items before its key; a y axis says what the heights are; no glyph a font may lack.
  const ys = [...svg.matchAll(/class="balanced-cut"[^>]* y1="([\d.]+)"/g)].map((m) => m[1]);
  assert.equal(new Set(ys).size, 55, "no two balanced cuts drawn on one line");
  assert.match(svg, /class="y-axis"[\s\S]*>50%</);
  assert.match(svg, /class="share-curve"/);
  assert.ok(!svg.includes("␠"));
});

Deno.test("plan svg: keys with markup are escaped in attributes", () => {
  const svg = planSvg({ total: 4, even: [{ key: "m", rank: 2 }], cuts: ['a"<b>', "x&y"] });
  assert.ok(svg.includes('data-key="a&#34;&#60;b&#62;"'));
  assert.ok(svg.includes('data-key="x&#38;y"'));
  assert.ok(!svg.includes("<b>"));
});

Deno.test("plan svg: `deno task plan --svg FILE` writes the picture of the plan it prints", async () => {
  const reg = await spawnRegistry(["--synthetic", "20000"]);
  const dir = await Deno.makeTempDir();
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        ...taskArgs("plan"),
        "--source",
        reg.url,
        "--shards",
        "12",
        "--json",
        "--svg",
        `${dir}/p.svg`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const plan = JSON.parse(new TextDecoder().decode(out.stdout));
    const svg = await Deno.readTextFile(`${dir}/p.svg`);
    const drawn = [...svg.matchAll(/class="balanced-cut" data-key="([^"]*)"/g)].map((m) => m[1]);
    assert.deepEqual(drawn, plan.shards.slice(1).map((s: { start: string }) => s.start));
    assert.equal(count(svg, "even-cut"), 11);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
