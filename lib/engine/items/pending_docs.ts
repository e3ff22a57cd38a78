/**
 * The store's pending documents: items whose document was behind their revision on the document
 * host (an older revision, a 304 to the ETag of one, or a 404 for a package just published), kept
 * at their listed revision with the document marked pending (`_item_codec.ts`), and indexed under
 * `["pdoc", crawlId, idKeyPart]` with when to ask again. The entry is written in the same op as the
 * item's record (`prepareWrites`), so an item is never pending without one. Only the asker
 * (`crawl/pending_ask.ts`) deletes entries: when the document lands, when it is recorded as the
 * item's error, or when the item no longer waits for it (rewritten or deleted since) — writers of
 * items never need to.
 *
 * @module
 */
import type { DocResult } from "../../plan/source.ts";
import { decodeItem, type ItemRecord } from "./_item_codec.ts";
import {
  type ItemInput,
  nextAskMs,
  type PendingDoc,
  prepareWrites,
  setInBatches,
} from "./item_store.ts";
import {
  addNote,
  commitPlan,
  DOCS_STREAM,
  getEntries,
  keys,
  kvOp,
  OpPlan,
  partOfKey,
  type PendingDocsState,
} from "../store/mod.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** A pending document due now, with the entries an answer to it is committed against. */
export interface DuePending {
  /** Its entry, as read. */
  doc: PendingDoc;
  /** The entry's KV entry (checked when it is settled). */
  entry: Deno.KvEntry<Uint8Array>;
  /** The item's record as read (null: none any more), with its versionstamp. */
  item: { record: ItemRecord | null; versionstamp: string | null };
}

/**
 * The crawl's pending documents: how many there are (`pending`; `expired`: those past the window,
 * their items errors meanwhile), and up to `limit` of those due at `nowMs` (earliest first), each
 * with its item's record as it is now.
 */
export async function duePendingDocs(
  kv: Deno.Kv,
  crawlId: string,
  options: { nowMs: number; limit: number },
): Promise<{ pending: number; expired: number; due: DuePending[]; nextMs: number | null }> {
  let pending = 0;
  let expired = 0;
  let nextMs: number | null = null;
  const due: { doc: PendingDoc; entry: Deno.KvEntry<Uint8Array> }[] = [];
  for await (
    const e of kv.list<Uint8Array>({ prefix: keys.pendingDocs(crawlId) }, { batchSize: 500 })
  ) {
    const doc = JSON.parse(dec.decode(e.value)) as PendingDoc;
    if (doc.expired) expired++;
    else pending++;
    if (doc.nextMs <= options.nowMs) due.push({ doc, entry: e });
    else nextMs = Math.min(nextMs ?? Infinity, doc.nextMs);
  }
  due.sort((a, b) => a.doc.nextMs - b.doc.nextMs);
  const taken = due.slice(0, options.limit);
  if (taken.length < due.length) nextMs = options.nowMs;
  const items = await getEntries<Uint8Array>(
    kv,
    taken.map((g) => keys.item(crawlId, partOfKey(g.entry.key))),
  );
  const out = taken.map((g, j): DuePending => ({
    ...g,
    item: {
      record: items[j].value === null ? null : decodeItem(items[j].value),
      versionstamp: items[j].versionstamp,
    },
  }));
  return { pending, expired, due: out, nextMs };
}

/**
 * True while the item still waits for the entry's document: the same revision, still pending (or,
 * past the window, still the error it was recorded with).
 */
export function stillPending(d: DuePending): boolean {
  const r = d.item.record;
  if (r === null || r.rev !== d.doc.rev) return false;
  return d.doc.expired ? r.error !== undefined && !r.pending : r.pending === true;
}

/** What becomes of a due pending document after it was asked (or not). */
export type PendingOutcome =
  /** The document (or the host's own error for it) is the item's now: the entry goes. */
  | { kind: "land"; doc: DocResult; rev: string }
  /**
   * Still behind after the window: the item holds `doc` (an error with its reason) and the entry
   * is asked again every `PENDING_DOCS.afterWindowEveryMs`.
   */
  | { kind: "expire"; doc: DocResult }
  /** Still behind: asked again later (`etag`: the one to ask with). */
  | { kind: "again"; etag?: string; notModified: boolean }
  /** The item no longer waits for it: the entry goes, nothing else changes. */
  | { kind: "drop" };

/** The state record as it is, or empty. */
export async function pendingDocsState(
  kv: Deno.Kv,
  crawlId: string,
): Promise<Deno.KvEntryMaybe<PendingDocsState>> {
  return await kvOp(() => kv.get<PendingDocsState>(keys.pendingDocsState(crawlId)));
}

/** A state with nothing done yet. */
export function emptyPendingDocsState(): PendingDocsState {
  return { notes: 0, pending: 0, asked: 0, notModified: 0, landed: 0, expired: 0, atMs: 0 };
}

/** What committing a settled pending document made true. */
export interface Settled {
  /** The state record after it. */
  state: Deno.KvEntry<PendingDocsState>;
  /** When its entry is asked next (null: the entry is gone). */
  nextMs: number | null;
  /** What it counts as: a document that landed, one given up on (an error recorded), or neither. */
  counted: "landed" | "expired" | null;
}

/**
 * Commits one settled pending document in one op guarded by its entry, its item's record and the
 * state record (`state`; null when another writer came first: the document is asked again at the
 * next pass). A landing writes the item at `rev` with its document (a large one's chunks first,
 * idempotent), an expiry the item's error, each with a note on the `docs` stream, so that sinks and
 * the mirror see it; an expired entry stays, asked again hourly. A host's own error for it (a 403,
 * a damaged body) counts as given up on, not landed.
 */
export async function settlePending(
  kv: Deno.Kv,
  crawlId: string,
  settled: { due: DuePending; outcome: PendingOutcome; asked: boolean },
  o: { state: Deno.KvEntryMaybe<PendingDocsState>; nowMs: number; maxDocBytes?: number },
): Promise<Settled | null> {
  const { due, outcome } = settled;
  const next: PendingDocsState = { ...(o.state.value ?? emptyPendingDocsState()) };
  const plan = new OpPlan().check(due.entry);
  plan.check(o.state);
  let nextMs: number | null = null;
  if (outcome.kind === "again" || outcome.kind === "expire") {
    const tries = due.doc.tries + (outcome.kind === "again" ? 1 : 0);
    const late = due.doc.expired || outcome.kind === "expire";
    const doc: PendingDoc = {
      ...due.doc,
      tries,
      ...(outcome.kind === "again" && outcome.etag !== undefined ? { etag: outcome.etag } : {}),
      ...(late ? { expired: true as const } : {}),
    };
    nextMs = doc.nextMs = nextAskMs(o.nowMs, doc);
    plan.set(due.entry.key, enc.encode(JSON.stringify(doc)));
    if (outcome.kind === "again" && outcome.notModified) next.notModified++;
  } else plan.delete(due.entry.key);
  let counted: Settled["counted"] = null;
  if (outcome.kind === "land" || outcome.kind === "expire") {
    const key = keys.item(crawlId, partOfKey(due.entry.key));
    plan.check({ key, versionstamp: due.item.versionstamp });
    const item: ItemInput = {
      id: due.doc.id,
      rev: outcome.kind === "land" ? outcome.rev : due.doc.rev,
      doc: outcome.doc,
    };
    const writes = await prepareWrites(crawlId, [item], {
      maxDocBytes: o.maxDocBytes,
      nowMs: o.nowMs,
    });
    const record = writes.find((w) => w.role === "record")!;
    await setInBatches(kv, writes.filter((w) => w.role === "chunk"));
    plan.set(record.key, record.value);
    next.notes++;
    addNote(plan, crawlId, {
      stream: DOCS_STREAM,
      n: next.notes,
      note: { kind: "ids", ids: [due.doc.id] },
    });
    counted = outcome.kind === "expire" || outcome.doc.kind === "error" ? "expired" : "landed";
    if (due.doc.expired) next.expired = Math.max(0, next.expired - 1); // recorded anew below
    next[counted]++;
  }
  if (settled.asked) next.asked++;
  next.atMs = o.nowMs;
  const state = await commitState(kv, crawlId, plan, next);
  return state && { state, nextMs, counted };
}

/** Sets the state record to `next` in `plan` and commits it; null when a check failed. */
async function commitState(
  kv: Deno.Kv,
  crawlId: string,
  plan: OpPlan,
  next: PendingDocsState,
): Promise<Deno.KvEntry<PendingDocsState> | null> {
  const key = keys.pendingDocsState(crawlId);
  const res = await commitPlan(kv, plan.set(key, next));
  return res.ok ? { key, value: next, versionstamp: res.versionstamp } : null;
}

/** Writes the pass's count of pending documents into the state (guarded; null: another writer). */
export async function notePendingCount(
  kv: Deno.Kv,
  crawlId: string,
  o: { state: Deno.KvEntryMaybe<PendingDocsState>; pending: number; nowMs: number },
): Promise<Deno.KvEntry<PendingDocsState> | null> {
  const next = { ...(o.state.value ?? emptyPendingDocsState()), pending: o.pending, atMs: o.nowMs };
  return await commitState(kv, crawlId, new OpPlan().check(o.state), next);
}
