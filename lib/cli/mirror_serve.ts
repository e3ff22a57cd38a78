/**
 * `deno task mirror`: a crawl of a KV file served as a read-only CouchDB database and an npm
 * registry (`lib/mirror/`), with no crawl machinery: the mirror's change log is brought level with
 * the crawl's ledger every second (another process may still be crawling or following into the
 * same file), and answers stream from the store.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import { errorLine, UsageError } from "../base/errors.ts";
import { deliver } from "../engine/mod.ts";
import { createMirrorApp, mirrorSink } from "../mirror/mod.ts";
import { chooseCrawl } from "./crawl_list.ts";

/** How often the mirror's log looks for what the ledger noted, ms. @default */
export const MIRROR_POLL_MS = 1_000;

/** A running mirror. */
export interface RunningMirror {
  /** The database URL to give a replicator. */
  dbUrl: string;
  /** The base URL to give npm's client (`--registry`). */
  npmUrl: string;
  /** Stops serving and the log's loop. */
  close(): Promise<void>;
}

/**
 * Serves crawl `crawlId` (the only one when null) of `kv` on `hostname:port`, bringing its change
 * log level first and then every `pollMs`.
 * @throws UsageError for no such crawl, several without a choice, or a crawl that is not a
 * documents crawl.
 */
export async function serveMirror(
  ctx: { kv: Deno.Kv; clock?: Clock },
  o: {
    kvPath: string;
    crawlId: string | null;
    hostname: string;
    port: number;
    readToken: string | null;
    log: (line: string) => void;
    /** @default MIRROR_POLL_MS */
    pollMs?: number;
  },
): Promise<RunningMirror> {
  const { kv } = ctx;
  const clock = ctx.clock ?? SYSTEM_CLOCK;
  const crawl = await chooseCrawl(kv, o.kvPath, o.crawlId);
  const id = crawl.id;
  if (crawl.view !== undefined || crawl.idOrder === "utf16") {
    throw new UsageError(
      `crawl ${id} holds ${crawl.view !== undefined ? "a view's rows" : "ids in UTF-16 order"}: ` +
        "the mirror serves documents crawls",
    );
  }
  const sink = mirrorSink(kv);
  const level = async () => {
    while ((await deliver({ kv }, id, sink)).behind > 0) { /* the next notes */ }
  };
  await level();
  const stop = new AbortController();
  const loop = (async () => {
    let failing = false;
    while (!stop.signal.aborted) {
      await clock.sleep(o.pollMs ?? MIRROR_POLL_MS, stop.signal).catch(() => {});
      if (stop.signal.aborted) break;
      try {
        await level();
        failing = false;
      } catch (err) {
        if (!failing) o.log(`mirror log of ${id}: ${errorLine(err)}; tried again`);
        failing = true;
      }
    }
  })();
  const db = id;
  const app = createMirrorApp({ kv, clock }, {
    dbs: new Map([[db, { crawlId: id, docs: crawl.docs }]]),
    readToken: o.readToken,
    uuid: await uuidOf(`${o.kvPath}\0${id}`),
    signal: stop.signal,
  });
  let server: Deno.HttpServer;
  try {
    server = Deno.serve({ hostname: o.hostname, port: o.port, onListen: () => {} }, app.fetch);
  } catch (err) {
    stop.abort();
    await loop;
    throw new UsageError(`port ${o.port} on ${o.hostname} cannot be had: ${errorLine(err)}`);
  }
  const addr = server.addr as Deno.NetAddr;
  const base = `http://${addr.hostname}:${addr.port}`;
  return {
    dbUrl: `${base}/${encodeURIComponent(db)}`,
    npmUrl: `${base}/npm/`,
    close: async () => {
      stop.abort();
      await loop;
      await server.shutdown();
    },
  };
}

/** A stable uuid (32 hex digits) for a served database. */
async function uuidOf(s: string): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s));
  return [...new Uint8Array(d).slice(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
}
