/**
 * Following a registry that changes, beside the follower a user would write instead: a script that
 * polls `_changes` every second and GETs each changed document, 64 in flight (what npm followers
 * built on `changes-stream` or `follow` do). Both follow the same registry at once: npm's replica
 * profile (GET only, documents from a host of their own, 20 ms away), changing at a steady rate,
 * then a burst, then steady again. Every 100 ms each follower's lag is sampled: how long the
 * oldest change it has not applied has existed (0 when it has them all), from the registry's own
 * clock. rankcrawl is `deno task crawl --follow --docs`, as users run it (a process of its own,
 * whose memory is measured); its position is read from its KV file.
 *
 * At the end the changes stop, both catch up, and each copy is compared with the registry: the
 * rankcrawl export (every id once, documents at their listed revisions) and the naive mirror.
 *
 * @module
 */
import { bundledNames, prng } from "../sim/names.ts";
import { RegistryData } from "../sim/registry_data.ts";
import { startRegistry } from "../sim/registry_server.ts";
import { npmReplicaProfile } from "../sim/registry_profile.ts";
import { getFeed, getFollow, listCrawls } from "../engine/store/mod.ts";
import { mapPool } from "../base/pool.ts";
import { table, timeTask } from "./harness.ts";

/** A phase of the change schedule. */
interface Phase {
  name: string;
  perSecond: number;
  seconds: number;
}

/** Options of {@linkcode benchFollow}. */
export interface FollowBenchOptions {
  /** Names the registry starts with. */
  size: number;
  /** Seconds at 20 changes a second before the burst. */
  steadyS: number;
  /** Seconds of the 200-a-second burst. */
  burstS: number;
  /** Seconds at 20 a second after the burst. */
  afterS: number;
  /** Where lines go. */
  log: (line: string) => void;
}

/** The registry's changes with the time each was made (its clock, `performance.now()`). */
class ChangeClock {
  #at = new Map<number, number>();
  constructor(readonly data: RegistryData) {}

  /** Makes changes at `perSecond` until `untilMs`, recording when each was made. */
  async run(phase: Phase, rand: () => number): Promise<void> {
    const start = performance.now();
    const end = start + phase.seconds * 1000;
    let made = 0;
    while (performance.now() < end) {
      const due = Math.floor(((performance.now() - start) / 1000) * phase.perSecond);
      for (; made < due; made++) {
        this.data.churn(1, rand);
        this.#at.set(this.data.updateSeq, performance.now());
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** The lag of a follower standing at `seq` now, in ms: the age of its oldest unapplied change. */
  lag(seq: number): number {
    if (seq >= this.data.updateSeq) return 0;
    const t = this.#at.get(seq + 1);
    return t === undefined ? 0 : performance.now() - t;
  }
}

/** The naive follower: `_changes` every second, each changed document GET, 64 in flight. */
class NaiveFollower {
  seq: number;
  mirror = new Map<string, string>();
  #stop = false;
  #done: Promise<void> | null = null;
  requests = 0;

  /** Starts from `bootstrap` (the registry as it stood at `since`, which it would have copied). */
  constructor(
    readonly url: string,
    readonly docsUrl: string,
    since: number,
    bootstrap: Map<string, string>,
  ) {
    this.seq = since;
    this.mirror = new Map(bootstrap);
  }

  start(): void {
    this.#done = this.#loop();
  }

  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }

  async #loop(): Promise<void> {
    while (!this.#stop) {
      const t = performance.now();
      for (;;) {
        const res = await fetch(`${this.url}/_changes?since=${this.seq}&limit=1000`);
        this.requests++;
        const body = await res.json() as {
          results: { id: string; deleted?: boolean; changes: { rev: string }[] }[];
          last_seq: number | string;
        };
        await mapPool(body.results, async (r) => {
          if (r.deleted) return void this.mirror.delete(r.id);
          const doc = await fetch(`${this.docsUrl}/${encodeURIComponent(r.id)}`);
          this.requests++;
          if (doc.ok) this.mirror.set(r.id, (await doc.json())._rev);
          else await doc.body?.cancel();
        }, { concurrency: 64 });
        this.seq = Number(body.last_seq);
        if (body.results.length < 1000) break;
      }
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - t))));
    }
  }
}

/** p-th percentile of `xs` (nearest rank). */
function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Resident memory of a process, MiB (Linux). */
function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** Runs the part and prints its tables (see the module comment). */
export async function benchFollow(o: FollowBenchOptions): Promise<void> {
  const all = await bundledNames();
  const step = Math.max(1, Math.floor(all.length / o.size));
  const data = new RegistryData(all.filter((_, i) => i % step === 0).slice(0, o.size));
  const initial = new Map(data.keys.map((k, i) => [k, data.revAt(i)]));
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docLatencyMs: 20 });
  const dir = await Deno.makeTempDir();
  const kvPath = `${dir}/follow.kv`;
  const clock = new ChangeClock(data);
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      ...["run", "-A", "tasks/crawl.ts", "--source", reg.url, "--kv", kvPath, "--shards", "8"],
      ...["--docs", "--docs-url", reg.docsUrl!, "--follow", "--verify-every", "1m"],
    ],
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let out = "";
  const drained = Promise.all([child.stdout, child.stderr].map(async (s) => {
    for await (const t of s.pipeThrough(new TextDecoderStream())) out += t;
  }));
  const naive = new NaiveFollower(reg.url, reg.docsUrl!, data.updateSeq, initial);
  try {
    while (!out.includes("following the registry's changes")) {
      if (out.includes("error:")) throw new Error(out);
      await new Promise((r) => setTimeout(r, 100));
    }
    const kv = await Deno.openKv(kvPath);
    const [crawl] = await listCrawls(kv);
    const rankSeq = async () => Number((await getFeed(kv, crawl.id)).value?.seq ?? 0);
    naive.start();
    const followStart = Date.now();
    // Memory is compared from a warm start: after the first tenth of the steady phase.
    let rss0 = 0;
    const warm = setTimeout(() => rss0 = rssMiB(child.pid), o.steadyS * 100);
    const phases: Phase[] = [
      { name: "steady", perSecond: 20, seconds: o.steadyS },
      { name: "burst", perSecond: 200, seconds: o.burstS },
      { name: "after", perSecond: 20, seconds: o.afterS },
    ];
    const samples: { phase: string; t: number; rank: number; naive: number }[] = [];
    let phase = "steady";
    let burstEnd = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const r = await rankSeq();
        samples.push({
          phase,
          t: performance.now(),
          rank: clock.lag(r),
          naive: clock.lag(naive.seq),
        });
        await new Promise((res) => setTimeout(res, 100));
      }
    })();
    const rand = prng(31);
    for (const p of phases) {
      phase = p.name;
      o.log(`follow bench: ${p.name}, ${p.perSecond} changes/s for ${p.seconds} s`);
      await clock.run(p, rand);
      if (p.name === "burst") burstEnd = performance.now();
    }
    // The changes stop: both catch up.
    const head = data.updateSeq;
    const deadline = Date.now() + 60_000;
    while ((await rankSeq() < head || naive.seq < head) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    sampling = false;
    await sampler;
    clearTimeout(warm);
    const rss1 = rssMiB(child.pid);
    const follow = (await getFollow(kv, crawl.id)).value;
    kv.close();
    child.kill("SIGINT");
    await child.status;
    await drained;
    const exported = await timeTask("tasks/export.ts", ["--kv", kvPath]);
    const state = new Map(data.keys.map((k, i) => [k, data.revAt(i)]));
    const rankOk = compareExport(exported.stdout, state);
    const naiveOk = diff(naive.mirror, state, {});
    const ms = (x: number) => (x / 1000).toFixed(2);
    const steady = samples.filter((s) => s.phase === "steady");
    const after = samples.filter((s) => s.phase === "after");
    const back = (k: "rank" | "naive") => {
      const first = samples.find((s) => s.t > burstEnd && s[k] <= 2000);
      return first ? ms(first.t - burstEnd) : "never";
    };
    const col = (xs: typeof samples, k: "rank" | "naive") => [
      ms(pct(xs.map((s) => s[k]), 50)),
      ms(pct(xs.map((s) => s[k]), 99)),
    ];
    o.log(
      `\n### Following ${o.size.toLocaleString("en-US")} names on npm's replica profile, ` +
        `documents 20 ms away: 20 changes/s for ${o.steadyS} s, 200/s for ${o.burstS} s, 20/s ` +
        `for ${o.afterS} s (lag sampled every 100 ms, from the registry's clock)\n`,
    );
    const row = (label: string, k: "rank" | "naive", exact: string) => [
      label,
      ...col(steady, k),
      ms(Math.max(...steady.map((s) => s[k]))),
      back(k),
      ...col(after, k),
      exact,
    ];
    o.log(table([
      "follower",
      "steady lag p50 s",
      "p99 s",
      "max s",
      "after the burst: within 2 s in s",
      "then p50 s",
      "p99 s",
      "exact at the end",
    ], [
      row("rankcrawl crawl --follow --docs", "rank", rankOk),
      row("naive: _changes every 1 s, GET each, 64 in flight", "naive", naiveOk),
    ]));
    const p99 = (k: "rank" | "naive") => pct(steady.map((s) => s[k]), 99);
    o.log(`\nsteady lag p99, rankcrawl / naive: ${(p99("rank") / p99("naive")).toFixed(2)}x`);
    const minutes = (Date.now() - followStart) / 60_000;
    o.log(
      `\nrankcrawl over ${minutes.toFixed(1)} min of following: RSS ${rss0.toFixed(0)} MiB ` +
        `(warm, after ${(o.steadyS / 10).toFixed(0)} s) → ` +
        `${rss1.toFixed(0)} MiB (${(100 * (rss1 - rss0) / Math.max(1, rss0)).toFixed(1)}%), ` +
        `${follow?.applied ?? 0} changes applied, proven whole ` +
        (follow?.verify?.verifiedAt && follow.verify.verifiedAt > followStart
          ? `at ${new Date(follow.verify.verifiedAt).toISOString()} (re-proof every 1 min)`
          : "not since following began") +
        `, ranges repaired ${
          follow?.verify?.repaired ?? 0
        }; naive follower: ${naive.requests} requests`,
    );
  } finally {
    await naive.stop().catch(() => {});
    try {
      child.kill("SIGKILL");
    } catch {
      // Ended already.
    }
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** "yes", or what differs, for an NDJSON export against `state`. */
function compareExport(ndjson: string, state: Map<string, string>): string {
  const seen = new Map<string, string>();
  let twice = 0;
  let badDoc = 0;
  for (const line of ndjson.split("\n")) {
    if (line === "") continue;
    const it = JSON.parse(line);
    if (seen.has(it.id)) twice++;
    seen.set(it.id, it.rev);
    if (!it.doc || it.doc._rev !== it.rev) badDoc++;
  }
  return diff(seen, state, { twice, badDoc });
}

/** "yes", or what differs between a copy and the registry's state. */
function diff(
  got: Map<string, string>,
  state: Map<string, string>,
  more: { twice?: number; badDoc?: number },
): string {
  const missing = [...state.keys()].filter((id) => !got.has(id)).length;
  const extra = [...got.keys()].filter((id) => !state.has(id)).length;
  const stale = [...state].filter(([id, rev]) => got.has(id) && got.get(id) !== rev).length;
  const bad = { missing, extra, stale, ...more };
  const off = Object.entries(bad).filter(([, n]) => (n ?? 0) > 0);
  return off.length === 0 ? "yes" : off.map(([k, n]) => `${n} ${k}`).join(", ");
}
