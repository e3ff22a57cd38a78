/**
 * The one way a source is opened, for the engine (through its environment's `openSource`), the
 * CLI, the server (its crawls and `/locate`) and workers: by the kind its reference names, a
 * CouchDB-style registry over HTTP (`http(s)://…`, with the HTTP policy of the process: timeouts,
 * redirects, an injected fetch, metrics, one pacer) or an SQL table (`sqlite:PATH#table`), kept
 * once opened (a source counts its retries and learns the registry's limits). The engine knows only
 * `Source`: a new kind of source is a module under `lib/sources/` and a line here.
 *
 * @module
 */
import { FatalError } from "../base/errors.ts";
import type { CrawlSpec } from "../base/spec.ts";
import { CouchSource, type CouchSourceOptions } from "./couch/mod.ts";
import { SqliteSource } from "./sql/mod.ts";
import { BODY_BYTES_IN_FLIGHT, largeAnswers, Pacer, type RequestHeader } from "./http/mod.ts";
import { ByteBudget } from "../base/byte_budget.ts";
import type { LearnedCaps, Source } from "../plan/source.ts";

/** What a source is opened for: a crawl's spec, with what its registry was seen to serve. */
type Opened =
  & Pick<CrawlSpec, "source" | "docsUrl" | "view" | "maxPage" | "rate">
  & Partial<Pick<CrawlSpec, "docFields" | "abbreviated">>
  & {
    learned?: LearnedCaps | null;
  };

/** What npm's document host answers abbreviated metadata to. */
export const ABBREVIATED_ACCEPT = "application/vnd.npm.install-v1+json";

/** The header asking the document host of `docsUrl` for npm's abbreviated metadata. */
function abbreviatedHeader(docsUrl: string): RequestHeader {
  return { host: new URL(docsUrl).host.toLowerCase(), name: "Accept", value: ABBREVIATED_ACCEPT };
}

/** Opens sources with one process's HTTP options (see {@linkcode sourceOpener}). */
export interface SourceOpener {
  /**
   * The source a crawl (or a spec about to become one) reads from, opened once and kept; asked in
   * the forms its registry was seen to take (`learned`) from the start.
   */
  (crawl: Opened): Source;
  /** A source for a reference outside any crawl (`/locate`), with the same HTTP options. */
  url(url: string, options?: { view?: string }): Source;
  /** The process's pacer: its `--rate` and what it learned of each host's pace. */
  readonly pacer: Pacer;
}

/** The kinds of source a reference may name. */
export type SourceKind = "couch" | "sqlite";

/** The kind of source `ref` names, or null when it names none this project opens. */
export function sourceKind(ref: string): SourceKind | null {
  if (/^https?:\/\//.test(ref)) return "couch";
  if (ref.startsWith("sqlite:")) return "sqlite";
  return null;
}

/**
 * Opens the source `ref` names (see the module comment): a CouchDB-style registry with `options`,
 * or an SQL table (which takes none).
 * @throws FatalError for a reference of no kind this project opens.
 */
export function openSourceRef(
  ref: string,
  options: CouchSourceOptions & { view?: string } = {},
): Source {
  switch (sourceKind(ref)) {
    case "couch":
      return new CouchSource(ref, options);
    case "sqlite":
      if (options.view) throw new FatalError("--view is for CouchDB views, not SQL tables");
      return new SqliteSource(ref);
    default:
      throw new FatalError(`${ref} is a registry only the process that started it serves`);
  }
}

/**
 * An opener with `options` for every source it opens. `demo:` sources live inside the process
 * that serves them; `overrides` maps such a source to a reachable URL (the demo CLI passes its
 * own). @throws FatalError for a crawl whose source only another process serves.
 */
export function sourceOpener(
  options: CouchSourceOptions & { overrides?: Record<string, string> } = {},
): SourceOpener {
  const cache = new Map<string, Source>();
  // One gate for the large answers of every source of the process: their memory is bounded
  // together, however many crawls it runs.
  const { overrides, ...rest } = options;
  // And one pacer: a host's pushback slows every crawl of the process that asks it.
  const pacer = rest.pacer ?? new Pacer();
  const http = {
    ...rest,
    largeAnswers: rest.largeAnswers ?? largeAnswers(),
    bodyBytes: rest.bodyBytes ?? new ByteBudget(BODY_BYTES_IN_FLIGHT),
    pacer,
  };
  const open = (crawl: Opened) => {
    const key = JSON.stringify([
      crawl.source,
      crawl.docsUrl,
      crawl.view ?? null,
      crawl.maxPage,
      crawl.rate ?? null,
      crawl.docFields ?? null,
      crawl.abbreviated ?? false,
    ]);
    let s = cache.get(key);
    if (!s) {
      const url = overrides?.[crawl.source] ?? crawl.source;
      s = openSourceRef(url, {
        ...http,
        docsUrl: crawl.docsUrl ?? undefined,
        view: crawl.view,
        maxPage: Math.min(http.maxPage ?? Infinity, crawl.maxPage),
        learned: crawl.learned,
        pacer: crawl.rate ? pacer.withRate(crawl.rate) : pacer,
        docFields: crawl.docFields,
        headers: crawl.abbreviated
          ? [...http.headers ?? [], abbreviatedHeader(crawl.docsUrl ?? url)]
          : http.headers,
      });
      cache.set(key, s);
    }
    return s;
  };
  return Object.assign(open, {
    url: (url: string, o: { view?: string } = {}) => openSourceRef(url, { ...http, view: o.view }),
    pacer,
  });
}
