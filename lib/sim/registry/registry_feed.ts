/**
 * How the simulated registry's database info and change feed misbehave over time, as registries
 * and what stands in front of them were seen to: a database info stuck at one sequence (a replica
 * that stopped), served from a cache, running ahead of the feed's numbering, or spelling a state
 * otherwise than the feed's rows do (a cluster behind a proxy); a feed that refuses or fails for a
 * while. Tests change these while the registry runs ({@linkcode FeedControls} is read at every
 * request); renumbering, hidden changes and a feed that forgot are the data's own
 * (`RegistryData.renumber`, `feedHideRate`, `forgetFeed`).
 *
 * @module
 */
import type { RegistryData } from "./registry_data.ts";

/** What a running registry's database info and feed do now (read at every request). */
export interface FeedControls {
  /** `_changes` answers this HTTP status while set (400: refused, 500: failing). @default null */
  feedStatus?: number | null;
  /**
   * The database info's `update_seq` stands still at what it showed when this was set (a replica
   * that stopped following its primary). @default false
   */
  infoFrozen?: boolean;
  /** The database info is served from a cache at most this old, in ms (a CDN). @default 0 */
  infoCacheMs?: number;
  /** The database info's `update_seq` runs this far ahead of the feed's numbering. @default 0 */
  infoAhead?: number;
  /**
   * With opaque sequences, the database info spells each state otherwise than the feed's rows do
   * (the same state, read back as it). @default false
   */
  infoOtherSpelling?: boolean;
}

/** The state the database info's `update_seq` stands for now, as {@linkcode FeedControls} make it. */
export class DbInfoSeq {
  #frozen: number | null = null;
  #cached: { atMs: number; seq: number } | null = null;

  /** Over `data`, as `controls` say (read at every call). */
  constructor(readonly data: RegistryData, readonly controls: FeedControls = {}) {}

  /** The state (a sequence before the codec shows it) the database info gives at `nowMs`. */
  state(nowMs = Date.now()): number {
    const c = this.controls;
    let seq = this.data.updateSeq;
    if (c.infoFrozen) seq = this.#frozen ??= seq;
    else this.#frozen = null;
    const cacheMs = c.infoCacheMs ?? 0;
    if (cacheMs > 0) {
      if (!this.#cached || nowMs - this.#cached.atMs >= cacheMs) {
        this.#cached = { atMs: nowMs, seq };
      }
      seq = this.#cached.seq;
    } else {
      this.#cached = null;
    }
    return seq + (c.infoAhead ?? 0);
  }
}
