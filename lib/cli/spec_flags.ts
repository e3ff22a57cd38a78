/**
 * The flags that describe a crawl, shared by `deno task crawl` and `deno task worker`, and the
 * {@linkcode CrawlSpec} built from them (defaults and limits from `base/spec.ts`).
 *
 * @module
 */
import { buildSpec, type CrawlSpec, SPEC_DEFAULTS, SPEC_LIMITS } from "../base/spec.ts";
import {
  type Flag,
  type FlagTable,
  type FlagValues,
  intFlag,
  numberFlag,
  urlFlag,
  viewFlag,
} from "./flags.ts";

/** `--view`, shared by crawl, plan and locate. */
export const VIEW_FLAG = {
  type: "string",
  value: "DDOC/VIEW",
  help: "a view's rows (key, docid) instead of _all_docs",
  default: "_all_docs",
} as const satisfies Flag;

/**
 * `--header '[HOST=]Name: value'` (repeatable): a header on every request, or on HOST's only (a
 * private registry's token); values are never logged, stored or exported.
 */
export const HEADER_FLAG = {
  type: "string",
  value: "'[HOST=]Name: value'",
  help: "add a header to every request (or to HOST's only); repeatable; values never logged",
  multiple: true,
} as const satisfies Flag;

/** `--rate`, the process's cap (crawl and worker): every request of every host counts. */
export const RATE_FLAG = {
  type: "string",
  value: "N",
  help: "requests a second at most, listings and documents together (a host that pushes back " +
    "with 429/503 is slowed further on its own)",
  default: "no cap",
} as const satisfies Flag;

/** The requests a second `--rate` gives, or null when it is not given. */
export function rateFromFlag(raw: string | undefined): number | null {
  return raw === undefined ? null : numberFlag("rate", raw, { fallback: 0, ...SPEC_LIMITS.rate });
}

/** Flags of a crawl spec (besides `--source`, whose meaning differs per task). */
export const SPEC_FLAGS = {
  shards: {
    type: "string",
    value: "N",
    help: "shards of equal item count crawled in parallel",
    default: String(SPEC_DEFAULTS.shards),
  },
  docs: { type: "boolean", help: "also fetch every item's document" },
  "docs-url": {
    type: "string",
    value: "URL",
    help: "base URL of documents (<URL>/<id>), for registries that serve them elsewhere",
    default: "the source",
  },
  concurrency: {
    type: "string",
    value: "C",
    help: "document fetches in flight per shard",
    default: String(SPEC_DEFAULTS.concurrency),
  },
  "max-page": {
    type: "string",
    value: "L",
    help: `rows per listing request (${SPEC_LIMITS.maxPage.min}-${SPEC_LIMITS.maxPage.max})`,
    default: String(SPEC_DEFAULTS.maxPage),
  },
  "no-rebalance": { type: "boolean", help: "never split a straggling shard while crawling" },
  "doc-fields": {
    type: "string",
    value: "LIST",
    help:
      "keep only these top-level fields of each document (_id, _rev always): name,versions,time",
    default: "whole documents",
  },
  abbreviated: {
    type: "boolean",
    help: "ask --docs-url for npm's abbreviated metadata (what npm install reads; no _rev)",
  },
  view: VIEW_FLAG,
} as const satisfies FlagTable;

/** What the command line calls each field of a spec, for messages. */
const FLAG_NAMES = {
  source: "--source",
  docsUrl: "--docs-url",
  shards: "--shards",
  docs: "--docs",
  concurrency: "--concurrency",
  maxPage: "--max-page",
  view: "--view",
  docFields: "--doc-fields",
  abbreviated: "--abbreviated",
  rate: "--rate",
} as const;

/** A spec from parsed {@linkcode SPEC_FLAGS} and the source URL (already checked). */
export function specFromFlags(
  f: FlagValues<typeof SPEC_FLAGS>,
  source: string,
  options: { shards?: number } = {},
): CrawlSpec {
  const lim = SPEC_LIMITS;
  return buildSpec({
    source,
    docsUrl: f["docs-url"] === undefined ? null : urlFlag("docs-url", f["docs-url"]),
    shards: options.shards ??
      intFlag("shards", f.shards, { fallback: SPEC_DEFAULTS.shards, ...lim.shards }),
    docs: f.docs ?? false,
    concurrency: intFlag("concurrency", f.concurrency, {
      fallback: SPEC_DEFAULTS.concurrency,
      ...lim.concurrency,
    }),
    maxPage: intFlag("max-page", f["max-page"], {
      fallback: SPEC_DEFAULTS.maxPage,
      ...lim.maxPage,
    }),
    rebalance: !f["no-rebalance"],
    view: viewFlag(f.view),
    ...(f["doc-fields"] === undefined ? {} : { docFields: f["doc-fields"].split(",") }),
    ...(f.abbreviated ? { abbreviated: true } : {}),
  }, { files: true, names: FLAG_NAMES });
}
