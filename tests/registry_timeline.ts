/**
 * A registry's whole history for end-to-end tests: the bundled real names it starts from, every
 * change it made (so what it held at any sequence is known), and the assertion that an export is
 * exactly one of those states.
 */
import assert from "node:assert/strict";
import { bundledNames, prng } from "../lib/sim/names.ts";
import type { RegistryData } from "../lib/sim/registry/registry_data.ts";

/** Every `k`-th of the bundled real npm names, up to `n`. */
export async function realNames(n: number): Promise<string[]> {
  const all = await bundledNames();
  const step = Math.max(1, Math.floor(all.length / n));
  return all.filter((_, i) => i % step === 0).slice(0, n);
}

/** A registry's whole history: what it held at each sequence, for any sequence asked later. */
export class Timeline {
  #initial: Map<string, string>;
  #changes: { seq: number; id: string; rev: string; deleted: boolean }[] = [];

  constructor(readonly data: RegistryData) {
    this.#initial = new Map(data.keys.map((k, i) => [k, data.revAt(i)]));
  }

  /** Changes the registry `perSecond` times a second (one at a time) until stopped. */
  churn(perSecond: number): { stop: () => number } {
    const rand = prng(23);
    const t = setInterval(() => {
      this.data.churn(1, rand);
      // (Recorded from the data: a change the feed never shows happened all the same.)
      const c = this.data.lastChange;
      if (c && c.seq !== this.#changes.at(-1)?.seq) this.#changes.push({ ...c });
    }, 1000 / perSecond);
    return { stop: () => (clearInterval(t), this.#changes.length) };
  }

  /** The registry's items at sequence `seq`: id → revision. */
  stateAt(seq: number): Map<string, string> {
    const state = new Map(this.#initial);
    for (const c of this.#changes) {
      if (c.seq > seq) break;
      if (c.deleted) state.delete(c.id);
      else state.set(c.id, c.rev);
    }
    return state;
  }

  /**
   * What each id may hold in a copy proven at `at` with the changes read after it applied too, up
   * to `to`: its state at `at`, or, for an id changed in (at, to], any state it took there (null:
   * absent).
   */
  allowedBetween(at: number, to: number): Map<string, Set<string | null>> {
    const allowed = new Map<string, Set<string | null>>();
    for (const [id, rev] of this.stateAt(at)) allowed.set(id, new Set([rev]));
    for (const c of this.#changes) {
      if (c.seq <= at) continue;
      if (c.seq > to) break;
      const set = allowed.get(c.id) ?? allowed.set(c.id, new Set([null])).get(c.id)!;
      set.add(c.deleted ? null : c.rev);
    }
    return allowed;
  }
}

/**
 * The sequences a finished crawl's check reports: `at` (" at seq S") and, where the changes read
 * after it were applied too, `to` (" (to seq S2)"); `parse` reads a sequence as the registry's state.
 */
export function reportedSeqs(
  line: string,
  parse: (seq: string) => number,
): { at: number; to: number | null } {
  const m = / at seq (\S+?)(,|$| )/.exec(line);
  assert.ok(m, `no sequence in ${line}`);
  const to = /changes read after it applied too \(to seq (\S+?)\)/.exec(line);
  return { at: parse(m[1]), to: to ? parse(to[1]) : null };
}

/**
 * Asserts the export is what a crawl proven at `at` holds, with the changes read after it applied
 * up to `to` (see `Timeline.allowedBetween`): every id at its state at `at` but for ids changed
 * in (at, to], each at a state it took there; documents at their listed revisions.
 */
export function assertExportWithin(
  ndjson: string,
  timeline: Timeline,
  seqs: { at: number; to: number | null },
  docs: boolean,
): void {
  if (seqs.to === null) return assertExportIs(ndjson, timeline.stateAt(seqs.at), docs);
  const allowed = timeline.allowedBetween(seqs.at, seqs.to);
  const seen = new Map<string, string>();
  for (const line of ndjson.split("\n")) {
    if (line === "") continue;
    const it = JSON.parse(line);
    assert.ok(!seen.has(it.id), `${it.id} exported twice`);
    seen.set(it.id, it.rev);
    if (docs) assert.equal(it.doc?._rev, it.rev, `${it.id}: document at its listed revision`);
  }
  const wrong = [...allowed].filter(([id, ok]) => !ok.has(seen.get(id) ?? null));
  const extra = [...seen.keys()].filter((id) => !allowed.has(id));
  assert.deepEqual({ wrong: wrong.slice(0, 3), extra: extra.slice(0, 3) }, {
    wrong: [],
    extra: [],
  });
}

/** Asserts the export (NDJSON) is exactly `state`, documents at their listed revisions. */
export function assertExportIs(ndjson: string, state: Map<string, string>, docs: boolean): void {
  const seen = new Map<string, string>();
  for (const line of ndjson.split("\n")) {
    if (line === "") continue;
    const it = JSON.parse(line);
    assert.ok(!seen.has(it.id), `${it.id} exported twice`);
    seen.set(it.id, it.rev);
    if (docs) {
      assert.ok(it.doc, `${it.id} has its document (${JSON.stringify(it).slice(0, 200)})`);
      assert.equal(it.doc._rev, it.rev, `${it.id}: document at its listed revision`);
    }
  }
  const missing = [...state.keys()].filter((id) => !seen.has(id));
  const extra = [...seen.keys()].filter((id) => !state.has(id));
  const stale = [...state].filter(([id, rev]) => seen.has(id) && seen.get(id) !== rev);
  assert.deepEqual(
    { missing: missing.slice(0, 3), extra: extra.slice(0, 3), stale: stale.slice(0, 3) },
    { missing: [], extra: [], stale: [] },
  );
  assert.equal(seen.size, state.size);
}
