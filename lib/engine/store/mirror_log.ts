/**
 * The served mirror's own change log: what the mirror applied, in its own sequence (1, 2, 3, …),
 * stable across restarts and processes because it lives in KV beside the crawl. One entry per id
 * (`["mseq", crawl, n]`, the id's older entry deleted when it changes again, as CouchDB's by-seq
 * index keeps one row a document), and each id's last change (`["mdoc", crawl, id]`) to tell what
 * changed. A replicator's `_local` checkpoints are kept apart (`["mlocal", crawl, id]`).
 *
 * @module
 */
import { ConflictError, InputError } from "../../base/errors.ts";
import { keys } from "./keys.ts";
import { AtomicBudget, keySize, valueSizeBound } from "./kv_limits.ts";
import { getEntries, kvOp } from "./kv_ops.ts";

/** One change the mirror applied. */
export interface MirrorChange {
  /** The document's id. */
  id: string;
  /** Its revision (for a deletion, the tombstone's). */
  rev: string;
  /** Present when the document was deleted. */
  deleted?: true;
  /** A deletion's parent: the revision the document had before it. */
  from?: string;
}

/** An id's last change: its sequence and revision. */
export interface MirrorEntry {
  seq: number;
  rev: string;
  deleted?: true;
  /** A deletion's parent revision. */
  from?: string;
}

/** The mirror's last sequence (0 before its first change). */
export async function mirrorHead(kv: Deno.Kv, crawlId: string): Promise<number> {
  return (await kvOp(() => kv.get<number>(keys.mirrorHead(crawlId)))).value ?? 0;
}

/** The last changes of the ids in `[from, to)` (null: open), by id, with their entries. */
export async function mirrorEntriesBetween(
  kv: Deno.Kv,
  crawlId: string,
  range: { from: string | null; to: string | null },
): Promise<Map<string, Deno.KvEntry<MirrorEntry>>> {
  const prefix = keys.mirrorDocs(crawlId);
  const at = (id: string) => keys.mirrorDoc(crawlId, id);
  const { from, to } = range;
  const selector: Deno.KvListSelector = from === null
    ? to === null ? { prefix } : { prefix, end: at(to) }
    : to === null
    ? { prefix, start: at(from) }
    : { start: at(from), end: at(to) };
  const out = new Map<string, Deno.KvEntry<MirrorEntry>>();
  for await (const e of kv.list<MirrorEntry>(selector, { batchSize: 500 })) {
    out.set(e.key[2] as string, e);
  }
  return out;
}

/**
 * The log's head as an entry: read it before the entries a batch is compared with, and give it to
 * {@linkcode appendMirrorChanges}, which appends only while it is unchanged.
 */
export async function mirrorHeadEntry(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntryMaybe<number>> {
  return await kvOp(() => kv.get<number>(keys.mirrorHead(crawlId)));
}

/** The last changes of `ids` (absent ones: entries with a null versionstamp). */
export async function mirrorEntriesOf(
  kv: Deno.Kv,
  crawlId: string,
  ids: readonly string[],
): Promise<Map<string, Deno.KvEntryMaybe<MirrorEntry>>> {
  const got = await getEntries<MirrorEntry>(kv, ids.map((id) => keys.mirrorDoc(crawlId, id)));
  return new Map(got.map((e) => [e.key[2] as string, e]));
}

/**
 * Appends `changes` to the log in order, each given with the entry it replaces as read (null: the
 * id had none), in atomic ops within KV's limits. Every writer of the log moves its head, so each
 * op checks the head alone: `head` as read before those entries were (then any writer since is
 * seen), and after each op the head it wrote. Another writer meanwhile is a ConflictError, and
 * what was appended before it stays (a sink given the same batch again finds it applied).
 * @throws ConflictError when the log changed since `head` was read.
 */
export async function appendMirrorChanges(
  kv: Deno.Kv,
  crawlId: string,
  changes: readonly { change: MirrorChange; prev: MirrorEntry | null }[],
  o: { head: Deno.KvEntryMaybe<number> },
): Promise<void> {
  const headKey = keys.mirrorHead(crawlId);
  let head = o.head;
  let n = head.value ?? 0;
  let i = 0;
  while (i < changes.length) {
    const op = kv.atomic().check(head);
    const budget = new AtomicBudget().check(keySize(headKey));
    budget.set(keySize(headKey), 16);
    let taken = 0;
    for (; i < changes.length; i++) {
      const { change, prev } = changes[i];
      const docKey = keys.mirrorDoc(crawlId, change.id);
      const seqKey = keys.mirrorSeq(crawlId, n + 1);
      const entry: MirrorEntry = {
        seq: n + 1,
        rev: change.rev,
        ...(change.deleted ? { deleted: true } : {}),
        ...(change.from ? { from: change.from } : {}),
      };
      const need = new AtomicBudget().set(keySize(seqKey), valueSizeBound(change))
        .set(keySize(docKey), valueSizeBound(entry));
      if (prev) need.delete(keySize(keys.mirrorSeq(crawlId, prev.seq)));
      if (taken > 0 && !fits(budget, need)) break;
      if (prev) op.delete(keys.mirrorSeq(crawlId, prev.seq));
      op.set(seqKey, change).set(docKey, entry);
      add(budget, need);
      n++;
      taken++;
    }
    op.set(headKey, n);
    const res = await kvOp(() => op.commit());
    if (!res.ok) {
      throw new ConflictError(`the mirror's log of crawl ${crawlId} changed while it was written`);
    }
    head = { key: headKey, value: n, versionstamp: res.versionstamp };
  }
}

function fits(budget: AtomicBudget, more: AtomicBudget): boolean {
  const sum = new AtomicBudget();
  add(sum, budget);
  add(sum, more);
  return sum.fitsSet(0, null);
}

function add(to: AtomicBudget, more: AtomicBudget): void {
  to.checks += more.checks;
  to.mutations += more.mutations;
  to.payload += more.payload;
  to.setKeys += more.setKeys;
}

/** The log after `since`, in order, at most `limit` entries: `[seq, change]`. */
export async function* mirrorChangesSince(
  kv: Deno.Kv,
  crawlId: string,
  o: { since: number; limit?: number },
): AsyncGenerator<[number, MirrorChange]> {
  const selector = {
    prefix: keys.mirrorSeqs(crawlId),
    start: keys.mirrorSeq(crawlId, o.since + 1),
  };
  for await (
    const e of kv.list<MirrorChange>(selector, { limit: o.limit, batchSize: 500 })
  ) yield [e.key[2] as number, e.value];
}

/**
 * The log newest first, entries below `before` (null: from the head), at most `limit` entries:
 * `[seq, change]`. What `_changes?descending=true` reads.
 */
export async function* mirrorChangesBefore(
  kv: Deno.Kv,
  crawlId: string,
  o: { before: number | null; limit?: number },
): AsyncGenerator<[number, MirrorChange]> {
  const selector = o.before === null
    ? { prefix: keys.mirrorSeqs(crawlId) }
    : { prefix: keys.mirrorSeqs(crawlId), end: keys.mirrorSeq(crawlId, o.before) };
  for await (
    const e of kv.list<MirrorChange>(selector, { limit: o.limit, batchSize: 500, reverse: true })
  ) yield [e.key[2] as number, e.value];
}

/** An id's last change, or null. */
export async function mirrorEntry(
  kv: Deno.Kv,
  crawlId: string,
  id: string,
): Promise<MirrorEntry | null> {
  return (await kvOp(() => kv.get<MirrorEntry>(keys.mirrorDoc(crawlId, id)))).value;
}

/** `_local` documents a crawl's mirror keeps at most. */
export const MAX_MIRROR_LOCALS = 1_000;

/** A replicator's `_local` document, or null. */
export async function getMirrorLocal(
  kv: Deno.Kv,
  crawlId: string,
  id: string,
): Promise<Record<string, unknown> | null> {
  return (await kvOp(() => kv.get<Record<string, unknown>>(keys.mirrorLocal(crawlId, id)))).value;
}

/**
 * Keeps a replicator's `_local` document (at most {@linkcode MAX_MIRROR_LOCALS} a crawl, each
 * within a KV value).
 * @throws InputError when it is too large, or the crawl keeps as many as it may.
 */
export async function putMirrorLocal(
  kv: Deno.Kv,
  crawlId: string,
  id: string,
  doc: Record<string, unknown>,
): Promise<void> {
  if (valueSizeBound(doc) > 60_000) throw new InputError("a _local document is at most 30 KB");
  const key = keys.mirrorLocal(crawlId, id);
  const had = await kvOp(() => kv.get(key));
  if (had.versionstamp === null) {
    let n = 0;
    for await (const _ of kv.list({ prefix: keys.mirrorLocals(crawlId) })) n++;
    if (n >= MAX_MIRROR_LOCALS) {
      throw new InputError(`this mirror keeps ${MAX_MIRROR_LOCALS} _local documents at most`);
    }
  }
  await kvOp(() => kv.set(key, doc));
}
