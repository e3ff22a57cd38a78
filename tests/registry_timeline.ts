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
      const [c] = this.data.changes(this.data.updateSeq - 1, 1).results;
      if (c) this.#changes.push(c);
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
