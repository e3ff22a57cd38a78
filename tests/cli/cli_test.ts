/**
 * Bad input at the command line: every case answers one line on stderr starting with `error:` and
 * a non-zero exit, and leaves stored data alone.
 */
import { SYSTEM_CLOCK } from "../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { createCrawl } from "../../lib/engine/mod.ts";
import { buildSpec } from "../../lib/base/spec.ts";
import { freePort, spawnRegistry, taskArgs } from "../helpers.ts";

async function run(script: string, args: string[]) {
  const task = script === "main.ts" ? "serve" : script.replace(/^tasks\/|\.ts$/g, "");
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...taskArgs(task), ...args],
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr).trim(),
  };
}

function assertOneLineError(r: { code: number; stderr: string }, re: RegExp, what: string) {
  assert.notEqual(r.code, 0, `${what}: non-zero exit`);
  const lines = r.stderr.split("\n").filter((l) => l.startsWith("error:"));
  assert.equal(lines.length, 1, `${what}: one error line in ${JSON.stringify(r.stderr)}`);
  assert.match(lines[0], re, what);
  assert.ok(!/\n\s+at /.test(r.stderr), `${what}: no stack trace`);
}

Deno.test("cli: bad flags, URLs and registries give one-line errors", async () => {
  const tiny = await Deno.makeTempFile({ suffix: ".txt" });
  await Deno.writeTextFile(tiny, "a\nb\nc\n");
  const empty = await Deno.makeTempFile({ suffix: ".txt" });
  const reg = await spawnRegistry(["--names", tiny]);
  const emptyReg = await spawnRegistry(["--names", empty]);
  const html = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response("<!doctype html><html><body>hi</body></html>", {
        headers: { "content-type": "text/html" },
      }),
  );
  const htmlUrl = `http://127.0.0.1:${(html.addr as Deno.NetAddr).port}/db`;
  const dir = await Deno.makeTempDir();
  try {
    const plan = "tasks/plan.ts";
    const crawl = "tasks/crawl.ts";
    const cases: [string, string[], RegExp][] = [
      [plan, ["--source", reg.url, "--shards", "0"], /--shards must be at least 1/],
      [plan, ["--source", reg.url, "--shards", "-2"], /--shards must be at least 1/],
      [plan, ["--source", reg.url, "--shards", "x"], /--shards must be an integer/],
      [plan, ["--source", reg.url, "--shards", "4"], /more shards than items/],
      [plan, ["--source", "not-a-url", "--shards", "2"], /not a URL/],
      [plan, ["--source", "ftp://x/y", "--shards", "2"], /http\(s\)/],
      [plan, ["--source", reg.url], /--shards N is required/],
      [plan, ["--source", reg.url, "--shards", "2", "--bogus"], /Unknown option '--bogus'/],
      [plan, ["--source", htmlUrl, "--shards", "2"], /not a CouchDB answer/],
      [
        plan,
        ["--source", reg.url.replace(/\/registry$/, "/nope"), "--shards", "2"],
        /not a CouchDB database/,
      ],
      [plan, [
        "--source",
        `http://127.0.0.1:${freePort()}/db`,
        "--shards",
        "2",
        "--max-attempts",
        "2",
      ], /connection refused at http:\/\/127\.0\.0\.1:\d+\/db(\/_all_docs)?.* \(2 attempts\)/],
      [plan, ["--source", emptyReg.url, "--shards", "1"], /holds no items/],
      [
        crawl,
        ["--source", reg.url, "--shards", "0", "--kv", `${dir}/a.kv`],
        /--shards must be at least 1/,
      ],
      [crawl, ["--concurrency", "0"], /--concurrency must be at least 1/],
      [
        crawl,
        ["--follow", "--verify-every", "10"],
        /--verify-every must be a duration such as 500ms, 30s, 10m or 2h, got "10"/,
      ],
      [
        crawl,
        ["--follow", "--verify-every", "500ms"],
        /--verify-every must be 0 or at least 1s, got 500ms/,
      ],
      [crawl, ["--follow", "--follow-poll", "-1s"], /--follow-poll must be a duration/],
      [crawl, ["--follow", "--follow-idle", "2d"], /--follow-idle must be at most 3600s, got 2d/],
      [crawl, ["--max-page", "1"], /--max-page must be at least 2/],
      [crawl, ["--dispatch", "carrier-pigeon"], /--dispatch must be/],
      [crawl, ["--doc-fields", "name"], /--doc-fields is about documents, .*give --docs too/],
      [crawl, ["--docs-url", reg.url], /--docs-url is about documents/],
      [crawl, ["--docs", "--abbreviated"], /give --docs-url too/],
      [crawl, ["--docs", "--doc-fields", "_id"], /--doc-fields must name a field besides/],
      [crawl, ["--crawl-id", "bad id!"], /--crawl-id must be/],
      [crawl, ["--plan", `${dir}/missing.json`], /cannot read plan file/],
      [
        crawl,
        ["--source", reg.url, "--shards", "9", "--kv", `${dir}/b.kv`],
        /more shards than items/,
      ],
      [
        crawl,
        ["--source", reg.url, "--shards", "2", "--kv", `${dir}/no/such/dir/c.kv`],
        /cannot open KV/,
      ],
      // Deno 2.9 refuses the path itself (said in words a `deno task` user can act on); 2.5
      // lets SQLite say it cannot open it.
      [
        crawl,
        ["--kv", "/proc/x.kv"],
        /cannot open KV at \/proc\/x.kv: (.*an ordinary folder|unable to open database file.*)$/,
      ],
      [
        crawl,
        ["--source", htmlUrl, "--shards", "2", "--kv", `${dir}/d.kv`],
        /not a CouchDB answer/,
      ],
      ["tasks/export.ts", [], /--kv PATH is required/],
      ["tasks/export.ts", ["--kv", `${dir}/none.kv`], /no KV file/],
      ["tasks/registry.ts", ["--fault-rate", "2"], /--fault-rate must be at most 1/],
      ["tasks/registry.ts", ["--faults", "gremlins"], /--faults: unknown kind "gremlins"/],
      ["tasks/registry.ts", ["--names", `${dir}/missing.txt`], /cannot read names file/],
    ];
    for (const [script, args, re] of cases) {
      assertOneLineError(await run(script, args), re, `${script} ${args.join(" ")}`);
    }
  } finally {
    await html.shutdown();
    await reg.close();
    await emptyReg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: a KV holding another crawl is refused, and its data is untouched", async () => {
  const names = await Deno.makeTempFile({ suffix: ".txt" });
  await Deno.writeTextFile(names, Array.from({ length: 300 }, (_, i) => `pkg-${i}`).join("\n"));
  const reg = await spawnRegistry(["--names", names]);
  const dir = await Deno.makeTempDir();
  try {
    const kv = `${dir}/k.kv`;
    const first = await run("tasks/crawl.ts", [
      "--source",
      reg.url,
      "--shards",
      "3",
      "--kv",
      kv,
      "--crawl-id",
      "mine",
    ]);
    assert.equal(first.code, 0, first.stderr);
    const other = await run("tasks/crawl.ts", [
      "--source",
      reg.url,
      "--shards",
      "3",
      "--docs",
      "--kv",
      kv,
      "--crawl-id",
      "mine",
    ]);
    assertOneLineError(other, /was started with another docs/, "same id, other options");
    const second = await run("tasks/crawl.ts", ["--source", reg.url, "--shards", "2", "--kv", kv]);
    assert.equal(second.code, 0, second.stderr);
    // Another option made another crawl: said in one line, with which option and the other crawl.
    assert.match(
      second.stderr,
      /^crawl \S+ is a new crawl: --shards 2 \(it was 3\); this file also holds crawl mine of this registry \(done, 300 items\), which the command that made it resumes \(--shards 3\)$/m,
    );
    const ambiguous = await run("tasks/export.ts", ["--kv", kv]);
    assertOneLineError(
      ambiguous,
      /holds 2 crawls; pick one with --crawl-id: mine \(done, \S+ --shards 3\); \S+ \(done, \S+ --shards 2\) \(deno task crawls --kv .* lists them\)/,
      "export without id",
    );
    // The crawls of the file, each with what made it.
    const listed = await run("tasks/crawls.ts", ["--kv", kv]);
    assert.equal(listed.code, 0, listed.stderr);
    const lines = listed.stdout.trim().split("\n");
    assert.equal(lines.length, 2, listed.stdout);
    assert.match(
      lines[0],
      /^mine {2}done {2}300\/300 items {2}http:\S+ --shards 3 {2}\(started \d+s ago, ended \d+s ago\)$/,
    );
    assert.match(lines[1], /^\S+ {2}done {2}300\/300 items {2}http:\S+ --shards 2 /);
    const json = (await run("tasks/crawls.ts", ["--kv", kv, "--json"])).stdout.trim().split("\n");
    assert.deepEqual(
      json.map((l) => JSON.parse(l)).map((c) => [c.spec.shards, c.itemsStored, c.status]),
      [[3, 300, "done"], [2, 300, "done"]],
    );
    assertOneLineError(
      await run("tasks/crawls.ts", ["--kv", `${dir}/none.kv`]),
      /no KV file/,
      "crawls",
    );
    const unknown = await run("tasks/export.ts", ["--kv", kv, "--crawl-id", "nope"]);
    assertOneLineError(unknown, /no crawl with id nope/, "export unknown id");
    const exported = await run("tasks/export.ts", ["--kv", kv, "--crawl-id", "mine"]);
    assert.equal(exported.code, 0);
    assert.equal(
      exported.stdout.trim().split("\n").length,
      300,
      "the first crawl's data is intact",
    );
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: `export | head` ends quietly with 0 when the reader closes the pipe", async () => {
  const reg = await spawnRegistry(["--synthetic", "20000"]);
  const dir = await Deno.makeTempDir();
  try {
    const kv = `${dir}/p.kv`;
    const crawled = await run("tasks/crawl.ts", ["--source", reg.url, "--shards", "2", "--kv", kv]);
    assert.equal(crawled.code, 0, crawled.stderr);
    // 20,000 lines are over a megabyte: far more than a pipe buffers, so export is still writing.
    const child = new Deno.Command(Deno.execPath(), {
      args: [...taskArgs("export"), "--kv", kv],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).spawn();
    const reader = child.stdout.getReader();
    assert.ok((await reader.read()).value!.length > 0);
    await reader.cancel();
    const [status, stderr] = await Promise.all([child.status, new Response(child.stderr).text()]);
    assert.equal(status.code, 0, stderr);
    assert.equal(stderr, "", "nothing on stderr");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: export refuses a crawl that is not done unless --partial, and says its state", async () => {
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/p.kv`;
  try {
    {
      using kv = await Deno.openKv(kvPath);
      await createCrawl(kv, buildSpec({ source: "http://127.0.0.1:1/db", shards: 2 }), {
        clock: SYSTEM_CLOCK,
        id: "unfinished",
      });
    }
    const refused = await run("tasks/export.ts", ["--kv", kvPath]);
    assert.equal(refused.code, 2);
    assert.equal(
      refused.stderr,
      "error: crawl unfinished is planning, not done: its items are incomplete (use --partial to " +
        "export what it holds now)",
    );
    assert.equal(refused.stdout, "");
    const partial = await run("tasks/export.ts", ["--kv", kvPath, "--partial"]);
    assert.equal(partial.code, 0, partial.stderr);
    assert.equal(partial.stderr, "exported 0 items of crawl unfinished (planning, 0 planned)");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: a plan file made for another registry is refused before anything is crawled", async () => {
  const a = await spawnRegistry(["--synthetic", "500"]);
  const b = await spawnRegistry(["--synthetic", "50", "--seed", "7"]);
  const dir = await Deno.makeTempDir();
  let closed = false;
  try {
    const planned = await run("tasks/plan.ts", [
      ...["--source", a.url, "--shards", "4", "--out", `${dir}/plan.json`, "--json"],
    ]);
    assert.equal(planned.code, 0, planned.stderr);
    const refused = await run("tasks/crawl.ts", [
      ...["--source", b.url, "--plan", `${dir}/plan.json`, "--kv", `${dir}/c.kv`],
    ]);
    assertOneLineError(
      refused,
      /plan\.json was made for http:\/\/127\.0\.0\.1:\d+\/registry, not/,
      "plan",
    );
    assert.equal(refused.code, 2);
    const ok = await run("tasks/crawl.ts", [
      ...["--source", a.url, "--plan", `${dir}/plan.json`, "--kv", `${dir}/c.kv`],
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    // The same URL with other data behind it (a restore, another database): refused by its total.
    await a.close();
    closed = true;
    const port = new URL(a.url).port;
    const c = await spawnRegistry(["--synthetic", "300", "--port", port]);
    try {
      assert.equal(c.url, a.url);
      const other = await run("tasks/crawl.ts", [
        ...["--source", c.url, "--plan", `${dir}/plan.json`, "--kv", `${dir}/d.kv`],
      ]);
      assertOneLineError(
        other,
        /the plan file was made for 500 items; the registry lists 300 now \(more than 1% apart\)/,
        "crawl",
      );
      assert.equal(other.code, 2);
    } finally {
      await c.close();
    }
  } finally {
    if (!closed) await a.close();
    await b.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: a malformed --header or --sink is the only line, before any work: no demo registry, no KV file, no sink file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const cases: [string[], RegExp][] = [
      [["--header", "nocolon"], /^error: --header must be 'Name: value'/],
      [["--sink", "mysql://u:sekret@h/x"], /^error: --sink mysql:\/\/…@h\/x: a sink is sqlite:/],
      [["--sink", `sqlite:${dir}/s.db#no-dash`], /^error: --sink sqlite:.*the table must be/],
      [
        ["--sink", "postgres://u:sekret@/x"],
        /^error: --sink postgres:\/\/u:\*\*\*@\/x is not a URL/,
      ],
    ];
    for (const [flags, re] of cases) {
      const res = await run("tasks/crawl.ts", [...flags, "--kv", `${dir}/c.kv`]);
      assert.equal(res.code, 2, res.stderr);
      assert.equal(res.stderr.split("\n").length, 1, res.stderr);
      assert.match(res.stderr, re);
      assert.ok(!res.stderr.includes("sekret"), res.stderr);
      assert.equal(res.stdout, "");
    }
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), [], "nothing made");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cli: more shards than items is the user's input: exit 2, one error line, no progress line", async () => {
  const reg = await spawnRegistry(["--synthetic", "50"]);
  const dir = await Deno.makeTempDir();
  try {
    const res = await run("tasks/crawl.ts", [
      ...["--source", reg.url, "--shards", "80", "--kv", `${dir}/c.kv`],
    ]);
    assert.equal(res.code, 2, res.stderr);
    const lines = res.stderr.split("\n");
    assert.equal(lines.length, 2, res.stderr);
    assert.match(lines[0], /^crawling http:\/\/127\.0\.0\.1:\d+\/registry into /);
    assert.match(lines[1], /^error: crawl \w+ failed: cannot cut 50 items into 80 shards/);
    assert.equal(res.stdout, "");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
