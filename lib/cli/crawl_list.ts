/**
 * The crawls of a KV file in a person's words: what each crawl is (its registry and the options
 * that made it, as the command line writes them), its state and how far it got, and how two specs
 * differ, so that a rerun with another option can say why it is another crawl (`deno task crawls`,
 * export's choice, the crawl's first line).
 *
 * @module
 */
import { type CrawlSpec, SPEC_DEFAULTS } from "../base/spec.ts";
import { shownText } from "../base/shown_text.ts";
import { UsageError } from "../base/errors.ts";
import {
  type CrawlListing,
  type CrawlRecord,
  findCrawl,
  listCrawlListings,
} from "../engine/mod.ts";
import { duration, n } from "./progress.ts";

/**
 * The options that made a crawl, as flags (defaults left out): `--shards 56 --docs --docs-url
 * https://registry.npmjs.org`. Empty for a crawl made with every default.
 */
export function specFlags(spec: CrawlSpec): string {
  const parts: string[] = [`--shards ${spec.shards}`];
  if (spec.docs) parts.push("--docs");
  if (spec.docsUrl) parts.push(`--docs-url ${spec.docsUrl}`);
  if (spec.docFields) parts.push(`--doc-fields ${spec.docFields.join(",")}`);
  if (spec.abbreviated) parts.push("--abbreviated");
  if (spec.view) parts.push(`--view ${spec.view}`);
  if (spec.maxPage !== SPEC_DEFAULTS.maxPage) parts.push(`--max-page ${spec.maxPage}`);
  if (spec.follow) parts.push("--follow");
  return parts.join(" ");
}

/**
 * Where `now` differs from `was` in what is crawled (the parts of a crawl's id), one phrase each in
 * flag words: `--shards 56 (it was 16)`. Empty when they crawl the same.
 */
export function specDifference(was: CrawlSpec, now: CrawlSpec): string[] {
  const out: string[] = [];
  const differs = (flag: string, a: unknown, b: unknown, shown: (v: unknown) => string) => {
    if (JSON.stringify(a ?? null) !== JSON.stringify(b ?? null)) {
      out.push(`${flag} ${shown(b)} (it was ${shown(a)})`);
    }
  };
  const text = (v: unknown) => v === null || v === undefined ? "not given" : String(v);
  const yes = (v: unknown) => v ? "given" : "not given";
  differs("--source", was.source, now.source, text);
  differs("--shards", was.shards, now.shards, text);
  differs("--docs", was.docs, now.docs, yes);
  differs("--docs-url", was.docsUrl, now.docsUrl, text);
  differs(
    "--doc-fields",
    was.docFields,
    now.docFields,
    (v) => v ? (v as string[]).join(",") : text(v),
  );
  differs("--abbreviated", was.abbreviated ?? false, now.abbreviated ?? false, yes);
  differs("--view", was.view, now.view, text);
  differs("--max-page", was.maxPage, now.maxPage, text);
  return out;
}

/** How long ago `iso` was, from `nowMs`: `3m05s ago`. */
function ago(iso: string, nowMs: number): string {
  return `${duration((nowMs - Date.parse(iso)) / 1000)} ago`;
}

/**
 * One crawl in one line: `58d69e7b2e03 done 226,995/226,995 items  http://… --shards 16 --docs
 * (started 3m05s ago, ended 1m02s ago)`. Registry text is shown as text.
 */
export function listingLine(c: CrawlListing, nowMs: number): string {
  const items = `${n(c.itemsStored)}/${n(c.total)} items`;
  const when = `started ${ago(c.createdAt, nowMs)}` +
    (c.finishedAt ? `, ended ${ago(c.finishedAt, nowMs)}` : "");
  const why = c.error ? `: ${c.error}` : "";
  return shownText(
    `${c.id}  ${c.status}${why}  ${items}  ${c.source} ${specFlags(c.spec)}  (${when})`,
  );
}

/** A crawl named by what it is, for a one-line choice: `58d69e7b2e03 (done, --shards 16 --docs)`. */
export function crawlChoice(c: CrawlListing): string {
  return shownText(`${c.id} (${c.status}, ${c.source} ${specFlags(c.spec)})`);
}

/**
 * When `id` was just created in a file that already holds a crawl of the same registry: one line
 * saying that this is another crawl and which option made it so (the latest such crawl), and that
 * the command that made that one resumes it. Null when there is none.
 */
export async function anotherCrawlLine(kv: Deno.Kv, id: string): Promise<string | null> {
  const all = await listCrawlListings(kv);
  const made = all.find((c) => c.id === id);
  const same = all.filter((c) => c.id !== id && made && c.source === made.source);
  const was = same.at(-1);
  if (!made || !was) return null;
  const why = specDifference(was.spec, made.spec);
  return shownText(
    `crawl ${id} is a new crawl: ${why.length ? why.join(", ") : "another --crawl-id"}; ` +
      `this file also holds crawl ${was.id} of this registry (${was.status}, ` +
      `${n(was.itemsStored)} items), which the command that made it resumes ` +
      `(${specFlags(was.spec)})`,
  );
}

/**
 * The crawl a command reads from the KV file at `path`: the one named by `--crawl-id`, else the
 * only one the file holds.
 * @throws UsageError for a file with no crawl, several without a choice (naming each, as
 * `deno task crawls` does), or an unknown id
 */
export async function chooseCrawl(
  kv: Deno.Kv,
  path: string,
  id: string | null | undefined,
): Promise<CrawlRecord> {
  if (id === undefined || id === null) {
    const crawls = await listCrawlListings(kv);
    if (crawls.length === 0) throw new UsageError(`${path} holds no crawl`);
    if (crawls.length > 1) {
      throw new UsageError(
        `${path} holds ${crawls.length} crawls; pick one with --crawl-id: ` +
          `${crawls.map(crawlChoice).join("; ")} (deno task crawls --kv ${path} lists them)`,
      );
    }
    id = crawls[0].id;
  }
  const crawl = await findCrawl(kv, id);
  if (!crawl) throw new UsageError(`no crawl with id ${id} in ${path}`);
  return crawl;
}
