/**
 * `_changes` of the mirror: its own sequence of what it applied (`mirror_sink.ts`), one row an id
 * at its last change, as CouchDB's feed. `feed=normal` answers what is there; `longpoll` waits up
 * to `timeout` for a change after `since`; `continuous` streams rows as they come, a heartbeat line
 * every `heartbeat` ms, until `timeout` (60 s; with a heartbeat and no timeout, {@linkcode
 * MAX_FEED_MS}). Sequences are whole numbers; `since=now` is the head. `descending=true` (a normal
 * feed only) reads newest first from the head, `since` ignored as CouchDB and PouchDB do, and its
 * `last_seq` is the last row's: `descending=true&limit=1` is how a follower learns the head.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import { InputError } from "../base/errors.ts";
import {
  crawlItems,
  type ExportedItem,
  mirrorChangesBefore,
  mirrorChangesSince,
  mirrorHead,
} from "../engine/mod.ts";
import { servedDoc } from "./mirror_docs.ts";

/** What `_changes` was asked. */
export interface ChangesQuery {
  since: number | "now";
  limit?: number;
  includeDocs: boolean;
  feed: "normal" | "longpoll" | "continuous";
  heartbeatMs: number | null;
  timeoutMs: number;
  docIds: Set<string> | null;
  /** Newest first, from the head (`since` ignored). */
  descending: boolean;
}

/** The longest a longpoll or continuous feed waits for or streams changes, ms. @default */
export const MAX_FEED_MS = 300_000;

/** Reads `_changes`' parameters. @throws InputError */
export function changesQuery(
  q: (name: string) => string | undefined,
  body?: { doc_ids?: unknown },
): ChangesQuery {
  const since = q("since") ?? "0";
  if (since !== "now" && !/^\d{1,15}$/.test(since)) {
    throw new InputError(`since must be a sequence of this mirror (a whole number) or now`);
  }
  const feed = q("feed") ?? "normal";
  if (feed !== "normal" && feed !== "longpoll" && feed !== "continuous") {
    throw new InputError("feed must be normal, longpoll or continuous");
  }
  const num = (name: string) => {
    const raw = q(name);
    if (raw === undefined) return undefined;
    if (!/^\d{1,9}$/.test(raw)) throw new InputError(`${name} must be a whole number`);
    return Number(raw);
  };
  const heartbeat = q("heartbeat") === "true" ? 60_000 : num("heartbeat") ?? null;
  const filter = q("filter");
  let docIds: Set<string> | null = null;
  if (filter !== undefined) {
    if (filter !== "_doc_ids") throw new InputError("filter: only _doc_ids is served");
    const raw = body?.doc_ids ?? (q("doc_ids") ? JSON.parse(q("doc_ids")!) : []);
    if (!Array.isArray(raw) || raw.some((x) => typeof x !== "string")) {
      throw new InputError("doc_ids must be a JSON array of doc ids");
    }
    docIds = new Set(raw);
  }
  const descending = q("descending") === "true";
  if (descending && feed !== "normal") {
    throw new InputError("descending is served with feed=normal only");
  }
  return {
    since: since === "now" ? "now" : Number(since),
    limit: num("limit"),
    includeDocs: q("include_docs") === "true",
    feed,
    heartbeatMs: heartbeat === null ? null : Math.max(1000, heartbeat),
    // A heartbeat keeps a feed open (CouchDB: for good; here up to MAX_FEED_MS, after which the
    // reader asks again from the last_seq it was given).
    timeoutMs: Math.min(num("timeout") ?? (heartbeat === null ? 60_000 : MAX_FEED_MS), MAX_FEED_MS),
    docIds,
    descending,
  };
}

const enc = new TextEncoder();

/** One row of the feed; `it`: the item, when documents are included. */
function rowOf(
  seq: number,
  c: { id: string; rev: string; deleted?: true },
  o: { includeDocs: boolean; docs: boolean; it: ExportedItem | null },
): string {
  let r = `{"seq":${seq},"id":${JSON.stringify(c.id)},"changes":[{"rev":${JSON.stringify(c.rev)}}]`;
  if (c.deleted) r += `,"deleted":true`;
  if (o.includeDocs) {
    const it = c.deleted ? null : o.it;
    const served = it ? servedDoc(it, { docs: o.docs }) : null;
    r += `,"doc":${
      c.deleted
        ? `{"_id":${JSON.stringify(c.id)},"_rev":${JSON.stringify(c.rev)},"_deleted":true}`
        : served?.ok
        ? served.json
        : "null"
    }`;
  }
  return r + "}";
}

/**
 * The rows after `since` (at most `limit`), and the last sequence read; `descending`: the rows
 * below `since` (null: from the head), newest first.
 */
async function rowsAfter(
  kv: Deno.Kv,
  crawlId: string,
  since: number | null,
  q: ChangesQuery,
  o: { docs: boolean; limit?: number },
): Promise<{ rows: string[]; last: number | null }> {
  const picked: [number, { id: string; rev: string; deleted?: true }][] = [];
  let last = since;
  const limit = o.limit ?? Infinity;
  const log = q.descending
    ? mirrorChangesBefore(kv, crawlId, { before: since })
    : mirrorChangesSince(kv, crawlId, { since: since ?? 0 });
  for await (const [seq, c] of log) {
    last = seq;
    if (q.docIds && !q.docIds.has(c.id)) continue;
    picked.push([seq, c]);
    if (picked.length >= limit || picked.length >= 1000) break;
  }
  // The documents of a page in one go: point reads, each block once.
  const items = q.includeDocs
    ? await crawlItems(kv, crawlId, picked.filter(([, c]) => !c.deleted).map(([, c]) => c.id))
    : new Map<string, ExportedItem>();
  const rows = picked.map(([seq, c]) =>
    rowOf(seq, c, { includeDocs: q.includeDocs, docs: o.docs, it: items.get(c.id) ?? null })
  );
  return { rows, last };
}

/** Waits until the mirror's head passes `since`, `deadline` or `signal`, looking every 250 ms. */
async function waitPast(
  kv: Deno.Kv,
  crawlId: string,
  since: number,
  o: { clock: Clock; deadline: number; signal: AbortSignal },
): Promise<void> {
  while (o.clock.now() < o.deadline && !o.signal.aborted) {
    if (await mirrorHead(kv, crawlId) > since) return;
    await o.clock.sleep(Math.min(250, Math.max(0, o.deadline - o.clock.now())), o.signal)
      .catch(() => {});
  }
}

/**
 * The feed's body, streamed as the reader takes it (see the module comment). A normal or longpoll
 * answer is `{"results":[…],"last_seq":S,"pending":P}`; a continuous one a row a line and a
 * `{"last_seq":S}` line at its end.
 */
export function changesBody(
  kv: Deno.Kv,
  crawlId: string,
  q: ChangesQuery,
  o: { docs: boolean; clock: Clock; signal: AbortSignal },
): ReadableStream<Uint8Array> {
  return ReadableStream.from(changesChunks(kv, crawlId, q, o));
}

async function* changesChunks(
  kv: Deno.Kv,
  crawlId: string,
  q: ChangesQuery,
  o: { docs: boolean; clock: Clock; signal: AbortSignal },
): AsyncGenerator<Uint8Array> {
  if (q.descending) return yield* descendingChunks(kv, crawlId, q, o);
  let since = q.since === "now" ? await mirrorHead(kv, crawlId) : q.since;
  const deadline = o.clock.now() + q.timeoutMs;
  if (q.feed !== "continuous") {
    if (q.feed === "longpoll" && await mirrorHead(kv, crawlId) <= since) {
      await waitPast(kv, crawlId, since, { clock: o.clock, deadline, signal: o.signal });
    }
    yield enc.encode(`{"results":[`);
    let left = q.limit ?? Infinity;
    let first = true;
    for (;;) {
      const { rows, last } = await rowsAfter(kv, crawlId, since, q, {
        docs: o.docs,
        limit: left,
      });
      if (rows.length > 0) yield enc.encode((first ? "" : ",\n") + rows.join(",\n"));
      first &&= rows.length === 0;
      left -= rows.length;
      const moved = (last ?? since) > since;
      since = last ?? since;
      if (!moved || left <= 0) break;
    }
    const head = await mirrorHead(kv, crawlId);
    yield enc.encode(`\n],"last_seq":${since},"pending":${Math.max(0, head - since)}}\n`);
    return;
  }
  let left = q.limit ?? Infinity;
  let beat = o.clock.now();
  while (!o.signal.aborted && left > 0) {
    const { rows, last } = await rowsAfter(kv, crawlId, since, q, { docs: o.docs, limit: left });
    since = last ?? since;
    if (rows.length > 0) {
      yield enc.encode(rows.join("\n") + "\n");
      left -= rows.length;
      beat = o.clock.now();
      continue;
    }
    if (o.clock.now() >= deadline) break;
    if (q.heartbeatMs !== null && o.clock.now() - beat >= q.heartbeatMs) {
      yield enc.encode("\n");
      beat = o.clock.now();
    }
    const until = Math.min(deadline, q.heartbeatMs === null ? deadline : beat + q.heartbeatMs);
    await waitPast(kv, crawlId, since, { clock: o.clock, deadline: until, signal: o.signal });
  }
  yield enc.encode(`{"last_seq":${since}}\n`);
}

/**
 * A descending feed: newest first from the head, pages of the log until `limit` rows; `last_seq`
 * is the last sequence read (0 for an empty log), `pending` the sequences below it still unread
 * (0 once the log's start was read).
 */
async function* descendingChunks(
  kv: Deno.Kv,
  crawlId: string,
  q: ChangesQuery,
  o: { docs: boolean },
): AsyncGenerator<Uint8Array> {
  yield enc.encode(`{"results":[`);
  let left = q.limit ?? Infinity;
  let first = true;
  let before: number | null = null;
  let exhausted = false;
  while (left > 0) {
    const { rows, last } = await rowsAfter(kv, crawlId, before, q, { docs: o.docs, limit: left });
    if (rows.length > 0) yield enc.encode((first ? "" : ",\n") + rows.join(",\n"));
    first &&= rows.length === 0;
    left -= rows.length;
    if (last === null || last === before) {
      exhausted = true;
      break;
    }
    before = last;
  }
  const lastSeq = before ?? 0;
  // Nothing read (limit=0): every sequence up to the head is still below.
  const pending = exhausted ? 0 : before === null ? await mirrorHead(kv, crawlId) : lastSeq - 1;
  yield enc.encode(`\n],"last_seq":${lastSeq},"pending":${pending}}\n`);
}
