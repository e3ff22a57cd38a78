/**
 * Nothing a registry sends reaches a terminal raw (`lib/base/shown_text.ts`): control characters
 * (C0, C1, escape sequences), bidirectional overrides and line separators in what it controls (its
 * sequences, its ids, its error reasons) are shown as escapes by the CLI's lines, its progress and
 * its summary; a forged line stays inside the line it came in. JSON answers keep the raw value.
 */
import assert from "node:assert/strict";
import { shownText } from "../../lib/base/shown_text.ts";
import { followLine } from "../../lib/cli/progress.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { sortKeys } from "../../lib/plan/keys.ts";
import { runTask, taskArgs } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";

/** A terminal's worst: clear the screen, home, retitle, a forged summary line, an override. */
const EVIL =
  "\u001b[2J\u001b[H\u001b]0;PWNED-TITLE\u0007\ncrawl FORGED done: 0 items\u202e\u009b31m";

/** Characters that act on a terminal (or reorder text) if printed raw. */
// deno-lint-ignore no-control-regex -- control characters are what it finds
const RAW = new RegExp(
  "[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069\\u2028\\u2029]",
);

Deno.test("shown text: every control, C1 and bidi character is an escape; a line feed too, unless the lines are ours", () => {
  const shown = shownText(`seq 12${EVIL}`);
  assert.doesNotMatch(shown, RAW);
  assert.ok(!shown.includes("\n"), "a registry's text never starts a line");
  assert.match(shown, /\\u\{1b\}\[2J\\u\{1b\}\[H\\u\{1b\}\]0;PWNED-TITLE\\u\{7\}\\ncrawl FORGED/);
  assert.match(shown, /\\u\{202e\}\\u\{9b\}31m$/);
  assert.equal(shownText("a\tb é 😀"), "a\tb é 😀", "tabs and ordinary text as they are");
  assert.equal(shownText("ours\nours", { lines: true }), "ours\nours");
  assert.equal(shownText("x".repeat(600)).length, 500);
  // The follower's line with a hostile sequence and reason.
  const line = followLine({
    lagSeconds: 1,
    changesBehind: null,
    applied: 0,
    head: `7${EVIL}`,
    checkedAt: new Date(0).toISOString(),
    lastGoodAt: null,
    failing: { since: new Date(0).toISOString(), reason: `HTTP 400: ${EVIL}` },
    verifiedAt: null,
    roundChecked: 0,
    repaired: 0,
    lastRepair: null,
    lateApplied: 0,
    rows: null,
    resync: null,
  }, 1000);
  assert.doesNotMatch(line, RAW);
  assert.ok(!line.includes("\n"));
});

Deno.test("shown text: a crawl of a registry whose sequences and ids carry escape sequences prints none of them raw", async () => {
  const names = await realNames(3_000);
  const hostile = ["evil\u001b[31mred", "bidi\u202eevil", "c1\u009bstuff", "nl\nforged"];
  const data = new RegistryData(sortKeys([...names, ...hostile]));
  const reg = await startRegistry(data, { seqDecoration: EVIL });
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", [
      "--source",
      reg.url,
      "--kv",
      `${dir}/c.kv`,
      "--shards",
      "4",
    ]);
    assert.equal(run.code, 0, run.stderr);
    const all = run.stdout + run.stderr;
    assert.doesNotMatch(all, RAW, "nothing the registry said reaches the terminal raw");
    assert.ok(!/^crawl FORGED/m.test(all), "no forged line");
    assert.match(run.stdout, /checked: exact: .* at seq 3004\\u\{1b\}\[2J/);
    // The export keeps the registry's values (JSON escapes them).
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    const ids = exported.stdout.trim().split("\n").map((l) => JSON.parse(l).id);
    for (const id of hostile) {
      assert.ok(ids.includes(id), `${JSON.stringify(id)} exported as it is`);
    }
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("shown text: in a terminal (a pseudo-terminal), the progress a hostile registry's crawl draws holds only our own escapes", async () => {
  const names = await realNames(3_000);
  const hostile = ["evil\u001b[31mred", "bidi\u202eevil", "c1\u009bstuff", "nl\nforged"];
  const data = new RegistryData(sortKeys([...names, ...hostile]));
  const reg = await startRegistry(data, { seqDecoration: EVIL, latencyMs: 5 });
  const dir = await Deno.makeTempDir();
  try {
    const crawl = [Deno.execPath(), ...taskArgs("crawl")]
      .concat(["--source", reg.url, "--kv", `${dir}/c.kv`, "--shards", "4", "--follow"])
      .map((a) => `'${a}'`).join(" ");
    // `script` gives the crawl a terminal (its progress draws bars and moves the cursor) and
    // writes what the terminal received; the crawl follows for a few seconds, then is stopped.
    const out = await new Deno.Command("script", {
      args: ["-qefc", `timeout -s INT 8 ${crawl}`, "/dev/null"],
      env: { NO_COLOR: "1", COLUMNS: "100", LINES: "40" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const screen = new TextDecoder().decode(out.stdout);
    assert.match(screen, /following/, screen);
    assert.ok(screen.includes("\u001b[2K"), "drawn as a terminal's progress (not plain lines)");
    // Ours: cursor up, clear the line, the terminal's own line ends.
    // deno-lint-ignore no-control-regex -- the escapes the progress draws with
    const ours = /\u001b\[\d+A|\u001b\[2K|\r/g;
    const rest = screen.replace(ours, "");
    assert.doesNotMatch(rest, RAW, "no escape but ours reached the terminal");
    assert.ok(!screen.includes("\u001b[2J") && !screen.includes("\u001b]0;"), "no clear, no title");
    assert.ok(!/^crawl FORGED/m.test(rest), "no forged line");
    assert.match(rest, /\\u\{1b\}\[2J/, "the sequence is shown, escaped");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
