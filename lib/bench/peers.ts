/**
 * What a user would pick instead of rankcrawl, implemented plainly so the bench can time them in
 * the same run: one sequential `_all_docs` pager, the same split evenly over the key alphabet and
 * run in parallel, an `include_docs` pager, a fetcher of documents one by one (64 in flight) for
 * registries that serve ids only, and IBM's `@cloudant/couchbackup` in shallow mode (from npm). Each writes what it reads as NDJSON to a file, as rankcrawl's export does.
 *
 * @module
 */
import { evenSplitKeys } from "../plan/baselines.ts";
import type { Source } from "../plan/source.ts";
import { CouchSource } from "../sources/couch/mod.ts";
import { mapPool } from "../base/pool.ts";

const enc = new TextEncoder();

/**
 * Pages [start, end) in pages of `limit` rows, each page's last row serving only as the next
 * start, as a plain client would; `visit` sees each page. Returns the rows read.
 */
export async function pageThrough(
  src: Source,
  range: { start: string | null; end: string | null },
  visit: (rows: { id: string; rev: string; doc?: unknown }[]) => void | Promise<void> = () => {},
  options: { limit?: number; includeDocs?: boolean } = {},
): Promise<number> {
  const limit = options.limit ?? 1000;
  let cursor = range.start;
  let n = 0;
  for (;;) {
    const page = await src.list({
      start: cursor,
      end: range.end,
      limit,
      ...(options.includeDocs ? { includeDocs: true } : {}),
    });
    const rows = page.rows.slice(0, limit - 1);
    await visit(rows);
    n += rows.length;
    if (page.rows.length < limit) return n;
    cursor = page.rows[limit - 1].id;
  }
}

/** Writes NDJSON lines to a file, a page at a time. */
async function ndjsonFile(path: string) {
  const file = await Deno.open(path, { write: true, create: true, truncate: true });
  const writer = file.writable.getWriter();
  return {
    write: async (rows: { id: string; rev: string; doc?: unknown }[]) => {
      let text = "";
      for (const r of rows) {
        text += `{"id":${JSON.stringify(r.id)},"rev":${JSON.stringify(r.rev)}` +
          (r.doc !== undefined ? `,"doc":${r.doc}` : "") + "}\n";
      }
      await writer.write(enc.encode(text));
    },
    close: () => writer.close(),
  };
}

/** One sequential pager over the whole listing, to an NDJSON file. Returns the rows. */
export async function sequentialPager(
  url: string,
  out: string,
  options: { limit: number; includeDocs?: boolean },
): Promise<number> {
  const src = new CouchSource(url, { maxPage: options.limit });
  const file = await ndjsonFile(out);
  const n = await pageThrough(
    src,
    { start: null, end: null },
    (rows) =>
      file.write(rows.map((r) => ({
        ...r,
        doc: r.doc && typeof r.doc === "object" && "json" in r.doc ? r.doc.json : undefined,
      }))),
    options,
  );
  await file.close();
  return n;
}

/**
 * `shards` pagers in parallel over an even split of the key alphabet (what one does without a
 * rank oracle), to one NDJSON file each. Returns the rows.
 */
export async function evenSplitPagers(
  url: string,
  dir: string,
  options: { shards: number; limit: number },
): Promise<number> {
  const keys = evenSplitKeys(options.shards);
  const ranges = [null, ...keys].map((start, i) => ({ start, end: keys[i] ?? null }));
  const counts = await Promise.all(ranges.map(async (range, i) => {
    const src = new CouchSource(url, { maxPage: options.limit });
    const file = await ndjsonFile(`${dir}/even-${i}.ndjson`);
    const n = await pageThrough(src, range, (rows) => file.write(rows), { limit: options.limit });
    await file.close();
    return n;
  }));
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * What one writes for a registry that serves ids only (the npm replica): page the ids (`limit`
 * rows a page) and fetch each document with `inFlight` requests at a time, to an NDJSON file.
 * Returns the documents written.
 */
export async function concurrentFetcher(
  url: string,
  out: string,
  options: { limit: number; inFlight: number },
): Promise<number> {
  const src = new CouchSource(url, { maxPage: options.limit });
  const file = await ndjsonFile(out);
  const n = await pageThrough(src, { start: null, end: null }, async (rows) => {
    const docs = await mapPool(rows, async (r) => {
      const res = await fetch(`${url}/${encodeURIComponent(r.id)}`);
      return { ...r, doc: (await res.text()).trim() };
    }, { concurrency: options.inFlight });
    await file.write(docs);
  }, { limit: options.limit });
  await file.close();
  return n;
}

/**
 * `@cloudant/couchbackup` (npm) in shallow mode (`_all_docs?include_docs=true` pages) to a file.
 * Returns the bytes written. It is loaded from npm the first time (network: the npm registry).
 */
export async function couchbackupShallow(
  url: string,
  out: string,
  options: { bufferSize?: number } = {},
): Promise<number> {
  // A specifier in a variable: type checking never fetches couchbackup, only running the bench.
  const specifier = "npm:@cloudant/couchbackup@2.11.12";
  const mod = await import(specifier);
  const { Writable } = await import("node:stream");
  const file = await Deno.open(out, { write: true, create: true, truncate: true });
  let bytes = 0;
  const sink = new Writable({
    write(chunk: Uint8Array, _enc: string, cb: (err?: Error) => void) {
      bytes += chunk.length;
      file.write(chunk).then(() => cb(), cb);
    },
  });
  const backup = (mod.default ?? mod).backup as (
    src: string,
    target: unknown,
    opts: unknown,
    cb: (err: unknown) => void,
  ) => void;
  await new Promise<void>((resolve, reject) =>
    backup(
      url,
      sink,
      { mode: "shallow", bufferSize: options.bufferSize ?? 500 },
      (err) => err ? reject(err) : resolve(),
    )
  );
  file.close();
  return bytes;
}
