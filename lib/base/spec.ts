/**
 * What a crawl is asked to do, in one place: the {@linkcode CrawlSpec} type, its defaults and
 * limits, the crawl-id pattern, and the id derived from a spec. Every entry point (the tasks, the
 * HTTP API, the scheduled recrawl, plan files) builds specs and checks ids through this module, so
 * a default or a limit is written once.
 *
 * @module
 */
import { hexDigest } from "./hex_digest.ts";
import { resolve } from "node:path";
import { InputError } from "./errors.ts";

/** What a crawl was asked to do; identical specs give identical crawl ids. */
export interface CrawlSpec {
  /** Database URL (or `demo:` for the bundled demo registry). */
  source: string;
  /** Base URL for documents; null = the database URL. */
  docsUrl: string | null;
  /** Shards planned. */
  shards: number;
  /** Fetch each item's document. */
  docs: boolean;
  /** Document fetches in flight per shard. */
  concurrency: number;
  /** Largest page of a listing (rows); keys-only crawls use it whole, document crawls less. */
  maxPage: number;
  /** Split stragglers while running. */
  rebalance: boolean;
  /** Keep applying `_changes` after the crawl is done (the server's cron does it). @default false */
  follow?: boolean;
  /**
   * Crawl a view (`ddoc/view`) instead of `_all_docs`: one item per row, documents are the rows'.
   * @default none
   */
  view?: string;
  /**
   * Requests a second this crawl sends at most, over all its shards (listings and documents), inside
   * the process's own `--rate`; not part of the crawl's id: a resume may change it. @default none
   */
  rate?: number;
  /**
   * Keep only these top-level fields of each document (`_id` and `_rev` always): a mirror of what
   * one needs, a fraction of the size; part of the crawl's id. @default whole documents
   */
  docFields?: string[];
  /**
   * Ask the document host for npm's abbreviated metadata (`Accept:
   * application/vnd.npm.install-v1+json`): what `npm install` reads, without `_rev` (the
   * revision check cannot tell a stale copy then); part of the crawl's id. @default false
   */
  abbreviated?: boolean;
  /**
   * Sinks the crawl's items are kept in, by the names the server's `SINKS` gives them (the
   * references, with their credentials, stay in the server's environment); not part of the
   * crawl's id. @default none
   */
  sinks?: string[];
}

/** Fields every kept document has, whatever `docFields` asks. */
export const ALWAYS_KEPT: readonly string[] = ["_id", "_rev"];

/** Fields `docFields` may name at most. */
export const MAX_DOC_FIELDS = 100;

/** Defaults of the optional parts of a spec. */
export const SPEC_DEFAULTS = {
  shards: 16,
  docs: false,
  concurrency: 8,
  /** The npm replica's cap; registries that cap lower are learned from (see `page_listing.ts`). */
  maxPage: 10_000,
  rebalance: true,
} as const;

/** Inclusive bounds of the numeric parts of a spec. */
export const SPEC_LIMITS = {
  shards: { min: 1, max: 100_000 },
  concurrency: { min: 1, max: 1000 },
  /** 2 rows at least: one item and the row that carries the next cursor. */
  maxPage: { min: 2, max: 10_000 },
  /** Requests a second (not necessarily whole). */
  rate: { min: 0.1, max: 100_000 },
} as const;

/** Crawl ids: 1-64 letters, digits, `.`, `_` or `-` (safe in URLs, KV keys and file names). */
/** What a view name looks like: `ddoc/view`, each 1-100 letters, digits, `_`, `.` or `-`. */
export const VIEW_PATTERN: RegExp =
  /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\/[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$/;

export const CRAWL_ID_PATTERN: RegExp = /^[A-Za-z0-9_.-]{1,64}$/;

/** What {@linkcode isCrawlId} failures say. */
export const CRAWL_ID_RULE = "1-64 letters, digits, '.', '_' or '-'";

/** True when `id` is a well-formed crawl id. */
export function isCrawlId(id: string): boolean {
  return CRAWL_ID_PATTERN.test(id);
}

/** The parts of a spec a caller gives; the rest comes from {@linkcode SPEC_DEFAULTS}. */
export type SpecInput = Pick<CrawlSpec, "source"> & Partial<Omit<CrawlSpec, "source">>;

/**
 * A complete spec from `input`: defaults filled in, numbers checked against
 * {@linkcode SPEC_LIMITS}, URLs in canonical form ({@linkcode normalizeSourceUrl}; a `demo:` source
 * is kept as it is).
 *
 * @example
 * ```ts
 * const spec = buildSpec({ source: "http://127.0.0.1:5984/registry/", shards: 56 });
 * // spec.source === "http://127.0.0.1:5984/registry", spec.maxPage === 10000
 * ```
 * Options about documents (`docsUrl`, `docFields`, `abbreviated`) without `docs` are refused:
 * kept, they would do nothing.
 * @throws InputError naming the first field out of bounds (as `options.names` calls it).
 */
export function buildSpec(input: SpecInput, options: BuildSpecOptions = {}): CrawlSpec {
  const named = (field: keyof SpecInput) => options.names?.[field] ?? field;
  const url = (raw: string, field: keyof SpecInput) =>
    raw.startsWith("demo:")
      ? raw
      : normalizeSourceUrl(raw, named(field), { credentials: true, files: options.files });
  const spec: CrawlSpec = {
    source: url(input.source, "source"),
    docsUrl: input.docsUrl ? url(input.docsUrl, "docsUrl") : null,
    shards: input.shards ?? SPEC_DEFAULTS.shards,
    docs: input.docs ?? SPEC_DEFAULTS.docs,
    concurrency: input.concurrency ?? SPEC_DEFAULTS.concurrency,
    maxPage: input.maxPage ?? SPEC_DEFAULTS.maxPage,
    rebalance: input.rebalance ?? SPEC_DEFAULTS.rebalance,
  };
  if (input.follow) spec.follow = true;
  if (input.view !== undefined) {
    if (!VIEW_PATTERN.test(input.view)) {
      throw new InputError(`view must be ddoc/view (letters, digits, _ . -), got "${input.view}"`);
    }
    spec.view = input.view;
  }
  // Options about documents on a crawl without them would be kept and do nothing: refused.
  const aboutDocs = (["docsUrl", "docFields", "abbreviated"] as const)
    .find((f) => ![undefined, null, false, ""].includes(input[f] as never));
  if (aboutDocs && !spec.docs) {
    throw new InputError(
      `${named(aboutDocs)} is about documents, which this crawl does not fetch: ` +
        `give ${named("docs")} too, or leave ${named(aboutDocs)} out`,
    );
  }
  if (input.docFields !== undefined) {
    spec.docFields = checkDocFields(input.docFields, named("docFields"));
  }
  if (input.abbreviated) {
    if (!spec.docsUrl) {
      throw new InputError(
        `abbreviated metadata is npm's document host's: give ${named("docsUrl")} too`,
      );
    }
    spec.abbreviated = true;
  }
  if (input.rate !== undefined) {
    const { min, max } = SPEC_LIMITS.rate;
    if (typeof input.rate !== "number" || !(input.rate >= min && input.rate <= max)) {
      throw new InputError(
        `${named("rate")} must be a number of requests a second from ${min} to ${max}`,
      );
    }
    spec.rate = input.rate;
  }
  if (input.sinks !== undefined && input.sinks.length > 0) {
    spec.sinks = checkSinkNames(input.sinks, named("sinks"));
  }
  for (const field of ["shards", "concurrency", "maxPage"] as const) {
    const { min, max } = SPEC_LIMITS[field];
    const v = spec[field];
    if (!Number.isInteger(v) || v < min || v > max) {
      throw new InputError(
        `${named(field)} must be a whole number from ${min} to ${max}, got ${v}`,
      );
    }
  }
  return spec;
}

/** How {@linkcode buildSpec} reads its input. */
export interface BuildSpecOptions {
  /**
   * The source may name an SQL table (`sqlite:FILE#table`): the command line only, never a request
   * (a server must not be made to read its own files). @default false
   */
  files?: boolean;
  /**
   * What the user calls each field, for messages (the command line's `--docs-url` for `docsUrl`).
   * @default the field's own name (what `POST /crawls` takes)
   */
  names?: Partial<Record<keyof SpecInput, string>>;
}

/** A sink's name in `SINKS` and in a crawl's `sinks`: 1-32 letters, digits, `_` or `-`. */
export const SINK_NAME_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;
/** Sinks one crawl may name at most. */
export const MAX_CRAWL_SINKS = 8;

/** `names` without repeats, each a sink name, at most {@linkcode MAX_CRAWL_SINKS}. */
function checkSinkNames(names: readonly unknown[], field: string): string[] {
  if (!Array.isArray(names) || names.some((n) => typeof n !== "string")) {
    throw new InputError(`${field} must be a list of sink names`);
  }
  const unique = [...new Set(names as string[])];
  const bad = unique.find((n) => !SINK_NAME_PATTERN.test(n));
  if (bad !== undefined) {
    throw new InputError(`${field}: a sink name is 1-32 letters, digits, _ or -, got "${bad}"`);
  }
  if (unique.length > MAX_CRAWL_SINKS) {
    throw new InputError(`${field}: at most ${MAX_CRAWL_SINKS} sinks a crawl`);
  }
  return unique;
}

/**
 * `fields` without repeats or the ones always kept, each 1-100 characters without control
 * characters, 1-100 of them. @throws InputError naming what is wrong.
 */
function checkDocFields(fields: readonly unknown[], name: string): string[] {
  if (!Array.isArray(fields) || fields.some((f) => typeof f !== "string")) {
    throw new InputError(`${name} must be a list of field names`);
  }
  const kept = [...new Set((fields as string[]).map((f) => f.trim()))]
    .filter((f) => !ALWAYS_KEPT.includes(f));
  const control = (f: string) => [...f].some((ch) => ch.charCodeAt(0) < 0x20);
  if (kept.some((f) => f.length === 0 || f.length > 100 || control(f))) {
    throw new InputError(`${name}: field names are 1-100 characters each, none empty`);
  }
  if (kept.length === 0) throw new InputError(`${name} must name a field besides _id and _rev`);
  if (kept.length > MAX_DOC_FIELDS) {
    throw new InputError(`${name} names at most ${MAX_DOC_FIELDS} fields, got ${kept.length}`);
  }
  return kept;
}

/**
 * A registry URL as every entry point (CLI, API, schedule, worker, sources) keeps it, so that the
 * same registry written differently is the same crawl everywhere: trimmed, parsed and written back
 * in canonical form (lower-case scheme and host, no default port, dot segments resolved: `
 * HTTP://X:80/a/../db/` is `http://x/db`), without a trailing slash.
 * @throws InputError naming `field`, for anything that cannot be a database URL: not a URL, not
 * http(s), a query or a fragment, an encoded slash, backslash or dot in its path (whether those
 * escape a path is up to the server: never guessed), or credentials unless `credentials`.
 */
export function normalizeSourceUrl(
  raw: string,
  field: string,
  options: { credentials?: boolean; files?: boolean } = {},
): string {
  if (options.files && raw.trim().startsWith("sqlite:")) return normalizeSqliteRef(raw, field);
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new InputError(`${field} is not a URL`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new InputError(`${field} must be an http(s) URL`);
  }
  if ((u.username || u.password) && !options.credentials) {
    throw new InputError(`${field} must not carry credentials (they would be stored and shown)`);
  }
  if (u.search || u.hash || raw.trim().endsWith("?") || raw.trim().endsWith("#")) {
    throw new InputError(`${field} must be a database URL, without ? or #`);
  }
  // Checked on what was given: the URL parser resolves an encoded dot segment before we see it.
  if (/%(2f|5c|2e)/i.test(raw)) {
    throw new InputError(`${field} must not have an encoded '/', '\\' or '.' in its path`);
  }
  return u.href.replace(/\/+$/, "");
}

/**
 * An SQL table as a source: `sqlite:PATH#table` (table `items` when `#` is left out), its path made
 * absolute, so that the same file named otherwise is one crawl.
 */
function normalizeSqliteRef(raw: string, field: string): string {
  const m = /^sqlite:([^#]*)(?:#(.*))?$/.exec(raw.trim());
  const table = m?.[2] ?? "items";
  if (!m || m[1] === "") throw new InputError(`${field} must be sqlite:FILE#table`);
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(table)) {
    throw new InputError(
      `${field}: the table must be letters, digits and _ (up to 64), got ${table}`,
    );
  }
  return `sqlite:${resolve(m[1])}#${table}`;
}

/** A stable crawl id for a spec: the same command resumes the same crawl. */
export async function crawlIdFor(spec: CrawlSpec): Promise<string> {
  const canon = JSON.stringify([
    spec.source,
    spec.docsUrl,
    spec.shards,
    spec.docs,
    spec.maxPage,
    // Only view crawls carry it: ids of `_all_docs` crawls stay what they were.
    ...(spec.view ? [spec.view] : []),
    // Crawls that store less of each document are other crawls (ids of whole ones unchanged).
    ...(spec.docFields || spec.abbreviated
      ? [{ fields: spec.docFields ?? null, abbreviated: spec.abbreviated ?? false }]
      : []),
  ]);
  return await hexDigest(canon, 6);
}
