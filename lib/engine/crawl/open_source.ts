/**
 * Opens the source a stored crawl reads from, once per crawl (the source learns the registry's
 * page cap and counts retries, so it is kept), with the page cap the crawl has learned before.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import type { Source } from "../../plan/source.ts";
import { CouchSource, type CouchSourceOptions } from "../../sources/couch_source.ts";
import type { CrawlRecord } from "../store/mod.ts";

/**
 * Returns an opener for `openSource` dependencies. `demo:` sources live inside the process that
 * started them; `overrides` maps such a source to a reachable URL (the demo CLI passes its own).
 * HTTP options (timeouts, the redirect policy, an injected fetch) apply to every source opened.
 */
export function sourceOpener(
  options: CouchSourceOptions & { overrides?: Record<string, string> } = {},
): (crawl: CrawlRecord) => Source {
  const cache = new Map<string, Source>();
  return (crawl) => {
    let s = cache.get(crawl.id);
    if (!s) {
      const url = options.overrides?.[crawl.source] ?? crawl.source;
      if (!/^https?:\/\//.test(url)) {
        throw new FatalError(
          `crawl ${crawl.id} reads ${crawl.source}, which only its own process serves`,
        );
      }
      s = new CouchSource(url, {
        ...options,
        docsUrl: crawl.docsUrl ?? undefined,
        view: crawl.view,
        maxPage: Math.min(options.maxPage ?? Infinity, crawl.maxPage),
      });
      cache.set(crawl.id, s);
    }
    return s;
  };
}
