/**
 * The crawl's log during an outage (`lib/cli/outage_log.ts`): the lines about retrying the requests
 * of a host that fails every request give way to the breaker's few lines about the outage.
 */
import assert from "node:assert/strict";
import { HostBreaker } from "../../lib/sources/http/host_breaker.ts";
import { quietWhileFailing } from "../../lib/cli/outage_log.ts";
import { FakeClock } from "../fake_clock.ts";
import { runTask, spawnRegistry } from "../helpers.ts";

const A = new URL("http://a.example/db/x");

Deno.test("outage log: while a host fails, the lines about retrying its requests give way; its first, other hosts' and other lines show", () => {
  const clock = new FakeClock();
  const breaker = new HostBreaker({ clock });
  const shown: string[] = [];
  const log = quietWhileFailing((l) => shown.push(l), breaker);
  const retry = (host: string) =>
    `registry: connection refused at http://${host}/db/_all_docs?limit=49; retrying (attempt 2)`;
  breaker.report(A, { failed: "connection refused" });
  log(retry("a.example")); // the first failure of a run
  breaker.report(A, { failed: "connection refused" });
  log(retry("a.example"));
  log("shard 3: connection refused at http://a.example/db/_all_docs (8 attempts); retrying in 1 s");
  log(retry("b.example"));
  log("split shard 8: shard 19 takes 7029 items");
  breaker.report(A, { answered: true });
  log(retry("a.example"));
  assert.deepEqual(shown, [
    retry("a.example"),
    retry("b.example"),
    "split shard 8: shard 19 takes 7029 items",
    retry("a.example"),
  ]);
});

Deno.test("outage log: `deno task crawl` through a registry down for 8 s says so in at most 4 lines, splits nothing while it is down, and ends exact", async () => {
  const reg = await spawnRegistry([
    ...["--synthetic", "100000", "--latency-ms", "60"],
    ...["--down-after-s", "4", "--down-for-s", "8"],
  ]);
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--shards", "19", "--max-page", "50"],
    ]);
    assert.equal(run.code, 0, run.stderr.slice(-2000));
    assert.match(run.stdout, /checked: exact/);
    const lines = run.stderr.split("\n").filter((l) => l && !l.startsWith("progress:"));
    const host = new URL(reg.url).host;
    const about = lines.filter((l) => l.includes(host) || /refused|reset|retrying/.test(l));
    assert.ok(about.length <= 4, `${about.length} lines about it:\n${about.join("\n")}`);
    assert.ok(about.some((l) => l.startsWith(`${host} has failed every request since`)));
    assert.ok(about.some((l) => l.startsWith(`${host} answers again after`)));
    // No split while it is down: between the line that says so and the one that says it is back
    // (a shard may split before or after, when the crawl's pace asks for it).
    const down = lines.findIndex((l) => l.startsWith(`${host} has failed every request since`));
    const up = lines.findIndex((l) => l.startsWith(`${host} answers again after`));
    assert.ok(down < up, lines.join("\n"));
    assert.deepEqual(
      lines.slice(down, up).filter((l) => l.startsWith("split")),
      [],
      lines.join("\n"),
    );
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
