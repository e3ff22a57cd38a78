/**
 * Giving a sink what the ledger noted since its position: for each stream of a crawl (the feed's,
 * each shard's pages, and pending documents that landed later), the notes after the sink's position there, each turned into batches of
 * what the store holds now where the note says it changed, and the position moved on after each
 * note was applied (at least once: a sink killed between the two is given that note again, which
 * changes nothing). A sink whose position fell behind what a stream keeps (`MAX_NOTES`), or that
 * is new to a crawl whose notes were cut, is given the whole crawl again, shard range by shard
 * range, from positions read first.
 *
 * @module
 */
import { itemsBetween, storedRevision } from "../items/mod.ts";
import { keys, kvOp, listShards, type Note } from "../store/mod.ts";
import type { Sink, SinkBatch, SinkState } from "./sink.ts";
import { ledgerOf, type Stream } from "./ledger.ts";

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
/**
 * Items a batch holds at most: a range's items read back are gathered up to this many (or
 * {@linkcode SINK_BATCH_BYTES} of documents) before the sink is given them, so that a database
 * writes a few large transactions rather than a page's worth each. @default
 */
export const SINK_BATCH_ROWS = 2_000;
/** Document bytes a batch holds at most (see {@linkcode SINK_BATCH_ROWS}). @default */
export const SINK_BATCH_BYTES = 8 << 20;
/** Notes of one stream merged into one at most (touching ranges, or ids). @default */
const GROUP_NOTES = 100;
/** Ids an `ids` note merged from several holds at most. */
const GROUP_IDS = 2_000;

/** How much one delivery gives. */
export interface DeliverOptions {
  /** Notes given at most, over every stream. @default DELIVER_NOTES */
  maxNotes?: number;
  /** Items a batch holds at most. @default SINK_BATCH_ROWS */
  batchRows?: number;
}

/**
 * Delivers to `sink` until it holds every note crawl `crawlId`'s ledger has (a followed crawl
 * may note more meanwhile: those too). A sink that throws stops it, and the error is thrown.
 *
 * @example
 * ```ts
 * await deliverAll({ kv }, crawlId, sqliteSink("copy.db#packages"));
 * ```
 */
export async function deliverAll(
  ctx: { kv: Deno.Kv },
  crawlId: string,
  sink: Sink,
  o: DeliverOptions = {},
): Promise<void> {
  while ((await deliver(ctx, crawlId, sink, o)).behind > 0) { /* the next notes */ }
}

/** Deliveries under way in this process, by sink: a second one waits for the first. */
const underWay = new WeakMap<Sink, Promise<unknown>>();

/**
 * Gives `sink` what crawl `crawlId`'s ledger noted since its position (see the module comment),
 * at most `maxNotes` notes. A sink that throws stops the delivery (its position stays where its
 * last applied note left it) and the error is thrown. Deliveries to one sink in one process take
 * turns (a run's last drain waits for its sink loop's delivery instead of giving the same notes
 * twice at once).
 */
export async function deliver(
  ctx: { kv: Deno.Kv },
  crawlId: string,
  sink: Sink,
  o: DeliverOptions = {},
): Promise<Delivered> {
  const before = underWay.get(sink) ?? Promise.resolve();
  const run = before.catch(() => {}).then(() => deliverNow(ctx, crawlId, sink, o));
  underWay.set(sink, run);
  try {
    return await run;
  } finally {
    if (underWay.get(sink) === run) underWay.delete(sink);
  }
}

async function deliverNow(
  ctx: { kv: Deno.Kv },
  crawlId: string,
  sink: Sink,
  o: DeliverOptions = {},
): Promise<Delivered> {
  const { kv } = ctx;
  const { streams, state, keys: keyKind } = await ledgerOf(kv, crawlId, sink.name);
  const out: Delivered = { notes: 0, batches: 0, resynced: false, behind: 0 };
  const told = {
    kv,
    crawlId,
    sink,
    seq: state.seq,
    keys: keyKind,
    batchRows: o.batchRows ?? SINK_BATCH_ROWS,
  };
  if (await fellBehind(kv, crawlId, streams)) {
    out.batches += await resync(told, streams);
    out.resynced = true;
    await tellState(told, state);
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
    // Notes that merge (touching ranges, or ids) are given as one, then the position moves past
    // all of them: fewer, larger batches, and the same at-least-once.
    for (let i = 0; i < notes.length;) {
      let merged = notes[i].value;
      let j = i + 1;
      for (; j < notes.length && j - i < GROUP_NOTES; j++) {
        const next = mergeNotes(merged, notes[j].value);
        if (next === null) break;
        merged = next;
      }
      out.batches += await applyNote(told, merged);
      const last = notes[j - 1].key[3] as number;
      await kvOp(() => kv.set(keys.sinkAt(crawlId, sink.name, s.name), last));
      out.notes += j - i;
      budget -= j - i;
      i = j;
    }
    out.behind += Math.max(0, s.head - s.at - notes.length);
  }
  if (out.behind === 0) await tellState(told, state);
  return out;
}

/** What one delivery hands each batch: where, to whom, and the sequence the store was at. */
interface Told {
  kv: Deno.Kv;
  crawlId: string;
  sink: Sink;
  seq: string | null;
  keys: SinkBatch["keys"];
  batchRows: number;
}

/**
 * `a` and `b` as one note when they merge: a range ending where the next starts, or two lists of
 * ids (up to `GROUP_IDS`); null otherwise.
 */
function mergeNotes(a: Note, b: Note): Note | null {
  if (a.kind === "range" && b.kind === "range") {
    return a.to !== null && a.to === b.from ? { kind: "range", from: a.from, to: b.to } : null;
  }
  if (a.kind === "ids" && b.kind === "ids" && a.ids.length + b.ids.length <= GROUP_IDS) {
    return { kind: "ids", ids: [...new Set([...a.ids, ...b.ids])] };
  }
  return null;
}

/** Tells the sink the crawl's state when it changed since it was last told (kept in KV). */
async function tellState(t: Told, state: SinkState): Promise<void> {
  if (!t.sink.state) return;
  const said = JSON.stringify(state);
  const key = keys.sinkState(t.crawlId, t.sink.name);
  const last = await kvOp(() => t.kv.get<string>(key));
  if (last.value === said) return;
  await t.sink.state(state);
  await kvOp(() => t.kv.set(key, said));
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
async function resync(t: Told, streams: Stream[]) {
  const shards = (await listShards(t.kv, t.crawlId)).map((e) => e.value);
  let batches = 0;
  for (const shard of shards) {
    batches += await applyNote(t, { kind: "range", from: shard.start, to: shard.end });
  }
  for (const s of streams) {
    await kvOp(() => t.kv.set(keys.sinkAt(t.crawlId, t.sink.name, s.name), s.head));
  }
  return batches;
}

/** One note applied: what the store holds now where it changed, in batches. */
async function applyNote(t: Told, note: Note): Promise<number> {
  if (note.kind === "ids") return await applyIds(t, note.ids);
  const { kv, crawlId, sink, seq, keys: keyKind } = t;
  // The range in parts that follow the batches read: each part holds exactly its batch. Reads are
  // gathered into a batch up to `batchRows` items or `SINK_BATCH_BYTES` of documents.
  let batches = 0;
  let lo = note.from;
  let pending: SinkBatch | null = null;
  let bytes = 0;
  for await (const items of itemsBetween(kv, crawlId, { from: note.from, to: note.to })) {
    if (pending && pending.items.length < t.batchRows && bytes < SINK_BATCH_BYTES) {
      for (const it of items) pending.items.push(it);
    } else {
      if (pending) {
        pending.range!.to = items[0].id;
        await sink.apply(pending);
        batches++;
        lo = items[0].id;
      }
      pending = {
        crawlId,
        range: { from: lo, to: note.to },
        items: [...items],
        deleted: [],
        seq,
        keys: keyKind,
      };
      bytes = 0;
    }
    for (const it of items) bytes += it.doc?.length ?? 0;
  }
  await sink.apply(
    pending ?? {
      crawlId,
      range: { from: lo, to: note.to },
      items: [],
      deleted: [],
      seq,
      keys: keyKind,
    },
  );
  return batches + 1;
}

/** Ids a note names: the items the store holds for them, and the rest deleted. */
async function applyIds(t: Told, ids: string[]): Promise<number> {
  const { kv, crawlId, sink, seq, keys: keyKind } = t;
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
  await sink.apply({ crawlId, range: null, items, deleted, seq, keys: keyKind });
  return 1;
}
