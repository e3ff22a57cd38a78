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
import { mirrorHead } from "../engine/mod.ts";
import {
  createMirrorApp,
  keepMirrorsLevel,
  MIRROR_POLL_MS,
  mirrorUuid,
  notServable,
} from "../mirror/mod.ts";
import { chooseCrawl } from "./crawl_list.ts";

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
 * Serves crawl `crawlId` (the only one when null) of `kv` on `hostname:port` at once, bringing its
 * change log level meanwhile and then every `pollMs`; `log` is told when it is first level.
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
  const why = notServable(crawl);
  if (why) throw new UsageError(`crawl ${id} ${why}: the mirror serves documents crawls`);
  const stop = new AbortController();
  // Served at once; the change log is brought level meanwhile (its feed grows as it goes).
  const loop = keepMirrorsLevel({ kv, clock, log: o.log }, {
    crawls: () => Promise.resolve([id]),
    everyMs: o.pollMs ?? MIRROR_POLL_MS,
    signal: stop.signal,
    onLevel: () => {
      mirrorHead(kv, id).then(
        (n) => o.log(`mirror log level with crawl ${id}: ${n.toLocaleString("en-US")} changes`),
        () => {},
      );
    },
  });
  const served = { crawlId: id, docs: crawl.docs };
  const app = createMirrorApp({ kv, clock }, {
    db: (name) => Promise.resolve(name === id ? served : null),
    npmDb: () => Promise.resolve(served),
    readToken: o.readToken,
    uuid: await mirrorUuid(`${o.kvPath}\0${id}`),
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
    dbUrl: `${base}/${encodeURIComponent(id)}`,
    npmUrl: `${base}/npm/`,
    close: async () => {
      stop.abort();
      await loop;
      await server.shutdown();
    },
  };
}
