/**
 * Changes at a rate, for soaks: a schedule of phases (`20x300,200x60,20`: 20 changes a second for
 * 300 s, a burst of 200 a second for 60 s, then 20 a second on), driven one change at a time and
 * spread over each second as a live registry's come, each change told with its sequence.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { UsageError } from "../base/errors.ts";
import { prng } from "./names.ts";
import { CHURN_KINDS, type ChurnKind, type RegistryData } from "./registry/mod.ts";

/** One phase: `perSecond` changes a second for `seconds` (null: until stopped). */
export interface ChurnPhase {
  perSecond: number;
  seconds: number | null;
}

/**
 * Parses `RATE[xSECONDS],…` (`20x300,200x60,20`); only the last phase may leave out its seconds
 * (it runs until stopped). @throws UsageError naming the bad phase.
 */
export function parseChurnSchedule(raw: string): ChurnPhase[] {
  const parts = raw.split(",").map((p) => p.trim());
  return parts.map((p, i) => {
    const m = /^(\d+(?:\.\d+)?)(?:x(\d+(?:\.\d+)?))?$/.exec(p);
    if (!m || Number(m[1]) > 100_000 || (m[2] === undefined && i < parts.length - 1)) {
      throw new UsageError(
        `--churn-schedule: bad phase "${p}" (RATExSECONDS, e.g. 20x300,200x60,20; only the last ` +
          "may run on without seconds; at most 100000 a second)",
      );
    }
    return { perSecond: Number(m[1]), seconds: m[2] === undefined ? null : Number(m[2]) };
  });
}

/** Options of {@linkcode runChurn}. */
export interface ChurnOptions {
  /** Random source of the changes. @default prng(7) */
  rand?: () => number;
  /** What changes do. @default inserts, updates and deletions */
  kinds?: readonly ChurnKind[];
  /** Ends the schedule early. */
  signal?: AbortSignal;
  /** Told after each change, with the registry's sequence after it. */
  onChange?: (seq: number) => void;
  /** Told when a phase begins. */
  onPhase?: (phase: ChurnPhase, index: number) => void;
  /** What the phases are timed by and the looks wait on. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** Pause between looks at the clock, in milliseconds. @default 5 */
  lookEveryMs?: number;
}

/**
 * Makes the schedule's changes on `data`, each phase's spread over its time (every change due by
 * the clock is made at each look, so a slow look never loses changes). Resolves when the last
 * phase with seconds ends, or at `signal`.
 */
export async function runChurn(
  data: RegistryData,
  phases: readonly ChurnPhase[],
  options: ChurnOptions = {},
): Promise<void> {
  const clock = options.clock ?? SYSTEM_CLOCK;
  const now = () => clock.now();
  const lookEveryMs = options.lookEveryMs ?? 5;
  const rand = options.rand ?? prng(7);
  const kinds = options.kinds ?? CHURN_KINDS;
  for (const [i, phase] of phases.entries()) {
    options.onPhase?.(phase, i);
    const start = now();
    const end = phase.seconds === null ? Infinity : start + phase.seconds * 1000;
    let made = 0;
    for (;;) {
      if (options.signal?.aborted) return;
      const t = Math.min(now(), end);
      const due = Math.floor(((t - start) / 1000) * phase.perSecond);
      for (; made < due && !options.signal?.aborted; made++) {
        data.churn(1, rand, kinds);
        options.onChange?.(data.updateSeq);
      }
      if (t >= end) break;
      await clock.sleep(lookEveryMs);
    }
  }
}
