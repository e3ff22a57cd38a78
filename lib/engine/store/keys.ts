/**
 * The KV key layout: every key this project writes is built here, and keys are read back here
 * ({@linkcode parseKey}, {@linkcode crawlOfKey}, {@linkcode partOfKey}); nothing else tests tuple
 * positions.
 *
 * Layout (crawl ids and shard ids are the only variable parts besides item ids):
 *
 *     ["crawl", crawlId]                  CrawlRecord
 *     ["planning", crawlId]               PlanningState (who plans it, failed attempts)
 *     ["feed", crawlId]                   DriftState (its change feed: sequence, counts, lease)
 *     ["finish", crawlId]                 FinishState (who runs the crawl's final check)
 *     ["follow", crawlId]                 FollowState (how far behind a followed crawl is)
 *     ["shard", crawlId, shardId]         ShardRecord (range, cursor, counters, lease, failures)
 *     ["item", crawlId, idKeyPart]        item record bytes (see item_codec.ts)
 *     ["block", crawlId, firstId]         a keys-only page's rows, packed (see item_blocks.ts)
 *     ["chunk", crawlId, idKeyPart, n]    Uint8Array, part n of a large document
 *     ["dead", crawlId, shardId]          a wake-up message the KV queue gave up on
 *     ["split", crawlId, seq]             SplitRecord (dynamic rebalancing log)
 *     ["pending", crawlId, shardId]       1: the shard is not done (the index lease workers look in)
 *     ["beat", processId]                 Beat: a working process's heartbeat (see leases.ts)
 *     ["rdrift", crawlId, shardId, dir]   Deno.KvU64: changes applied in a shard's range since it
 *                                         was listed, `in` (items added) or `out` (items removed)
 *     ["note", crawlId, stream, n]        Note: what the n-th commit of a stream made true in the
 *                                         store (`s<shardId>`: a shard's pages; `feed`: the feed's
 *                                         batches and repairs), for sinks (see `notes.ts`)
 *     ["sinkat", crawlId, sink, stream]   number: the notes of a stream a sink has been given
 *     ["sinkstate", crawlId, sink]        string: the crawl's state a sink was last told (JSON)
 *     ["mhead", crawlId]                  number: the served mirror's last sequence
 *     ["mseq", crawlId, n]                MirrorChange: the mirror's n-th change (its by-seq log,
 *                                         one entry per id: an id's older entry is deleted)
 *     ["mdoc", crawlId, id]               MirrorEntry: an id's last change (sequence, revision)
 *     ["mlocal", crawlId, id]             a replicator's `_local` document written to the mirror
 *     ["pdoc", crawlId, idKeyPart]        a pending document: its item's document is behind its
 *                                         revision on the document host, asked again (bytes of
 *                                         JSON: `pending_docs.ts`)
 *     ["pdocs", crawlId]                  PendingDocsState: what asking them again did, and the
 *                                         `docs` stream's notes (documents that landed)
 *
 * @module
 */

/** Key builders, exported for the item part and for tests that need to look underneath. */
export const keys = {
  crawl: (crawlId: string): Deno.KvKey => ["crawl", crawlId],
  crawls: (): Deno.KvKey => ["crawl"],
  planning: (crawlId: string): Deno.KvKey => ["planning", crawlId],
  feed: (crawlId: string): Deno.KvKey => ["feed", crawlId],
  finish: (crawlId: string): Deno.KvKey => ["finish", crawlId],
  follow: (crawlId: string): Deno.KvKey => ["follow", crawlId],
  shard: (crawlId: string, shard: number): Deno.KvKey => ["shard", crawlId, shard],
  shards: (crawlId: string): Deno.KvKey => ["shard", crawlId],
  item: (crawlId: string, part: Deno.KvKeyPart): Deno.KvKey => ["item", crawlId, part],
  items: (crawlId: string): Deno.KvKey => ["item", crawlId],
  block: (crawlId: string, first: string): Deno.KvKey => ["block", crawlId, first],
  blocks: (crawlId: string): Deno.KvKey => ["block", crawlId],
  chunk: (
    crawlId: string,
    part: Deno.KvKeyPart,
    n: number,
  ): Deno.KvKey => ["chunk", crawlId, part, n],
  chunks: (crawlId: string, part?: Deno.KvKeyPart): Deno.KvKey =>
    part === undefined ? ["chunk", crawlId] : ["chunk", crawlId, part],
  dead: (crawlId: string, shard: number): Deno.KvKey => ["dead", crawlId, shard],
  deads: (crawlId: string): Deno.KvKey => ["dead", crawlId],
  split: (crawlId: string, seq: number): Deno.KvKey => ["split", crawlId, seq],
  splits: (crawlId: string): Deno.KvKey => ["split", crawlId],
  rangeDrift: (crawlId: string, shard: number, dir: "in" | "out"): Deno.KvKey => [
    "rdrift",
    crawlId,
    shard,
    dir,
  ],
  rangeDrifts: (crawlId: string): Deno.KvKey => ["rdrift", crawlId],
  pending: (crawlId: string, shard: number): Deno.KvKey => ["pending", crawlId, shard],
  pendings: (crawlId: string): Deno.KvKey => ["pending", crawlId],
  note: (crawlId: string, stream: string, n: number): Deno.KvKey => ["note", crawlId, stream, n],
  notes: (crawlId: string, stream?: string): Deno.KvKey =>
    stream === undefined ? ["note", crawlId] : ["note", crawlId, stream],
  sinkAt: (crawlId: string, sink: string, stream: string): Deno.KvKey => [
    "sinkat",
    crawlId,
    sink,
    stream,
  ],
  sinksAt: (crawlId: string, sink?: string): Deno.KvKey =>
    sink === undefined ? ["sinkat", crawlId] : ["sinkat", crawlId, sink],
  sinkState: (crawlId: string, sink: string): Deno.KvKey => ["sinkstate", crawlId, sink],
  sinkStates: (crawlId: string): Deno.KvKey => ["sinkstate", crawlId],
  mirrorHead: (crawlId: string): Deno.KvKey => ["mhead", crawlId],
  mirrorSeq: (crawlId: string, n: number): Deno.KvKey => ["mseq", crawlId, n],
  mirrorSeqs: (crawlId: string): Deno.KvKey => ["mseq", crawlId],
  mirrorDoc: (crawlId: string, id: string): Deno.KvKey => ["mdoc", crawlId, id],
  mirrorDocs: (crawlId: string): Deno.KvKey => ["mdoc", crawlId],
  mirrorLocal: (crawlId: string, id: string): Deno.KvKey => ["mlocal", crawlId, id],
  mirrorLocals: (crawlId: string): Deno.KvKey => ["mlocal", crawlId],
  pendingDoc: (crawlId: string, part: Deno.KvKeyPart): Deno.KvKey => ["pdoc", crawlId, part],
  pendingDocs: (crawlId: string): Deno.KvKey => ["pdoc", crawlId],
  pendingDocsState: (crawlId: string): Deno.KvKey => ["pdocs", crawlId],
  beat: (processId: string): Deno.KvKey => ["beat", processId],
  beats: (): Deno.KvKey => ["beat"],
};

/** A key of the items layout, read back into its parts (see `keys`). */
export type ItemKey =
  | { kind: "item"; crawlId: string; part: Deno.KvKeyPart }
  | { kind: "block"; crawlId: string; first: string }
  | { kind: "chunk"; crawlId: string; part: Deno.KvKeyPart; n: number };

/**
 * The parts of an item, block or chunk key (built by `keys`); null for any other key. Readers of
 * keys go through this instead of testing tuple positions by hand.
 */
export function parseKey(key: Deno.KvKey): ItemKey | null {
  const [kind, crawlId, a, b] = key;
  if (typeof crawlId !== "string") return null;
  if (kind === "item" && key.length === 3) return { kind, crawlId, part: a };
  if (kind === "block" && key.length === 3 && typeof a === "string") {
    return { kind, crawlId, first: a };
  }
  if (kind === "chunk" && key.length === 4 && typeof b === "number") {
    return { kind, crawlId, part: a, n: b };
  }
  return null;
}

/** The crawl id of a key written under a crawl (every layout above but `beat`). */
export function crawlOfKey(key: Deno.KvKey): string {
  const id = key[1];
  if (typeof id !== "string") throw new TypeError(`not a crawl's key: ${JSON.stringify(key)}`);
  return id;
}

/**
 * The part after the crawl id of a key written under a crawl: an item's id part, a block's first
 * id, a chunk's item, a shard id, a split's sequence.
 */
export function partOfKey(key: Deno.KvKey): Deno.KvKeyPart {
  if (key.length < 3) throw new TypeError(`a key without a part: ${JSON.stringify(key)}`);
  return key[2];
}
