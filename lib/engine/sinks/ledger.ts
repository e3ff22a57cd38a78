/**
 * A crawl's ledger as its sinks see it: its streams (the feed's, each shard's pages, the pending
 * documents that landed later), the last note each holds, a sink's position in each, what the
 * store is current at, and how far behind each sink is.
 *
 * @module
 */
import { pendingDocsState } from "../items/mod.ts";
import {
  type CrawlRecord,
  DOCS_STREAM,
  type DriftState,
  FEED_STREAM,
  keys,
  kvOp,
  listShards,
  type PendingDocsState,
  type ShardRecord,
  shardStream,
} from "../store/mod.ts";
import type { SinkBatch, SinkState } from "./sink.ts";

/** How far behind the ledger a sink is (see {@linkcode sinkLag}). */
export interface SinkLag {
  /** The sink's name. */
  sink: string;
  /** Notes written that it was not given yet, over every stream. */
  behindNotes: number;
}

/** What a delivery reads once: the crawl's streams and what its store is current at. */
export interface Ledger {
  streams: Stream[];
  state: SinkState;
  keys: SinkBatch["keys"];
}

/** A stream of a crawl: its name, the last note written, and the sink's position in it. */
export interface Stream {
  name: string;
  head: number;
  at: number;
}

/**
 * How far behind crawl `crawlId`'s ledger each sink that was ever given any of it is (its
 * positions in KV against the streams' heads), by name. A sink never given anything is not listed.
 */
export async function sinkLag(
  ctx: { kv: Deno.Kv },
  crawlId: string,
  o: {
    /**
     * The crawl's shards, feed and pending documents' state as the caller read them (read here
     * otherwise).
     */
    read?: {
      shards: readonly ShardRecord[];
      feed: DriftState | null;
      docs: PendingDocsState | null;
    };
  } = {},
): Promise<SinkLag[]> {
  const { kv } = ctx;
  const at = new Map<string, Map<string, number>>();
  for await (const e of kv.list<number>({ prefix: keys.sinksAt(crawlId) })) {
    const [sink, stream] = [e.key[2] as string, e.key[3] as string];
    if (!at.has(sink)) at.set(sink, new Map());
    at.get(sink)!.set(stream, e.value);
  }
  // A crawl no sink was ever given reads nothing more (status reads this at every refresh).
  if (at.size === 0) return [];
  const streams = o.read
    ? headsOf(o.read.feed, o.read.shards, o.read.docs)
    : (await ledgerOf(kv, crawlId, null)).streams;
  return [...at].map(([sink, pos]) => ({
    sink,
    behindNotes: streams.reduce((n, s) => n + Math.max(0, s.head - (pos.get(s.name) ?? 0)), 0),
  }));
}

/**
 * A crawl's streams and the last note each holds, from its feed, shard and pending documents'
 * records (the `docs` stream only once a document landed late).
 */
function headsOf(
  feed: DriftState | null,
  shards: readonly ShardRecord[],
  docs: PendingDocsState | null,
): Stream[] {
  return [
    { name: FEED_STREAM, head: feed?.notes ?? 0, at: 0 },
    ...shards.map((s) => ({ name: shardStream(s.id), head: s.notes ?? 0, at: 0 })),
    ...(docs?.notes ? [{ name: DOCS_STREAM, head: docs.notes, at: 0 }] : []),
  ];
}

/**
 * The crawl's streams with their heads (the records' note counts) and `sink`'s positions (none
 * when null), and what its store is current at.
 */
export async function ledgerOf(kv: Deno.Kv, crawlId: string, sink: string | null): Promise<Ledger> {
  const [feed, crawl, shards, docs] = await Promise.all([
    kvOp(() => kv.get<DriftState>(keys.feed(crawlId))),
    kvOp(() => kv.get<CrawlRecord>(keys.crawl(crawlId))),
    listShards(kv, crawlId),
    pendingDocsState(kv, crawlId),
  ]);
  const heads = headsOf(feed.value, shards.map((e) => e.value), docs.value);
  const at = new Map<string, number>();
  if (sink !== null) {
    for await (const e of kv.list<number>({ prefix: keys.sinksAt(crawlId, sink) })) {
      at.set(e.key[3] as string, e.value);
    }
  }
  const c = crawl.value;
  const state: SinkState = {
    crawlId,
    seq: feed.value?.seq ?? c?.startSeq ?? null,
    status: c?.status ?? "unknown",
    verification: c?.verification
      ? { status: c.verification.status, detail: c.verification.detail }
      : null,
  };
  const keyKind = c?.view !== undefined
    ? "view-rows"
    : c?.idOrder === "utf16"
    ? "utf16-keys"
    : "ids";
  return {
    streams: heads.map((h) => ({ ...h, at: at.get(h.name) ?? 0 })),
    state,
    keys: keyKind,
  };
}
