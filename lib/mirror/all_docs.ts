/**
 * `_all_docs` of a crawl as CouchDB answers it, streamed a batch of rows at a time (flat memory,
 * whatever the range): `total_rows`, `offset` as the rank of the first row (the mirror is itself a
 * rank oracle: a crawler plans it in a few requests a boundary), and rows `{id, key, value: {rev}}`
 * with the document when asked.
 *
 * @module
 */
import { InputError } from "../base/errors.ts";
import { compareKeys } from "../plan/keys.ts";
import {
  crawlItemCount,
  crawlItems,
  crawlItemsBetween,
  crawlRank,
  type ExportedItem,
} from "../engine/mod.ts";
import { servedDoc } from "./mirror_docs.ts";

/** What `_all_docs` was asked. */
export interface AllDocsQuery {
  startkey?: string;
  endkey?: string;
  inclusiveEnd: boolean;
  key?: string;
  keys?: string[];
  limit?: number;
  skip: number;
  includeDocs: boolean;
  /** Last key first: `startkey` is then the high end, `endkey` the low one. */
  descending: boolean;
}

/** Reads `_all_docs`'s parameters (JSON strings, as CouchDB takes them). @throws InputError */
export function allDocsQuery(
  q: (name: string) => string | undefined,
  body?: { keys?: unknown },
): AllDocsQuery {
  const json = (name: string, ...aliases: string[]) => {
    const raw = [name, ...aliases].map(q).find((v) => v !== undefined);
    if (raw === undefined) return undefined;
    let v: unknown;
    try {
      v = JSON.parse(raw);
    } catch {
      throw new InputError(`${name} must be JSON, got ${raw.slice(0, 100)}`);
    }
    if (typeof v !== "string") throw new InputError(`${name} must be a JSON string (a doc id)`);
    return v;
  };
  const bool = (name: string, fallback: boolean) => {
    const raw = q(name);
    if (raw === undefined) return fallback;
    if (raw !== "true" && raw !== "false") throw new InputError(`${name} must be true or false`);
    return raw === "true";
  };
  const int = (name: string) => {
    const raw = q(name);
    if (raw === undefined) return undefined;
    if (!/^\d{1,9}$/.test(raw)) throw new InputError(`${name} must be a whole number`);
    return Number(raw);
  };
  let keys: string[] | undefined;
  const rawKeys = body?.keys ?? (q("keys") === undefined ? undefined : JSON.parse(q("keys")!));
  if (rawKeys !== undefined) {
    if (!Array.isArray(rawKeys) || rawKeys.some((k) => typeof k !== "string")) {
      throw new InputError("keys must be a JSON array of doc ids");
    }
    if (rawKeys.length > 10_000) throw new InputError("keys: at most 10,000");
    keys = rawKeys;
  }
  return {
    startkey: json("startkey", "start_key"),
    endkey: json("endkey", "end_key"),
    inclusiveEnd: bool("inclusive_end", true),
    key: json("key"),
    keys,
    limit: int("limit"),
    skip: int("skip") ?? 0,
    includeDocs: bool("include_docs", false),
    descending: bool("descending", false),
  };
}

const enc = new TextEncoder();

function row(it: ExportedItem, o: { includeDocs: boolean; docs: boolean }): string {
  let r = `{"id":${JSON.stringify(it.id)},"key":${JSON.stringify(it.id)},"value":{"rev":${
    JSON.stringify(it.rev)
  }}`;
  if (o.includeDocs) {
    const served = servedDoc(it, { docs: o.docs });
    r += `,"doc":${served.ok ? served.json : "null"}`;
  }
  return r + "}";
}

/**
 * The answer's body, streamed as the reader takes it (a batch of rows at a time):
 * `{"total_rows":N,"offset":R,"rows":[…]}`.
 */
export function allDocsBody(
  kv: Deno.Kv,
  crawlId: string,
  q: AllDocsQuery,
  o: { docs: boolean },
): ReadableStream<Uint8Array> {
  return ReadableStream.from(allDocsChunks(kv, crawlId, q, o));
}

async function* allDocsChunks(
  kv: Deno.Kv,
  crawlId: string,
  q: AllDocsQuery,
  o: { docs: boolean },
): AsyncGenerator<Uint8Array> {
  const total = await crawlItemCount(kv, crawlId);
  const shape = { includeDocs: q.includeDocs, docs: o.docs };
  if (q.keys) {
    yield enc.encode(`{"total_rows":${total},"offset":null,"rows":[`);
    // Point reads a thousand keys at a time (replicators ask for a page of ids this way).
    for (let i = 0; i < q.keys.length; i += 1000) {
      const keys = q.keys.slice(i, i + 1000);
      const items = await crawlItems(kv, crawlId, keys);
      const text = keys.map((k) => {
        const it = items.get(k);
        return it ? row(it, shape) : `{"key":${JSON.stringify(k)},"error":"not_found"}`;
      }).join(",\n");
      yield enc.encode((i === 0 ? "" : ",\n") + text);
    }
    yield enc.encode("]}\n");
    return;
  }
  // [from, to) in key order; descending reads it last key first (startkey the high end, inclusive;
  // endkey the low end, inclusive unless inclusive_end=false), as CouchDB does.
  const after = (k: string) => k + "\0";
  const first = q.key ?? q.startkey;
  const last = q.key ?? q.endkey;
  const closed = q.key !== undefined || q.inclusiveEnd;
  const from = q.descending
    ? (last === undefined ? null : closed ? last : after(last))
    : first ?? null;
  const to = q.descending
    ? (first === undefined ? null : after(first))
    : last === undefined
    ? null
    : closed
    ? after(last)
    : last;
  // offset: the rows before the first one in the order asked.
  const before = q.descending
    ? (to === null ? 0 : total - await crawlRank(kv, crawlId, to))
    : (from === null ? 0 : await crawlRank(kv, crawlId, from));
  yield enc.encode(`{"total_rows":${total},"offset":${Math.min(total, before + q.skip)},"rows":[`);
  let skip = q.skip;
  let left = q.limit ?? Infinity;
  let head = true;
  if (left > 0 && (to === null || from === null || compareKeys(from, to) < 0)) {
    const range = { from, to, descending: q.descending };
    outer: for await (const batch of crawlItemsBetween(kv, crawlId, range)) {
      let text = "";
      for (const it of batch) {
        if (skip > 0) {
          skip--;
          continue;
        }
        text += (head ? "" : ",\n") + row(it, shape);
        head = false;
        if (--left <= 0) {
          yield enc.encode(text);
          break outer;
        }
      }
      if (text) yield enc.encode(text);
    }
  }
  yield enc.encode("]}\n");
}
