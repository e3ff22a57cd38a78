/**
 * Giving a sink what the ledger noted since its position: for each stream of a crawl (the feed's,
 * and each shard's pages), the notes after the sink's position there, each turned into batches of
 * what the store holds now where the note says it changed, and the position moved on after each
 * note was applied (at least once: a sink killed between the two is given that note again, which
 * changes nothing). A sink whose position fell behind what a stream keeps (`MAX_NOTES`), or that
 * is new to a crawl whose notes were cut, is given the whole crawl again, shard range by shard
 * range, from positions read first.
 *
 * @module
 */
import { itemsBetween, storedRevision } from "../items/mod.ts";
import { FEED_STREAM, keys, kvOp, listShards, type Note, shardStream } from "../store/mod.ts";
import type { Sink, SinkBatch } from "./sink.ts";

/** What one delivery did. */
export interface Delivered {
  /** Notes given to the sink. */
  notes: number;
  /** Batches the sink applied. */
  batches: number;
  /** The whole crawl was given again (the sink was behind what the ledger keeps). */
  resynced: boolean;
  /** Notes still waiting (more than `maxNotes` were). */
  behind: number;
}

/** Notes one delivery gives a sink at most, over every stream. @default */
export const DELIVER_NOTES = 1_000;

/** A stream of a crawl: its name, the last note written, and the sink's position in it. */
interface Stream {
  name: string;
  head: number;
  at: number;
}

/**
 * Gives `sink` what crawl `crawlId`'s ledger noted since its position (see the module comment),
 * at most `maxNotes` notes. A sink that throws stops the delivery (its position stays where its
 * last applied note left it) and the error is thrown.
 */
export async function deliver(
  ctx: { kv: Deno.Kv },
  crawlId: string,
  sink: Sink,
  o: { maxNotes?: number } = {},
): Promise<Delivered> {
  const { kv } = ctx;
  const streams = await streamsOf(kv, crawlId, sink.name);
  const out: Delivered = { notes: 0, batches: 0, resynced: false, behind: 0 };
  if (await fellBehind(kv, crawlId, streams)) {
    out.batches += await resync(kv, crawlId, sink, streams);
    out.resynced = true;
    return out;
  }
  let budget = o.maxNotes ?? DELIVER_NOTES;
  for (const s of streams) {
    if (s.at >= s.head) continue;
    if (budget <= 0) {
      out.behind += s.head - s.at;
      continue;
    }
    const selector = {
      start: keys.note(crawlId, s.name, s.at + 1),
      end: keys.note(crawlId, s.name, s.head + 1),
    };
    const notes: Deno.KvEntry<Note>[] = [];
    for await (const e of kv.list<Note>(selector, { limit: budget })) notes.push(e);
    for (const e of notes) {
      out.batches += await applyNote(kv, crawlId, sink, e.value);
      await kvOp(() => kv.set(keys.sinkAt(crawlId, sink.name, s.name), e.key[3] as number));
      out.notes++;
      budget--;
    }
    out.behind += Math.max(0, s.head - s.at - notes.length);
  }
  return out;
}

/** The crawl's streams with their heads (the records' note counts) and the sink's positions. */
async function streamsOf(kv: Deno.Kv, crawlId: string, sink: string): Promise<Stream[]> {
  const [feed, shards] = await Promise.all([
    kvOp(() => kv.get<{ notes?: number }>(keys.feed(crawlId))),
    listShards(kv, crawlId),
  ]);
  const heads = [
    { name: FEED_STREAM, head: feed.value?.notes ?? 0 },
    ...shards.map((e) => ({ name: shardStream(e.value.id), head: e.value.notes ?? 0 })),
  ];
  const at = new Map<string, number>();
  for await (const e of kv.list<number>({ prefix: keys.sinksAt(crawlId, sink) })) {
    at.set(e.key[3] as string, e.value);
  }
  return heads.map((h) => ({ ...h, at: at.get(h.name) ?? 0 }));
}

/** Whether some stream no longer keeps the note after the sink's position there. */
async function fellBehind(kv: Deno.Kv, crawlId: string, streams: Stream[]): Promise<boolean> {
  for (const s of streams) {
    if (s.at >= s.head) continue;
    const next = await kvOp(() => kv.get(keys.note(crawlId, s.name, s.at + 1)));
    if (next.versionstamp === null) return true;
  }
  return false;
}

/**
 * Gives the sink the whole crawl, shard range by shard range, then moves its positions to the
 * heads read before (what was noted meanwhile is given next time). Returns the batches applied.
 */
async function resync(kv: Deno.Kv, crawlId: string, sink: Sink, streams: Stream[]) {
  const shards = (await listShards(kv, crawlId)).map((e) => e.value);
  let batches = 0;
  for (const shard of shards) {
    batches += await applyNote(kv, crawlId, sink, {
      kind: "range",
      from: shard.start,
      to: shard.end,
    });
  }
  for (const s of streams) {
    await kvOp(() => kv.set(keys.sinkAt(crawlId, sink.name, s.name), s.head));
  }
  return batches;
}

/** One note applied: what the store holds now where it changed, in batches. */
async function applyNote(kv: Deno.Kv, crawlId: string, sink: Sink, note: Note): Promise<number> {
  if (note.kind === "ids") return await applyIds(kv, crawlId, sink, note.ids);
  // The range in parts that follow the batches read: each part holds exactly its batch.
  let batches = 0;
  let lo = note.from;
  let pending: SinkBatch | null = null;
  for await (const items of itemsBetween(kv, crawlId, { from: note.from, to: note.to })) {
    if (pending) {
      pending.range!.to = items[0].id;
      await sink.apply(pending);
      batches++;
      lo = items[0].id;
    }
    pending = { crawlId, range: { from: lo, to: note.to }, items, deleted: [] };
  }
  await sink.apply(
    pending ?? { crawlId, range: { from: lo, to: note.to }, items: [], deleted: [] },
  );
  return batches + 1;
}

/** Ids a note names: the items the store holds for them, and the rest deleted. */
async function applyIds(
  kv: Deno.Kv,
  crawlId: string,
  sink: Sink,
  ids: string[],
): Promise<number> {
  const items = [];
  const deleted: string[] = [];
  for (const id of ids) {
    // A record, or a row in a block (keys-only crawls keep most rows there).
    if (await storedRevision(kv, crawlId, id) === null) {
      deleted.push(id);
      continue;
    }
    for await (const got of itemsBetween(kv, crawlId, { from: id, to: id + "\0" })) {
      items.push(...got);
    }
  }
  await sink.apply({ crawlId, range: null, items, deleted });
  return 1;
}
