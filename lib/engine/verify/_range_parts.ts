/**
 * Ranges the final check proves a part at a time. A range is decided only by a check whose window
 * saw no change inside it (`_verdicts.ts`); one range over a registry that changes 50 times a second
 * (a crawl with `--shards 1`, or few shards) sees one in every window, and would wait forever. So a
 * range left undecided twice in a pass is cut at stored ids into parts (`cutStored`), each counted
 * from the store and checked as a range of its own; a part left undecided is cut again, into as
 * many parts as changes it saw (twice over). A part proven stays in step as the feed is applied, as
 * a proven shard does, so the range is proven once every part is; a part that disagrees makes the
 * range a mismatch (listed again, as a whole).
 *
 * @module
 */
import type { CutOptions, StoredPart } from "../items/mod.ts";
import { type RangeToCheck, type RangeVerdict, showKey } from "./_verdicts.ts";
import type { ShardRecord } from "../store/mod.ts";

/** Times a range is left undecided as a whole in one pass before it is checked in parts. */
const WHOLE_TRIES = 2;
/** Parts one range may be cut into. */
const MAX_PARTS_PER_RANGE = 256;
/** Parts held by one pass over all its ranges (memory and requests per round stay bounded). */
const MAX_PARTS_PER_PASS = 4_096;
/** Most parts one cut makes. */
const MAX_CUT = 64;
/** Parts checked by one call of the check (one window each). */
const PARTS_PER_CHECK = 256;

/** A part of a range not proven yet. */
interface Part extends StoredPart {
  /** Parts to cut it into before its next check (1: checked as it is). */
  cutInto: number;
}

/** What checking parts needs from the final check. */
export interface PartsCheck {
  /** Cuts a range of the store (see `cutStored`); null when it cannot be cut. */
  cut: (range: { start: string | null; end: string | null }, o: CutOptions) => Promise<
    StoredPart[] | null
  >;
  /** Checks ranges against the registry, reading the window after them (see `checkRanges`). */
  check: (ranges: RangeToCheck[]) => Promise<RangeVerdict[]>;
  /** What the store holds in a shard's range by its counters (listed plus changes applied). */
  stored: (shard: ShardRecord) => number;
}

/** Into how many parts a range or part that saw `margin` changes is cut. */
function cutFor(margin: number, stored: number): number {
  return Math.max(1, Math.min(MAX_CUT, 4 * Math.max(1, margin), stored));
}

/** The parts of the ranges one pass of the final check proves a part at a time. */
export class RangeParts {
  #undecided = new Map<number, number>();
  /** Ranges that cannot be cut (see `cutStored`): checked whole. */
  #uncuttable = new Set<number>();
  /** Per shard: its parts not proven yet; null until the range is first cut. */
  #parts = new Map<number, { first: number; left: Part[] | null }>();
  #held = 0;
  #provenParts = 0;

  /** Whether the shard's range is checked in parts. */
  has(shardId: number): boolean {
    return this.#parts.has(shardId);
  }

  /** Parts proven so far (a measure of progress). */
  get provenParts(): number {
    return this.#provenParts;
  }

  /** Parts held now, over all ranges. */
  get size(): number {
    return this.#held;
  }

  /**
   * Notes a whole range left undecided with `margin` changes seen; the second time in a pass
   * (while the pass holds fewer than its bound of parts) the range is checked in parts from the
   * next round on.
   */
  noteUndecided(shard: ShardRecord, margin: number, stored: number): void {
    const times = (this.#undecided.get(shard.id) ?? 0) + 1;
    this.#undecided.set(shard.id, times);
    const into = cutFor(margin, stored);
    if (times < WHOLE_TRIES || into < 2 || this.#uncuttable.has(shard.id)) return;
    if (this.#held + into > MAX_PARTS_PER_PASS) return;
    this.#parts.set(shard.id, { first: into, left: null });
  }

  /**
   * Checks the parts of `shards` (all checked in parts): cuts those due a cut, counts each from
   * the store, checks them against the registry, and returns one verdict per shard: `equal` once
   * no part is left, `mismatch` when a part disagrees (or the store's items disagree with its
   * counters), `undecided` otherwise. A range that cannot be cut is checked whole again.
   */
  async check(shards: readonly ShardRecord[], o: PartsCheck): Promise<RangeVerdict[]> {
    const out = new Map<number, RangeVerdict>();
    const checking: { shard: ShardRecord; part: Part }[] = [];
    for (const shard of shards) {
      const parts = await this.#cut(shard, o);
      if (parts === "uncut") out.set(shard.id, this.#verdict(shard, o, "undecided"));
      else if (typeof parts === "number") {
        out.set(shard.id, this.#verdict(shard, o, "mismatch", parts));
      } else for (const part of parts) checking.push({ shard, part });
    }
    for (let i = 0; i < checking.length; i += PARTS_PER_CHECK) {
      const batch = checking.slice(i, i + PARTS_PER_CHECK);
      const verdicts = await o.check(batch.map(({ shard, part }, j) => ({
        id: j,
        start: part.start,
        end: part.end,
        stored: part.stored,
        relists: shard.relists ?? 0,
      })));
      for (const [j, v] of verdicts.entries()) this.#settle(batch[j], v, out, o);
    }
    for (const shard of shards) {
      if (out.has(shard.id)) continue;
      const left = this.#parts.get(shard.id)?.left ?? [];
      out.set(shard.id, this.#verdict(shard, o, left.length === 0 ? "equal" : "undecided"));
      if (left.length === 0) this.#drop(shard.id);
    }
    return shards.map((s) => out.get(s.id)!);
  }

  /** The shard's parts, cut and counted now; `uncut` or the count its items give when wrong. */
  async #cut(shard: ShardRecord, o: PartsCheck): Promise<Part[] | "uncut" | number> {
    const state = this.#parts.get(shard.id)!;
    const whole = state.left === null;
    const before = whole
      ? [{ start: shard.start, end: shard.end, stored: o.stored(shard), cutInto: state.first }]
      : state.left!;
    // Parts this cut may add, within both bounds.
    let room = Math.min(
      MAX_PARTS_PER_RANGE - before.length,
      MAX_PARTS_PER_PASS - this.#held - (whole ? before.length : 0),
    );
    const parts: Part[] = [];
    for (const p of before) {
      const into = Math.max(1, Math.min(p.cutInto, room + 1));
      const cut = await o.cut(p, { parts: into, expectedItems: p.stored });
      if (cut === null) {
        this.#drop(shard.id);
        this.#uncuttable.add(shard.id);
        return "uncut";
      }
      room -= cut.length - 1;
      parts.push(...cut.map((c) => ({ ...c, cutInto: 1 })));
    }
    // The first cut counts the whole range from its items: they must agree with the counters
    // every other check relies on.
    const counted = parts.reduce((n, p) => n + p.stored, 0);
    if (whole && counted !== o.stored(shard)) return this.#drop(shard.id), counted;
    this.#held += parts.length - (whole ? 0 : before.length);
    state.left = parts;
    return parts;
  }

  /** Records one part's verdict: proven parts leave, undecided ones are cut again next round. */
  #settle(
    at: { shard: ShardRecord; part: Part },
    v: RangeVerdict,
    out: Map<number, RangeVerdict>,
    o: PartsCheck,
  ): void {
    const { shard, part } = at;
    if (out.has(shard.id)) return;
    const state = this.#parts.get(shard.id)!;
    if (v.verdict === "mismatch") {
      const stored = o.stored(shard);
      out.set(shard.id, {
        id: shard.id,
        verdict: "mismatch",
        span: stored + v.span - v.stored,
        stored,
        margin: v.margin,
        why: `${v.why}; ${showKey(part.start)} → ${showKey(part.end)}, checked as a part, holds ` +
          `${v.stored} and the registry lists ${v.span}`,
      });
      this.#drop(shard.id);
    } else if (v.verdict === "equal") {
      state.left = state.left!.filter((p) => p !== part);
      this.#held--;
      this.#provenParts++;
    } else {
      part.cutInto = cutFor(v.margin, part.stored);
    }
  }

  /** A shard's verdict; a mismatch here is its items (`counted`) against its counters. */
  #verdict(
    shard: ShardRecord,
    o: PartsCheck,
    verdict: RangeVerdict["verdict"],
    counted?: number,
  ): RangeVerdict {
    const stored = o.stored(shard);
    const base = { id: shard.id, verdict, span: stored, stored, margin: 0 };
    if (counted === undefined) return base;
    return { ...base, why: `its items counted one by one are ${counted}, not ${stored}` };
  }

  #drop(shardId: number): void {
    this.#held -= this.#parts.get(shardId)?.left?.length ?? 0;
    this.#parts.delete(shardId);
    this.#undecided.delete(shardId);
  }
}
