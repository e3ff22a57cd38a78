/**
 * Misbehaviour on purpose, the way real registries and proxies misbehave, so that tests can
 * reproduce each failure the crawler must survive: listings cut to a few rows without a word,
 * listings that claim gigabytes, and documents that answer 401/403/410, an HTML page, a JSON array,
 * an empty body, nothing for a long time, a redirect elsewhere, or a body of tens of megabytes.
 * Which documents misbehave is decided by a hash of their id, so a test knows exactly which.
 *
 * @module
 */
import type { Context } from "hono";
import { hash32 } from "./registry_data.ts";

/** Ways a document can misbehave. */
export type BadDocKind =
  | "401"
  | "403"
  | "410"
  | "html"
  | "array"
  | "empty"
  | "slow"
  | "redirect"
  | "huge"
  | "bomb"
  | "drip";

/** The kinds a test asks for by name only (a bomb takes seconds to build once). */
export const ALL_BAD_DOC_KINDS: readonly BadDocKind[] = [
  "401",
  "403",
  "410",
  "html",
  "array",
  "empty",
  "slow",
  "redirect",
  "huge",
  "bomb",
  "drip",
];

/** The default set for `badDocRate`. */
export const BAD_DOC_KINDS: readonly BadDocKind[] = [
  "401",
  "403",
  "410",
  "html",
  "array",
  "empty",
  "slow",
  "redirect",
  "huge",
];

/** How the registry misbehaves. */
export interface HostileOptions {
  /** Listings return at most this many rows, whatever `limit` asked, without a word. */
  silentCap?: number;
  /** Share of documents that misbehave, 0..1 (by a hash of the id). @default 0 */
  badDocRate?: number;
  /** How they misbehave (one kind per document, by a hash of the id). @default BAD_DOC_KINDS */
  badDocs?: readonly BadDocKind[];
  /** How long a `slow` document takes to answer, in milliseconds. @default 40000 */
  slowDocMs?: number;
  /** Where a `redirect` document points (`<redirectTo>/<encoded id>`). @default another path */
  redirectTo?: string;
  /** Size of a `huge` document's body, streamed without a length, in bytes. @default 41943040 */
  hugeDocBytes?: number;
  /** Every listing declares a body of 2 GB and streams padding. @default false */
  hugeListing?: boolean;
  /** What a `bomb` document inflates to, in bytes (gzip, declared small). @default 1 GiB */
  bombBytes?: number;
  /** How often a `drip` document sends its next byte, in milliseconds (a slowloris). @default 3000 */
  dripMs?: number;
}

/** Gzipped bombs built so far, by the size they inflate to (built once a process). */
const bombs = new Map<number, Promise<Uint8Array<ArrayBuffer>>>();

/**
 * A gzip body that inflates to `bytes` bytes (a JSON object's start, then spaces without end), a
 * few hundred KB on the wire: what a hostile host sends as a document.
 */
export function gzipBomb(bytes: number): Promise<Uint8Array<ArrayBuffer>> {
  let built = bombs.get(bytes);
  if (!built) {
    const head = new TextEncoder().encode('{"_id":"bomb","pad":"');
    const body = new Blob([head]).stream();
    const all = concatStreams(body, paddingStream(Math.max(0, bytes - head.length)));
    const gzip = new CompressionStream("gzip") as unknown as ReadableWritablePair<
      Uint8Array,
      Uint8Array
    >;
    built = new Response(all.pipeThrough(gzip)).arrayBuffer().then((b) => new Uint8Array(b));
    bombs.set(bytes, built);
  }
  return built;
}

/** One stream after the other. */
function concatStreams(
  a: ReadableStream<Uint8Array>,
  b: ReadableStream<Uint8Array>,
): ReadableStream<Uint8Array> {
  const readers = [a.getReader(), b.getReader()];
  return new ReadableStream({
    async pull(ctl) {
      while (readers.length > 0) {
        const { value, done } = await readers[0].read();
        if (!done) return ctl.enqueue(value);
        readers.shift();
      }
      ctl.close();
    },
  });
}

/** The way the document `id` misbehaves, or null when it behaves. */
export function badKindOf(id: string, o: HostileOptions): BadDocKind | null {
  const rate = o.badDocRate ?? 0;
  if (rate <= 0 || hash32(`bad:${id}`) / 4294967296 >= rate) return null;
  const kinds = o.badDocs ?? BAD_DOC_KINDS;
  return kinds[hash32(`kind:${id}`) % kinds.length];
}

/** A body of `bytes` bytes of padding, streamed in 64 KiB pieces. */
export function paddingStream(bytes: number): ReadableStream<Uint8Array> {
  const piece = new Uint8Array(65_536).fill(0x20);
  let left = bytes;
  return new ReadableStream({
    pull(ctl) {
      if (left <= 0) return ctl.close();
      const n = Math.min(left, piece.length);
      ctl.enqueue(n === piece.length ? piece : piece.subarray(0, n));
      left -= n;
    },
  });
}

/** The misbehaving answer for document `id`. */
export async function badDocResponse(
  c: Context,
  kind: BadDocKind,
  id: string,
  o: HostileOptions,
): Promise<Response> {
  switch (kind) {
    case "401":
    case "403":
    case "410":
      return c.json({ error: "forbidden", reason: `injected ${kind}` }, Number(kind) as 403);
    case "html":
      return c.html("<!doctype html><html><body>Please log in</body></html>");
    case "array":
      return c.json([1, 2, 3]);
    case "empty":
      return new Response("", { headers: { "content-type": "application/json" } });
    case "slow":
      await new Promise((r) => setTimeout(r, o.slowDocMs ?? 40_000));
      return c.json({ _id: id, late: true });
    case "redirect": {
      const base = o.redirectTo ?? new URL("/elsewhere", c.req.url).href;
      return c.redirect(`${base.replace(/\/+$/, "")}/${encodeURIComponent(id)}`, 302);
    }
    case "huge":
      return new Response(paddingStream(o.hugeDocBytes ?? 40 * 1024 * 1024), {
        headers: { "content-type": "application/json" },
      });
    case "drip": {
      // Headers at once, then a byte every few seconds, of a body that never ends in time.
      const every = o.dripMs ?? 3000;
      let timer: ReturnType<typeof setInterval> | undefined;
      const body = new ReadableStream<Uint8Array>({
        start(ctl) {
          ctl.enqueue(new TextEncoder().encode("{"));
          timer = setInterval(() => {
            try {
              ctl.enqueue(new Uint8Array([0x20]));
            } catch {
              clearInterval(timer);
            }
          }, every);
        },
        cancel: () => clearInterval(timer),
      });
      return new Response(body, { headers: { "content-type": "application/json" } });
    }
    case "bomb": {
      // Streamed, as a host that compresses on the fly sends it: no length declared.
      const gz = await gzipBomb(o.bombBytes ?? 1024 ** 3);
      return new Response(new Blob([gz]).stream(), {
        headers: { "content-type": "application/json", "content-encoding": "gzip" },
      });
    }
  }
}
