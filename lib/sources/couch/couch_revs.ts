/**
 * Revision lookups: the current revision of each of many ids at once, for the final check's
 * samples and the feed's catch-up, in the best form the registry takes: `POST _all_docs` with
 * `{"keys": ids}`; where POST is refused, `GET _all_docs?keys=[…]` with URLs kept under what
 * servers take; where that is refused too, one listing from each id. Each refusal is learned once
 * (`learned_caps.ts`) and the next lookup starts with the form that works.
 *
 * @module
 */
import { mapPool } from "../../base/pool.ts";
import type { LearnedCaps } from "../../plan/source.ts";
import { checkKeyRevs } from "../answers/mod.ts";
import { type CouchExchange, MAX_GET_URL, PAGE_BYTES, ROW_BYTES } from "./couch_exchange.ts";
import { isMethodRefusal, isRefusal } from "./learned_caps.ts";

/** Ids a revision lookup (`_all_docs` with keys) asks for at once. */
export const REVS_PER_REQUEST = 100;

/** Revision lookups in flight at once (the final check waits for them). */
const REVS_CONCURRENCY = 4;

/** What revision lookups need from their source. */
export interface RevsContext {
  /** The exchange requests go through. */
  x: CouchExchange;
  /** What the registry was seen to take (updated by refusals). */
  learned: LearnedCaps;
  /** The source, in error messages. */
  description: string;
  /** The database URL (a GET's URL must fit). */
  db: string;
  /** The document id a key names. */
  docId: (key: string) => string;
  /** The revision of `key` by a one-row listing from it (null: not there). */
  byListing: (key: string) => Promise<string | null>;
}

/**
 * The revisions of `keys`, in order: null for an id answered `not_found` or deleted. Asks in the
 * first form the registry takes, {@linkcode REVS_PER_REQUEST} ids a request and a few requests at
 * once; learns each refusal.
 */
export async function lookUpRevs(ctx: RevsContext, keys: string[]): Promise<(string | null)[]> {
  if (ctx.learned.post !== "no") {
    try {
      const revs = await byPost(ctx, keys.map(ctx.docId));
      ctx.learned.post = "yes";
      return revs;
    } catch (err) {
      if (!isMethodRefusal(err)) throw err;
      ctx.learned.post = "no";
    }
  }
  if (ctx.learned.getKeys !== "no") {
    try {
      const revs = await byGetKeys(ctx, keys);
      ctx.learned.getKeys = "yes";
      return revs;
    } catch (err) {
      if (!isRefusal(err)) throw err;
      ctx.learned.getKeys = "no";
    }
  }
  return await mapPool(keys, ctx.byListing, { concurrency: 4 * REVS_CONCURRENCY });
}

async function byPost(ctx: RevsContext, ids: string[]): Promise<(string | null)[]> {
  const chunks: string[][] = [];
  for (let i = 0; i < ids.length; i += REVS_PER_REQUEST) {
    chunks.push(ids.slice(i, i + REVS_PER_REQUEST));
  }
  // A few lookups at once: the final check waits for them, one round trip each otherwise.
  const answers = await mapPool(chunks, (keys) =>
    ctx.x.json(
      "_all_docs",
      { body: { keys }, maxBytes: PAGE_BYTES + keys.length * ROW_BYTES },
      (body) => checkKeyRevs(body, keys, ctx.description),
    ), { concurrency: REVS_CONCURRENCY });
  return answers.flat();
}

/**
 * `GET _all_docs?keys=[…]` in chunks whose URLs stay under {@linkcode MAX_GET_URL}; an id too
 * long for any such URL is looked up by a listing from it.
 */
async function byGetKeys(ctx: RevsContext, keysAsked: string[]): Promise<(string | null)[]> {
  const room = MAX_GET_URL - `${ctx.db}/_all_docs?keys=`.length;
  const chunks: { keys: string[]; ids: string[] }[] = [];
  let chunk = { keys: [] as string[], ids: [] as string[] };
  let used = 2; // the brackets
  for (const key of keysAsked) {
    const id = ctx.docId(key);
    const cost = encodeURIComponent(JSON.stringify(id)).length + 3; // and an encoded comma
    if (chunk.ids.length > 0 && (used + cost > room || chunk.ids.length >= REVS_PER_REQUEST)) {
      chunks.push(chunk);
      chunk = { keys: [], ids: [] };
      used = 2;
    }
    chunk.keys.push(key);
    chunk.ids.push(id);
    used += cost;
  }
  if (chunk.ids.length > 0) chunks.push(chunk);
  const answers = await mapPool(chunks, (c) => {
    if (c.ids.length === 1 && 2 + encodeURIComponent(JSON.stringify(c.ids[0])).length > room) {
      return ctx.byListing(c.keys[0]).then((r) => [r]);
    }
    return ctx.x.json(
      "_all_docs",
      {
        query: `keys=${encodeURIComponent(JSON.stringify(c.ids))}`,
        maxBytes: PAGE_BYTES + c.ids.length * ROW_BYTES,
      },
      (body) => checkKeyRevs(body, c.ids, ctx.description),
    );
  }, { concurrency: REVS_CONCURRENCY });
  return answers.flat();
}
