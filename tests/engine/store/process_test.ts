/**
 * Whole `deno task crawl` processes under conditions an operator meets: the disk filling up in the
 * middle of a crawl, the KV file cut to half its size under it, and two processes started on one
 * fresh KV file.
 */
import assert from "node:assert/strict";
import { listCrawls } from "../../../lib/engine/store/mod.ts";
import { bundledNames, syntheticNames } from "../../../lib/sim/names.ts";
import { assertCrawledExactly, spawnRegistry, taskArgs, waitForItems } from "../../helpers.ts";

const decode = (b: Uint8Array) => new TextDecoder().decode(b);

async function exactAgainst(kvPath: string, truth: string[]) {
  using kv = await Deno.openKv(kvPath);
  const [crawl] = await listCrawls(kv);
  assert.equal(crawl.status, "done");
  await assertCrawledExactly(kv, crawl.id, truth);
}

Deno.test("process: a full disk stops the crawl with one line; the same command resumes exactly", async () => {
  const reg = await spawnRegistry(["--synthetic", "60000"]);
  const dir = await Deno.makeTempDir();
  const crawl =
    `exec "${Deno.execPath()}" run -A tasks/crawl.ts --source ${reg.url} --kv ${dir}/c.kv`;
  try {
    // RLIMIT_FSIZE with SIGXFSZ ignored: writes past 3 MB fail as on a full disk.
    const full = await new Deno.Command("sh", {
      args: ["-c", `trap "" XFSZ; ulimit -f 3000; ${crawl}`],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = decode(full.stderr);
    assert.notEqual(full.code, 0);
    const lines = err.split("\n").filter((l) => l.startsWith("error:"));
    assert.equal(lines.length, 1, err);
    assert.match(
      lines[0],
      /cannot write .*c\.kv: the disk is full or failing.* run the same command again to resume/,
    );
    assert.ok(!/\n\s+at /.test(err), "no stack trace");
    const again = await new Deno.Command("sh", {
      args: ["-c", crawl],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(again.code, 0, decode(again.stderr));
    assert.match(decode(again.stderr), /resuming crawl/);
    await exactAgainst(`${dir}/c.kv`, syntheticNames(await bundledNames(), 60000, { seed: 42 }));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("process: a KV file cut to half its size mid-crawl is said to be damaged, never promised intact, by the crawl, the same command again and export", async () => {
  const reg = await spawnRegistry(["--synthetic", "200000", "--latency-ms", "100"]);
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/c.kv`;
  const run = (task: string, args: string[]) =>
    new Deno.Command(Deno.execPath(), {
      args: [...taskArgs(task), ...args],
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    });
  const crawlArgs = ["--source", reg.url, "--kv", kvPath, "--shards", "8", "--max-page", "100"];
  const errorLines = (out: Deno.CommandOutput) => {
    const err = decode(out.stderr);
    assert.notEqual(out.code, 0, err);
    assert.ok(!/\n\s+at /.test(err), "no stack trace");
    const lines = err.split("\n").filter((l) => l.startsWith("error:"));
    assert.equal(lines.length, 1, err);
    // Whatever the file says, the line never promises it intact: "nothing stored is lost" only
    // as what holds if the disk filled, beside what a damaged file means.
    assert.match(lines[0], /damaged/);
    assert.doesNotMatch(
      lines[0].replace(/if the disk is full, nothing stored is lost/, ""),
      /lost/,
    );
    return lines[0];
  };
  try {
    const crawl = run("crawl", crawlArgs).spawn();
    const out = crawl.output();
    await waitForItems(kvPath, 10_000);
    const { size } = await Deno.stat(kvPath);
    await Deno.truncate(kvPath, Math.floor(size / 2));
    errorLines(await out);
    errorLines(await run("crawl", crawlArgs).output());
    errorLines(await run("export", ["--kv", kvPath, "--partial"]).output());
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("process: two crawl processes on one fresh KV file share the crawl; both finish", async () => {
  const reg = await spawnRegistry(["--synthetic", "40000", "--latency-ms", "2"]);
  const dir = await Deno.makeTempDir();
  const args = [...taskArgs("crawl"), "--source", reg.url, "--kv", `${dir}/c.kv`];
  try {
    const runs = [0, 1].map(() =>
      new Deno.Command(Deno.execPath(), {
        args: [...args, "--max-page", "500"],
        env: { NO_COLOR: "1" },
        stdout: "piped",
        stderr: "piped",
      }).output()
    );
    const outs = await Promise.all(runs);
    for (const out of outs) assert.equal(out.code, 0, decode(out.stderr));
    const said = outs.map((o) => decode(o.stderr)).join("\n");
    assert.ok(!/is planning/.test(said), said);
    await exactAgainst(`${dir}/c.kv`, syntheticNames(await bundledNames(), 40000, { seed: 42 }));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
