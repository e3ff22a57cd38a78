/**
 * The served mirror's own sequence, kept through the sink seam: each batch of what the store holds
 * is compared with each id's last change in the mirror's log (`engine/store/mirror_log.ts`), and
 * what differs (a new id, another revision, an id the store no longer holds) is appended as a
 * change. An initial crawl thus counts as changes in the order its pages came (key order within a
 * shard), then every change the follower applies; a batch given twice appends nothing.
 *
 * @module
 */
import { PermanentError } from "../base/errors.ts";
import {
  appendMirrorChanges,
  type MirrorChange,
  mirrorEntriesBetween,
  mirrorEntriesOf,
  type MirrorEntry,
  mirrorHeadEntry,
  type Sink,
  type SinkBatch,
} from "../engine/mod.ts";

/** The mirror sink's name: its position in each crawl's KV. */
export const MIRROR_SINK = "mirror";

/**
 * The sink that keeps the mirror's change log of every crawl it is given (documents crawls only:
 * a view's rows or ids in UTF-16 order are refused).
 *
 * @example
 * ```ts
 * using kv = await Deno.openKv("crawl.kv");
 * await deliver({ kv }, "c6a984ac0266", mirrorSink(kv)); // the log catches up with the ledger
 * ```
 */
export function mirrorSink(kv: Deno.Kv): Sink {
  return {
    name: MIRROR_SINK,
    async apply(b: SinkBatch) {
      if (b.keys !== "ids") {
        throw new PermanentError(
          `crawl ${b.crawlId} holds ${
            b.keys === "view-rows" ? "a view's rows" : "ids in UTF-16 order"
          }: the mirror serves documents crawls`,
        );
      }
      // The head first: a writer after it is then seen when appending (the entries read after).
      const head = await mirrorHeadEntry(kv, b.crawlId);
      const known: Map<string, Deno.KvEntryMaybe<MirrorEntry>> = b.range
        ? await mirrorEntriesBetween(kv, b.crawlId, b.range)
        : await mirrorEntriesOf(kv, b.crawlId, [...b.items.map((it) => it.id), ...b.deleted]);
      const changes: { change: MirrorChange; prev: MirrorEntry | null }[] = [];
      const held = new Set<string>();
      for (const it of b.items) {
        held.add(it.id);
        const prev = known.get(it.id)?.value ?? null;
        if (prev && prev.rev === it.rev && !prev.deleted) continue;
        changes.push({ change: { id: it.id, rev: it.rev }, prev });
      }
      const gone = b.range
        ? [...known.keys()].filter((id) => !held.has(id))
        : b.deleted.filter((id) => !held.has(id));
      for (const id of gone) {
        const prev = known.get(id)?.value ?? null;
        if (!prev || prev.deleted) continue;
        const change = { id, rev: tombstoneRev(prev.rev), deleted: true as const };
        changes.push({ change: { ...change, from: prev.rev }, prev });
      }
      await appendMirrorChanges(kv, b.crawlId, changes, { head });
    },
  };
}

/**
 * The revision the mirror gives a deletion: one generation past the revision deleted, its hash
 * derived from it (the same for every mirror of the same data), so that a replicator's copy takes
 * it as the next revision of that document (a deletion at the same revision would change nothing
 * there).
 */
export function tombstoneRev(rev: string): string {
  const gen = Number.parseInt(rev, 10) || 0;
  let hex = "";
  for (const seed of [0x811c9dc5, 0x01000193, 0x5bd1e995, 0x27d4eb2f]) {
    let h = seed >>> 0;
    for (const b of new TextEncoder().encode(`deleted:${rev}`)) {
      h = Math.imul(h ^ b, 0x01000193) >>> 0;
    }
    hex += h.toString(16).padStart(8, "0");
  }
  return `${gen + 1}-${hex}`;
}
