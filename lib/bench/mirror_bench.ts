/**
 * The served mirror beside the server a user would replicate from instead: PouchDB's replicator
 * (in pouchdb-server, the target) copies the same documents from `deno task mirror` and from a
 * pouchdb-server holding them (same ids, revisions and bodies: it was filled from the mirror),
 * timed in rounds. Then the mirror's memory: its resident size while `readers` continuous
 * `_changes` feeds stay open for `holdS` seconds, and while the whole copy is read as one
 * `_changes?include_docs=true` and one `_all_docs?include_docs=true` (both stream: their size is
 * printed beside the growth).
 *
 * @module
 */
import { startPouchdb } from "../sim/pouchdb_server.ts";
import { type SpawnedTask, spawnTask } from "../sim/spawn_task.ts";
import {
  median,
  n,
  pairedRatio,
  registry,
  rounds,
  rssMiB,
  s,
  table,
  timeTask,
  x,
} from "./harness.ts";

/** The mirror task in its own process (the task's permissions), reads open. */
function spawnMirror(kv: string): Promise<SpawnedTask> {
  return spawnTask(
    [
      "run",
      "--allow-net=127.0.0.1",
      "--allow-read",
      "--allow-write",
      "--allow-env",
      "tasks/mirror.ts",
    ],
    ["--kv", kv, "--port", "0"],
    { ready: /mirror on (\S+)/, env: { MIRROR_PUBLIC: "1" } },
  );
}

/** Runs one replication into `target`'s new database `db`; its time in ms. @throws unless whole */
async function replication(target: string, source: string, db: string, docs: number) {
  const t = performance.now();
  const res = await fetch(`${target}/_replicate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ source, target: db, create_target: true }),
  });
  const body = await res.json();
  const ms = performance.now() - t;
  if (body.ok !== true || body.docs_written !== docs) {
    throw new Error(`replication from ${source}: ${JSON.stringify(body).slice(0, 500)}`);
  }
  return ms;
}

/** The highest resident size of `pid` while `work` runs, sampled every 100 ms. */
async function peakDuring(pid: number, work: () => Promise<unknown>): Promise<number> {
  let peak = rssMiB(pid);
  const poll = setInterval(() => peak = Math.max(peak, rssMiB(pid)), 100);
  try {
    await work();
  } finally {
    clearInterval(poll);
  }
  return Math.max(peak, rssMiB(pid));
}

/** Reads `url` to its end; its size in bytes. */
async function drain(url: string, signal?: AbortSignal): Promise<number> {
  const res = await fetch(url, { signal });
  let bytes = 0;
  for await (const chunk of res.body!) bytes += chunk.length;
  return bytes;
}

/** Prints the replication table and ratio, then the memory table. */
export async function benchMirror(
  o: { size: number; runs: number; readers: number; holdS: number; log: (s: string) => void },
) {
  const dir = await Deno.makeTempDir();
  // 2% of documents of 150 KB: the whole copy is tens of MB, so holding it would show.
  const reg = await registry(["--synthetic", String(o.size), "--large-doc-rate", "0.02"]);
  const kv = `${dir}/m.kv`;
  await timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kv, "--docs"]);
  await reg.close();
  const mirror = await spawnMirror(kv);
  const source = await startPouchdb(dir);
  const target = await startPouchdb(dir);
  try {
    await replication(source.base, mirror.url, "data", o.size);
    let round = 0;
    const t = await rounds(o.runs, {
      pouchdb: () => replication(target.base, `${source.base}/data`, `p${round}`, o.size),
      mirror: async () => {
        const ms = await replication(target.base, mirror.url, `m${round}`, o.size);
        for (const db of [`p${round}`, `m${round}`]) {
          await (await fetch(`${target.base}/${db}`, { method: "DELETE" })).body?.cancel();
        }
        round++;
        return ms;
      },
    });
    o.log(
      `\n### PouchDB replicating ${n(o.size)} documents: from the mirror beside from ` +
        `pouchdb-server (the same documents; median of ${o.runs})\n`,
    );
    o.log(table(["source", "s", "docs/s"], [
      ["pouchdb-server", s(median(t.pouchdb)), n(o.size / (median(t.pouchdb) / 1000))],
      ["`deno task mirror`", s(median(t.mirror)), n(o.size / (median(t.mirror) / 1000))],
    ]));
    o.log(`\nmirror / pouchdb-server: **${x(pairedRatio(t.mirror, t.pouchdb))}x** (goal <= 1.0)`);

    // Memory: open feeds, then the whole copy read at once.
    const base = rssMiB(mirror.pid);
    const stop = new AbortController();
    const feeds = Array.from(
      { length: o.readers },
      () =>
        drain(`${mirror.url}/_changes?feed=continuous&since=now&heartbeat=5000`, stop.signal)
          .catch(() => 0),
    );
    let feedsPeak = base;
    for (let i = 0; i < o.holdS; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      feedsPeak = Math.max(feedsPeak, rssMiB(mirror.pid));
    }
    const extra = await fetch(`${mirror.url}/_changes?feed=continuous&since=now&timeout=1`);
    const refused = extra.status === 503;
    await extra.body?.cancel();
    stop.abort();
    await Promise.all(feeds);
    let changesBytes = 0;
    const changesPeak = await peakDuring(mirror.pid, async () => {
      changesBytes = await drain(`${mirror.url}/_changes?include_docs=true`);
    });
    let allDocsBytes = 0;
    const allDocsPeak = await peakDuring(mirror.pid, async () => {
      allDocsBytes = await drain(`${mirror.url}/_all_docs?include_docs=true`);
    });
    o.log(`\n### The mirror's resident memory (MiB; ${n(base)} before)\n`);
    o.log(table(["what", "read", "growth MiB"], [
      [
        `${o.readers} continuous \`_changes\` open ${o.holdS} s (one more: ${
          refused ? "503" : "served"
        })`,
        "",
        n(feedsPeak - base),
      ],
      [
        "the whole copy as `_changes?include_docs=true`",
        `${n(changesBytes / 2 ** 20)} MiB`,
        n(changesPeak - base),
      ],
      [
        "the whole copy as `_all_docs?include_docs=true`",
        `${n(allDocsBytes / 2 ** 20)} MiB`,
        n(allDocsPeak - base),
      ],
    ]));
  } finally {
    await target.stop();
    await source.stop();
    await mirror.close();
    await Deno.remove(dir, { recursive: true });
  }
}
