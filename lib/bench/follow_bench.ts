/**
 * Following a registry that changes, beside the follower a user would write instead: a script that
 * polls `_changes` every second and GETs each changed document, 64 in flight (what npm followers
 * built on `changes-stream` or `follow` do). Both follow the same registry at once: npm's replica
 * profile (GET only, documents from a host of their own, 20 ms away), changing at a steady rate,
 * then a burst, then steady again. Every 100 ms each follower's lag is sampled: how long the
 * oldest change it has not applied has existed (0 when it has them all), from the registry's own
 * clock. rankcrawl follows twice, as users run it: `deno task crawl --follow --docs` and
 * `deno task serve` with a crawl created with `follow` (processes of their own, whose memory is
 * measured); their positions are read from their KV files.
 *
 * At the end the changes stop, both catch up, and each copy is compared with the registry: the
 * rankcrawl export (every id once, documents at their listed revisions) and the naive mirror.
 *
 * @module
 */
import { bundledNames, prng } from "../sim/names.ts";
import { npmReplicaProfile, RegistryData, startRegistry } from "../sim/registry/mod.ts";
import { runChurn } from "../sim/churn_schedule.ts";
import type { FollowState } from "../engine/store/mod.ts";
import { rssMiB, table } from "./harness.ts";
import {
  cliFollower,
  diff,
  type Follower,
  NaiveFollower,
  serveFollower,
  until,
} from "./followers.ts";

/** A phase of the change schedule. */
interface Phase {
  name: string;
  perSecond: number;
  seconds: number;
}

/** Seconds of changes before the steady phase is measured (see where phases are set). */
const WARM_UP_S = 15;

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

  /** Makes a phase's changes (`churn_schedule.ts`), recording when each was made. */
  async run(phase: Phase, rand: () => number): Promise<void> {
    await runChurn(this.data, [phase], {
      rand,
      onChange: (seq) => this.#at.set(seq, performance.now()),
    });
  }

  /** The lag of a follower standing at `seq` now, in ms: the age of its oldest unapplied change. */
  lag(seq: number): number {
    if (seq >= this.data.updateSeq) return 0;
    const t = this.#at.get(seq + 1);
    return t === undefined ? 0 : performance.now() - t;
  }
}

/** p-th percentile of `xs` (nearest rank). */
function pct(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Runs the part and prints its tables (see the module comment). */
export async function benchFollow(o: FollowBenchOptions): Promise<void> {
  const all = await bundledNames();
  const step = Math.max(1, Math.floor(all.length / o.size));
  const data = new RegistryData(all.filter((_, i) => i % step === 0).slice(0, o.size));
  const initial = new Map(data.keys.map((k, i) => [k, data.revAt(i)]));
  const reg = await startRegistry(data, { ...npmReplicaProfile(), docLatencyMs: 20 });
  const dir = await Deno.makeTempDir();
  const clock = new ChangeClock(data);
  const followers: Follower[] = [];
  const naive = new NaiveFollower(reg.url, reg.docsUrl!, data.updateSeq, initial);
  try {
    followers.push(await cliFollower(reg, dir), await serveFollower(reg, dir), {
      label: "naive: `_changes` every 1 s, GET each, 64 in flight",
      seq: () => Promise.resolve(naive.seq),
      finish: async (state) => (await naive.stop(), diff(naive.mirror, state, {})),
    });
    naive.start();
    const followStart = Date.now();
    // Memory is compared from a warm start: after the first tenth of the steady phase.
    const rss0 = new Map<number, number>();
    const warm = setTimeout(() => {
      for (const f of followers) if (f.pid) rss0.set(f.pid, rssMiB(f.pid));
    }, o.steadyS * 100);
    // A follower idle for a while looks every --follow-idle (10 s): the first change after that
    // waits up to as long. The warm-up (not measured) starts every follower changing first; the
    // steady phase then measures what a follower of a registry that keeps changing sees.
    const phases: Phase[] = [
      { name: "warm-up", perSecond: 20, seconds: WARM_UP_S },
      { name: "steady", perSecond: 20, seconds: o.steadyS },
      { name: "burst", perSecond: 200, seconds: o.burstS },
      { name: "after", perSecond: 20, seconds: o.afterS },
    ];
    const samples: { phase: string; t: number; lag: number[] }[] = [];
    let phase = "warm-up";
    let burstEnd = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const seqs = await Promise.all(followers.map((f) => f.seq()));
        samples.push({ phase, t: performance.now(), lag: seqs.map((q) => clock.lag(q)) });
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
    // The changes stop: every follower catches up.
    const head = data.updateSeq;
    await until(
      async () => (await Promise.all(followers.map((f) => f.seq()))).every((q) => q >= head),
      60_000,
      "catch-up",
    ).catch((err) => o.log(`follow bench: ${err.message}`));
    sampling = false;
    await sampler;
    clearTimeout(warm);
    const minutes = (Date.now() - followStart) / 60_000;
    const ends: { rss1: number; follow: FollowState | null }[] = [];
    for (const f of followers) {
      const rss1 = f.pid ? rssMiB(f.pid) : 0;
      const follow = await f.follow?.() ?? null;
      ends.push({ rss1, follow });
    }
    const state = new Map(data.keys.map((k, i) => [k, data.revAt(i)]));
    const exact: string[] = [];
    for (const f of followers) exact.push(await f.finish(state));
    const ms = (x: number) => (x / 1000).toFixed(2);
    const lags = (name: string, i: number) =>
      samples.filter((s) => s.phase === name).map((s) => s.lag[i]);
    const back = (i: number) => {
      const first = samples.find((s) => s.t > burstEnd && s.lag[i] <= 2000);
      return first ? ms(first.t - burstEnd) : "never";
    };
    o.log(
      `\n### Following ${o.size.toLocaleString("en-US")} names on npm's replica profile, ` +
        `documents 20 ms away: 20 changes/s for ${WARM_UP_S} s (warm-up, not measured), then ` +
        `${o.steadyS} s, 200/s for ${o.burstS} s, 20/s for ${o.afterS} s (lag sampled every ` +
        `100 ms, from the registry's clock)\n`,
    );
    o.log(table(
      [
        "follower",
        "steady lag p50 s",
        "p99 s",
        "max s",
        "after the burst: within 2 s in s",
        "then p50 s",
        "p99 s",
        "exact at the end",
      ],
      followers.map((f, i) => [
        f.label,
        ms(pct(lags("steady", i), 50)),
        ms(pct(lags("steady", i), 99)),
        ms(Math.max(...lags("steady", i))),
        back(i),
        ms(pct(lags("after", i), 50)),
        ms(pct(lags("after", i), 99)),
        exact[i],
      ]),
    ));
    // When each follower was furthest behind in the steady phase, and for how long it was over 2 s.
    const steadyAll = samples.filter((s) => s.phase === "steady");
    const t0 = steadyAll[0]?.t ?? 0;
    for (const [i, f] of followers.entries()) {
      const worst = steadyAll.reduce((a, b) => b.lag[i] > a.lag[i] ? b : a, steadyAll[0]);
      const over = steadyAll.filter((x) => x.lag[i] > 2000).length / 10;
      o.log(
        `worst steady lag of ${f.label}: ${ms(worst?.lag[i] ?? 0)} s at ` +
          `${(((worst?.t ?? t0) - t0) / 1000).toFixed(0)} s into the phase; over 2 s for ${over} s`,
      );
    }
    const p99 = (i: number) => pct(lags("steady", i), 99);
    o.log(
      `\nsteady lag p99 / naive's: CLI ${(p99(0) / p99(2)).toFixed(2)}x, serve ` +
        `${(p99(1) / p99(2)).toFixed(2)}x; naive follower: ${naive.requests} requests`,
    );
    followers.forEach((f, i) => {
      if (!f.pid) return;
      const r0 = rss0.get(f.pid) ?? 0;
      const { rss1, follow } = ends[i];
      const proven = follow?.verify?.verifiedAt && follow.verify.verifiedAt > followStart
        ? `counts proven at ${
          new Date(follow.verify.verifiedAt).toISOString()
        } (re-proof every 1 min)`
        : "counts not proven since following began";
      o.log(
        `${f.label} over ${minutes.toFixed(1)} min of following: RSS ${r0.toFixed(0)} MiB (warm, ` +
          `after ${(o.steadyS / 10).toFixed(0)} s) → ${rss1.toFixed(0)} MiB ` +
          `(${(100 * (rss1 - r0) / Math.max(1, r0)).toFixed(1)}%), ${follow?.applied ?? 0} ` +
          `changes applied, ${proven}, ranges repaired ${follow?.verify?.repaired ?? 0}`,
      );
    });
  } finally {
    await naive.stop().catch(() => {});
    await reg.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}
