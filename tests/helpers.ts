/** Helpers shared by tests: key sets and plan verification. */
import { SYSTEM_CLOCK } from "../lib/base/clock.ts";
import assert from "node:assert/strict";
import { prng } from "../lib/sim/names.ts";
import { compareKeys, sortKeys } from "../lib/plan/keys.ts";
import { countItems, iterateItems } from "../lib/engine/items/item_read.ts";
import { crawlStatus } from "../lib/engine/crawl/reads/status.ts";
import { getFeed, keys, listCrawls, listShards } from "../lib/engine/store/mod.ts";
import type { Plan } from "../lib/plan/planner.ts";
import { RegistryData } from "../lib/sim/registry/registry_data.ts";
import { type SpawnedTask, spawnTask } from "../lib/sim/spawn_task.ts";
import type { Source } from "../lib/plan/source.ts";
import { exportNdjson } from "../lib/cli/export.ts";

/** `n` distinct random keys drawn from `chars`, lengths 1..maxLen, sorted. */
export function randomKeys(n: number, chars: string[], seed: number, maxLen = 8): string[] {
  const rand = prng(seed);
  const set = new Set<string>();
  let guard = 0;
  while (set.size < n && guard++ < n * 100) {
    const len = 1 + Math.floor(rand() * maxLen);
    let k = "";
    for (let i = 0; i < len; i++) k += chars[Math.floor(rand() * chars.length)];
    set.add(k);
  }
  return sortKeys([...set]);
}

/** Asserts a plan partitions `data`'s keys with exact floor/ceil balance and true item counts. */
export function assertExactPlan(plan: Plan, data: RegistryData, shards: number): void {
  const total = data.size;
  assert.equal(plan.total, total);
  assert.equal(plan.shards.length, shards);
  assert.equal(plan.shards[0].start, null);
  assert.equal(plan.shards.at(-1)!.end, null);
  const lo = Math.floor(total / shards);
  const hi = Math.ceil(total / shards);
  let sum = 0;
  plan.shards.forEach((s, i) => {
    if (i > 0) assert.equal(s.start, plan.shards[i - 1].end, "contiguous");
    const a = s.start === null ? 0 : data.rank(s.start);
    const b = s.end === null ? total : data.rank(s.end);
    assert.equal(b - a, s.items, `shard ${i} items equal the truth`);
    assert.ok(s.items === lo || s.items === hi, `shard ${i} holds ${s.items}, not ${lo} or ${hi}`);
    sum += s.items;
  });
  assert.equal(sum, total);
}

/** A RegistryData over the given keys. */
export function dataOf(keys: string[]): RegistryData {
  return new RegistryData(keys);
}

/** Runs `deno task registry` as a subprocess on a free port; resolves once it listens. */
export function spawnRegistry(args: string[]): Promise<SpawnedTask> {
  return spawnTask(taskArgs("registry"), args);
}

/** A port that was free a moment ago (the OS picked it). */
export function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** Waits until `url` answers 2xx (up to ~10 s). */
export async function waitHealthy(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await fetch(url).then((r) => (r.body?.cancel(), r.ok)).catch(() => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

/**
 * A crawl's NDJSON export as text, and the lines the export counted. Decoded as a stream: a
 * character may be split between two chunks of the export.
 */
export async function exportText(
  kv: Deno.Kv,
  crawlId: string,
): Promise<{ text: string; lines: number }> {
  const dec = new TextDecoder();
  let text = "";
  const lines = await exportNdjson(
    kv,
    crawlId,
    new WritableStream({ write: (c) => void (text += dec.decode(c, { stream: true })) }),
  );
  return { text: text + dec.decode(), lines };
}

/** A source that behaves like `inner` except for the methods given (faults, gates, drift). */
export function wrapSource(inner: Source, over: Partial<Source>): Source {
  return {
    description: over.description ?? `wrapped ${inner.description}`,
    capabilities: inner.capabilities,
    get requests() {
      return inner.requests;
    },
    list: over.list ?? ((o) => inner.list(o)),
    doc: over.doc ?? ((id) => inner.doc(id)),
    revs: over.revs ?? inner.revs?.bind(inner),
    updateSeq: over.updateSeq ?? (() => inner.updateSeq()),
    changes: over.changes ?? ((since, limit) => inner.changes(since, limit)),
    feedHead: over.feedHead ?? inner.feedHead?.bind(inner),
    docMode: over.docMode ?? inner.docMode?.bind(inner),
    get learned() {
      return over.learned ?? inner.learned;
    },
  };
}

/** `main.ts` as a subprocess on a free port with `env`; stdout and stderr are collected. */
export function spawnServer(env: Record<string, string>, args: string[] = []) {
  const port = freePort();
  const child = new Deno.Command(Deno.execPath(), {
    args: [...taskArgs("serve"), ...args],
    env: { NO_COLOR: "1", PORT: String(port), ...env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const logs = Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
  return {
    base: `http://127.0.0.1:${port}`,
    /** The server's process id. */
    pid: child.pid,
    /** Stops the server; resolves with what it printed. */
    stop: async (): Promise<string> => {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already gone.
      }
      await child.status;
      return (await logs).join("");
    },
  };
}

/** CPU time (user + system) a process has used so far, in milliseconds (Linux `/proc`). */
export function cpuMs(pid: number): number {
  const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields 14 and 15 (utime, stime) in clock ticks; they are the 12th and 13th after the name.
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Waits until the (only) crawl in the KV file at `kvPath`, written by another process, has at
 * least `items` items committed. Used to kill a worker mid-crawl rather than after a fixed delay.
 */
export async function waitForItems(
  kvPath: string,
  items: number,
  timeoutMs = 60_000,
): Promise<number> {
  return await untilCrawl(
    kvPath,
    async (kv, id) => (await listShards(kv, id)).reduce((s, e) => s + e.value.items, 0),
    (n) => n >= items,
    { what: `${items} items in ${kvPath}`, ms: timeoutMs, everyMs: 25 },
  );
}

/**
 * The one "crawled exactly" assertion: the crawl's stored items are exactly `expected` (each id
 * once, nothing else), the status counters equal them, a full key scan counts the same, and with
 * `revs` every item carries the registry's revision (and a stored document the same `_rev`). With
 * `partition`, the shards (splits included) still cut the key space into contiguous ranges.
 */
export async function assertCrawledExactly(
  kv: Deno.Kv,
  crawlId: string,
  expected: readonly string[],
  options: { revs?: (id: string) => string | undefined; partition?: boolean } = {},
): Promise<void> {
  const seen = new Set<string>();
  for await (const it of iterateItems(kv, crawlId)) {
    assert.ok(!seen.has(it.id), `item ${JSON.stringify(it.id)} stored twice`);
    seen.add(it.id);
    if (options.revs) {
      assert.equal(it.rev, options.revs(it.id), `rev of ${JSON.stringify(it.id)}`);
      if (it.doc) assert.equal(JSON.parse(it.doc)._rev, it.rev, "document matches its revision");
    }
  }
  const missing = expected.filter((k) => !seen.has(k));
  assert.equal(missing.length, 0, `missing items, e.g. ${JSON.stringify(missing.slice(0, 3))}`);
  assert.equal(seen.size, expected.length, "no item beyond the expected ones");
  assert.equal(await countItems(kv, crawlId), expected.length, "a full key scan agrees");
  assert.equal(
    (await crawlStatus(kv, crawlId, { clock: SYSTEM_CLOCK })).itemsStored,
    expected.length,
    "counters exact",
  );
  if (options.partition) {
    const shards = (await listShards(kv, crawlId)).map((e) => e.value).sort((a, b) =>
      a.start === null ? -1 : b.start === null ? 1 : compareKeys(a.start, b.start)
    );
    assert.equal(shards[0].start, null);
    assert.equal(shards.at(-1)!.end, null);
    for (let i = 1; i < shards.length; i++) {
      assert.equal(shards[i].start, shards[i - 1].end, "shards still partition the key space");
    }
  }
}

/**
 * The `deno` arguments of a `deno task` as deno.json defines it (`run`, its permission flags, its
 * script), so that tests run tasks with the permissions users give them, never `-A`.
 */
export function taskArgs(task: string): string[] {
  const config = JSON.parse(Deno.readTextFileSync(new URL("../deno.json", import.meta.url)));
  const line: string | undefined = config.tasks?.[task];
  if (!line?.startsWith("deno run ")) throw new Error(`task ${task} is not a deno run command`);
  return line.split(/\s+/).slice(1);
}

/**
 * Runs `deno task NAME ARGS…` as users run it (its permissions from deno.json, never `-A`) and
 * waits for it: its exit code, stdout and stderr.
 */
export async function runTask(
  name: string,
  args: string[],
  options: { tmpDir?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...taskArgs(name), ...args],
    cwd: new URL("..", import.meta.url).pathname,
    env: {
      NO_COLOR: "1",
      ...(options.tmpDir ? { TMPDIR: options.tmpDir } : {}),
      ...options.env,
    },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: text(out.stdout), stderr: text(out.stderr) };
}

/** `deno task <args[0]> <args…>` with its temporary files in `tmpDir` (see {@linkcode runTask}). */
export function runTaskIn(args: string[], tmpDir: string) {
  return runTask(args[0], args.slice(1), { tmpDir });
}

/** GETs (or sends `init` to) `url` and returns its JSON body; a status that is not 2xx fails. */
export async function okJson(url: string, init?: RequestInit) {
  const res = await fetch(url, init);
  const body = await res.json();
  assert.ok(res.ok, `${url}: ${res.status} ${JSON.stringify(body).slice(0, 200)}`);
  return body;
}

/** A task run as a child whose output lines can be waited for. */
export function spawnWatched(task: string, args: string[], env: Record<string, string> = {}) {
  const child = new Deno.Command(Deno.execPath(), {
    args: [...taskArgs(task), ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const drain = async (s: ReadableStream<Uint8Array>) => {
    for await (const t of s.pipeThrough(new TextDecoderStream())) out += t;
  };
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]);
  return {
    child,
    text: () => out,
    /** Waits until the output matches `re`. */
    async waitFor(re: RegExp, ms = 60_000): Promise<void> {
      const deadline = Date.now() + ms;
      while (!re.test(out)) {
        if (Date.now() > deadline) {
          throw new Error(`no ${re} within ${ms} ms in:\n${out.slice(-3000)}`);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    /** Waits for the child to end; its exit code and everything it printed. */
    async end(): Promise<{ code: number; out: string }> {
      const { code } = await child.status;
      await drained;
      return { code, out };
    },
  };
}

/**
 * Reads `read` of the (first) crawl in the KV file at `path` every `everyMs` (100 ms), while a task
 * may hold it (a file not made yet, or a read that meets its lock, is tried again), until `done`
 * says so; the value it took. A `what` that never came in `ms` fails with what was read last.
 */
export async function untilCrawl<T>(
  path: string,
  read: (kv: Deno.Kv, crawlId: string) => Promise<T>,
  done: (value: T) => boolean,
  o: { what: string; ms?: number; everyMs?: number },
): Promise<T> {
  const ms = o.ms ?? 30_000;
  const deadline = Date.now() + ms;
  let last: T | undefined;
  for (;;) {
    try {
      using kv = await Deno.openKv(path);
      const [crawl] = await listCrawls(kv);
      if (crawl) last = await read(kv, crawl.id);
    } catch {
      // Not made yet, or locked for a moment by the task.
    }
    if (last !== undefined && done(last)) return last;
    if (Date.now() >= deadline) {
      throw new Error(`${o.what} not after ${ms} ms (last read: ${JSON.stringify(last)})`);
    }
    await new Promise((r) => setTimeout(r, o.everyMs ?? 100));
  }
}

/** Waits until the crawl in the KV file at `path` stands at sequence `seq`. */
export async function untilFeedAt(path: string, seq: string, ms = 30_000): Promise<void> {
  await untilCrawl(
    path,
    async (kv, id) => (await getFeed(kv, id)).value?.seq ?? null,
    (at) => at === seq,
    { what: `the follower at seq ${seq}`, ms },
  );
}

/** Waits until the follower of the KV file at `path` applied at least `n` changes; how many. */
export async function untilApplied(path: string, n: number, ms = 30_000): Promise<number> {
  return await untilCrawl(
    path,
    async (kv, id) => {
      const d = (await getFeed(kv, id)).value;
      return d ? d.inserted + d.updated + d.deleted : 0;
    },
    (got) => got >= n,
    { what: `${n} changes applied`, ms },
  );
}

/**
 * Waits until the crawl in the KV file at `path` has no document pending (behind its revision on
 * a lagging document host: asked again until it lands).
 */
export async function untilNonePending(path: string, ms = 30_000): Promise<void> {
  await untilCrawl(
    path,
    async (kv, id) => {
      let pending = 0;
      for await (const _ of kv.list({ prefix: keys.pendingDocs(id) })) pending++;
      return pending;
    },
    (n) => n === 0,
    { what: "no document pending", ms },
  );
}
