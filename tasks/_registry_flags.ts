/**
 * The flags of `deno task registry` (`registry.ts`) and what they make of the simulated
 * registry's options: its profile (npm's replica, a GET-only proxy, opaque sequences), injected
 * faults, live behaviour (churn, hidden rows, document formats) and hostile answers.
 *
 * @module
 */
import { type FlagValues, intFlag, listFlag, numberFlag, urlFlag } from "../lib/cli/flags.ts";
import {
  ALL_BAD_DOC_KINDS,
  ALL_FAULT_KINDS,
  BAD_DOC_KINDS,
  CHURN_KINDS,
  FAULT_KINDS,
  type FaultOptions,
  type FeedControls,
  type HostileOptions,
  LISTING_SEQ_KINDS,
  npmReplicaProfile,
  type ProfileOptions,
  type RegistryOptions,
} from "../lib/sim/registry/mod.ts";

/** Every flag of `deno task registry`. */
export const FLAGS = {
  names: { type: "string", value: "FILE", help: "keys, one a line (.gz read too)" },
  synthetic: {
    type: "string",
    value: "N",
    help: "N keys with the skew of the bundled npm names",
  },
  port: { type: "string", value: "P", help: "port on 127.0.0.1", default: "any free port" },
  db: { type: "string", value: "NAME", help: "database name in the URL", default: "registry" },
  "latency-ms": { type: "string", value: "X", help: "added to every request", default: "0" },
  "doc-latency-ms": { type: "string", value: "X", help: "added to document GETs", default: "0" },
  "doc-lag-ms": {
    type: "string",
    value: "X",
    help: "documents changed less than X ms ago are served as they were before (a lagging host)",
    default: "0",
  },
  "hot-prefix": { type: "string", value: "P", help: "documents under P cost --hot-ms more" },
  "hot-ms": { type: "string", value: "X", help: "extra latency of hot documents", default: "0" },
  "fault-rate": { type: "string", value: "F", help: "share of failing requests", default: "0" },
  faults: {
    type: "string",
    value: "LIST",
    help: `which faults to inject (of ${ALL_FAULT_KINDS.join(",")})`,
    default: FAULT_KINDS.join(","),
  },
  "retry-after-s": { type: "string", value: "S", help: "Retry-After of a 429", default: "1" },
  "slow-ms": { type: "string", value: "X", help: "delay of a slow fault", default: "1000" },
  "rate-limit": {
    type: "string",
    value: "N",
    help: "answer 429 beyond N requests a second (each host: listings and documents)",
    default: "no limit",
  },
  "rate-limit-retry-after-s": {
    type: "string",
    value: "S",
    help: "Retry-After sent with a rate-limit 429",
    default: "none",
  },
  "missing-doc-rate": {
    type: "string",
    value: "R",
    help: "share of listed documents that answer 404",
    default: "0",
  },
  seed: { type: "string", value: "S", help: "seed of synthetic keys and faults", default: "42" },
  "no-skip": { type: "boolean", help: "refuse `skip` (as the npm replica does)" },
  "no-include-docs": { type: "boolean", help: "refuse `include_docs` (as the npm replica does)" },
  "max-limit": {
    type: "string",
    value: "L",
    help: "largest `limit`; above it 400",
    default: "10000",
  },
  "large-doc-rate": { type: "string", value: "R", help: "share of large documents", default: "0" },
  "heavy-tail": {
    type: "boolean",
    help: "document sizes with a heavy tail: most a few KB, 1% of 1-3 MB, 0.1% of 10-12 MB",
  },
  "large-doc-bytes": {
    type: "string",
    value: "B",
    help: "padding of a large document",
    default: "150000",
  },
  churn: { type: "string", value: "N", help: "random changes per second", default: "0" },
  "churn-schedule": {
    type: "string",
    value: "LIST",
    help: "changes in phases, RATExSECONDS,… (the last may run on): 20x300,200x60,20 is a soak " +
      "with a minute's burst",
  },
  "churn-kinds": {
    type: "string",
    value: "LIST",
    help: "what --churn does",
    default: CHURN_KINDS.join(","),
  },
  "replace-after-s": {
    type: "string",
    value: "S",
    help: "after S seconds, replace the database behind the URL (a restore from a backup)",
  },
  "replace-size": {
    type: "string",
    value: "N",
    help: "keys of the replacing database (synthetic, another seed)",
    default: "the same count",
  },
  "hide-rate": {
    type: "string",
    value: "R",
    help: "share of rows listings leave out while ranks still count them",
    default: "0",
  },
  "changes-cap": { type: "string", value: "N", help: "`_changes` answers at most N rows" },
  offset: {
    type: "string",
    value: "MODE",
    help: "what `_all_docs` says as offset: rank, zero (always 0) or absent (no rank oracle)",
    default: "rank",
  },
  "doc-format": {
    type: "string",
    value: "F",
    help: "document GET bodies: compact, newline (ended by a newline) or pretty",
    default: "compact",
  },
  "wrong-id-rate": {
    type: "string",
    value: "R",
    help: "share of documents whose GET answers another document",
    default: "0",
  },
  "wrong-bulk-get": { type: "boolean", help: "`_bulk_get` answers other documents than asked" },
  "oversize-doc-rate": {
    type: "string",
    value: "R",
    help: "share of documents over any answer's size (in include_docs listings too)",
    default: "0",
  },
  "no-bulk-get": { type: "boolean", help: "refuse `POST _bulk_get` (404)" },
  "silent-cap": {
    type: "string",
    value: "N",
    help: "listings return at most N rows whatever `limit` asks, without a word",
  },
  "bad-doc-rate": {
    type: "string",
    value: "R",
    help: "share of documents that misbehave (by a hash of their id)",
    default: "0",
  },
  "bad-docs": {
    type: "string",
    value: "LIST",
    help: "how they misbehave",
    default: BAD_DOC_KINDS.join(","),
  },
  "slow-doc-ms": { type: "string", value: "X", help: "a slow document's delay", default: "40000" },
  "redirect-to": { type: "string", value: "URL", help: "where redirecting documents point" },
  "huge-doc-bytes": {
    type: "string",
    value: "B",
    help: "body of a huge document, streamed",
    default: "41943040",
  },
  "huge-listing": { type: "boolean", help: "every listing declares 2 GB and streams padding" },
  "colliding-ids": {
    type: "boolean",
    help: "add ids built to collide (lone surrogates, '..', ids longer than a KV key)",
  },
  "npm-replica": {
    type: "boolean",
    help: "answer as npm's replica: GET only, unknown parameters a 400, no update_seq on " +
      "listings, no skip/include_docs/_bulk_get, no `pending`, documents only from a document " +
      "host (printed as `documents on <URL>`, for --docs-url)",
  },
  "listing-seq": {
    type: "string",
    value: "M",
    help: `what a listing does with update_seq=true: ${LISTING_SEQ_KINDS.join(", ")}`,
    default: "serve (reject with --npm-replica)",
  },
  "strict-params": { type: "boolean", help: "unknown query parameters are a 400 naming them" },
  "get-only": { type: "boolean", help: "every POST answers 405 (a read-only proxy)" },
  "refuse-keys": { type: "boolean", help: "`keys` on a GET listing is a 400" },
  "opaque-seq": {
    type: "boolean",
    help: "sequences as a CouchDB 2+ cluster spells them (`N-g1AAAA…`)",
  },
  "seq-jitter": {
    type: "string",
    value: "F",
    help: "share of opaque sequences whose leading number is spelled lower",
    default: "0",
  },
  "no-pending": { type: "boolean", help: "`_changes` answers carry no `pending`" },
  "docs-elsewhere": {
    type: "boolean",
    help: "serve documents only from a document host of their own (404 under the database)",
  },
  "docs-port": { type: "string", value: "P", help: "port of the document host", default: "any" },
  "renumber-after-s": {
    type: "string",
    value: "S",
    help: "after S seconds, number the changes anew (the data the same), as npm's replica did",
  },
  "renumber-by": {
    type: "string",
    value: "N",
    help: "how far sequences move when numbered anew (negative: down)",
    default: "-1000000",
  },
  "feed-hide-rate": {
    type: "string",
    value: "R",
    help: "share of changes the feed never shows",
    default: "0",
  },
  "feed-late-rate": {
    type: "string",
    value: "R",
    help: "share of changes that reach the feed --feed-late-ms late, under their own sequence",
    default: "0",
  },
  "feed-late-ms": { type: "string", value: "X", help: "how late they are", default: "5000" },
  "forget-feed-after-s": {
    type: "string",
    value: "S",
    help: "after S seconds, the feed forgets every change so far",
  },
  "info-frozen": { type: "boolean", help: "the database info's update_seq never moves" },
  "info-cache-ms": {
    type: "string",
    value: "X",
    help: "the database info comes from a cache at most X ms old",
    default: "0",
  },
  "info-ahead": {
    type: "string",
    value: "N",
    help: "the database info's update_seq runs N ahead of the feed",
    default: "0",
  },
  "info-other-spelling": {
    type: "boolean",
    help: "with --opaque-seq, the database info spells sequences otherwise than the feed",
  },
  "feed-fail-after-s": {
    type: "string",
    value: "S",
    help: "after S seconds, `_changes` answers --feed-fail-status for --feed-fail-for-s seconds",
  },
  "feed-fail-for-s": { type: "string", value: "S", help: "how long the feed fails", default: "60" },
  "feed-fail-status": {
    type: "string",
    value: "CODE",
    help: "what a failing feed answers (400 or 5xx)",
    default: "500",
  },
  "down-after-s": {
    type: "string",
    value: "S",
    help: "after S seconds, go off the network (connections refused) for --down-for-s seconds",
  },
  "down-for-s": {
    type: "string",
    value: "S",
    help: "how long the registry is down",
    default: "60",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

/** The values parsed from {@linkcode FLAGS}. */
export type Flags = FlagValues<typeof FLAGS>;

/** How the database info and the feed misbehave from the start (`registry_feed.ts`). */
export function feedFlags(f: Flags): FeedControls {
  return {
    infoFrozen: f["info-frozen"] ?? false,
    infoCacheMs: intFlag("info-cache-ms", f["info-cache-ms"], { fallback: 0, min: 0 }),
    infoAhead: intFlag("info-ahead", f["info-ahead"], { fallback: 0, min: 0 }),
    infoOtherSpelling: f["info-other-spelling"] ?? false,
  };
}

/** How the registry plays another server than a full CouchDB (`registry_profile.ts`). */
export function profileFlags(f: Flags): RegistryOptions {
  // The profile's limit gives way to a --max-limit given with it.
  const { maxLimit, ...npm } = f["npm-replica"] ? npmReplicaProfile() : { maxLimit: undefined };
  const [listingSeq] = f["listing-seq"] === undefined
    ? [undefined]
    : listFlag("listing-seq", f["listing-seq"], { known: LISTING_SEQ_KINDS });
  const given: ProfileOptions = {
    ...(listingSeq ? { listingSeq } : {}),
    ...(f["strict-params"] ? { strictParams: true } : {}),
    ...(f["get-only"] ? { getOnly: true } : {}),
    ...(f["refuse-keys"] ? { refuseKeys: true } : {}),
    ...(f["opaque-seq"] ? { opaqueSeq: true } : {}),
    ...(f["no-pending"] ? { pending: false } : {}),
    seqJitter: numberFlag("seq-jitter", f["seq-jitter"], { fallback: 0, min: 0, max: 1 }),
  };
  return {
    ...npm,
    ...(maxLimit !== undefined && f["max-limit"] === undefined ? { maxLimit } : {}),
    ...given,
    ...(f["docs-elsewhere"] ? { docsElsewhere: true } : {}),
  };
}

/** Injected faults. */
export function faultFlags(f: Flags): FaultOptions {
  return {
    faultRate: numberFlag("fault-rate", f["fault-rate"], { fallback: 0, min: 0, max: 1 }),
    faults: f.faults === undefined
      ? FAULT_KINDS
      : listFlag("faults", f.faults, { known: ALL_FAULT_KINDS }),
    retryAfterS: intFlag("retry-after-s", f["retry-after-s"], { fallback: 1, min: 0 }),
    slowMs: intFlag("slow-ms", f["slow-ms"], { fallback: 1000, min: 0 }),
    ...(f["rate-limit"] === undefined
      ? {}
      : { rateLimit: intFlag("rate-limit", f["rate-limit"], { fallback: 0, min: 1 }) }),
    ...(f["rate-limit-retry-after-s"] === undefined ? {} : {
      rateLimitRetryAfterS: intFlag("rate-limit-retry-after-s", f["rate-limit-retry-after-s"], {
        fallback: 0,
        min: 0,
      }),
    }),
  };
}

/** How the registry behaves the way live registries and their servers do. */
export function liveFlags(f: Flags): RegistryOptions {
  const formats = ["compact", "newline", "pretty"] as const;
  const [docFormat] = listFlag("doc-format", f["doc-format"] ?? "compact", { known: formats });
  const [offsetMode] = listFlag("offset", f.offset ?? "rank", {
    known: ["rank", "zero", "absent"] as const,
  });
  return {
    offsetMode,
    hideRate: numberFlag("hide-rate", f["hide-rate"], { fallback: 0, min: 0, max: 1 }),
    changesCap: f["changes-cap"] === undefined
      ? undefined
      : intFlag("changes-cap", f["changes-cap"], { fallback: 0, min: 1 }),
    docFormat,
    wrongIdRate: numberFlag("wrong-id-rate", f["wrong-id-rate"], { fallback: 0, min: 0, max: 1 }),
    wrongBulkGet: f["wrong-bulk-get"] ?? false,
    oversizeDocRate: numberFlag("oversize-doc-rate", f["oversize-doc-rate"], {
      fallback: 0,
      min: 0,
      max: 1,
    }),
  };
}

/** Hostile answers. */
export function hostileFlags(f: Flags): HostileOptions {
  return {
    silentCap: f["silent-cap"] === undefined
      ? undefined
      : intFlag("silent-cap", f["silent-cap"], { fallback: 0, min: 1 }),
    badDocRate: numberFlag("bad-doc-rate", f["bad-doc-rate"], { fallback: 0, min: 0, max: 1 }),
    badDocs: f["bad-docs"] === undefined
      ? BAD_DOC_KINDS
      : listFlag("bad-docs", f["bad-docs"], { known: ALL_BAD_DOC_KINDS }),
    slowDocMs: intFlag("slow-doc-ms", f["slow-doc-ms"], { fallback: 40_000, min: 0 }),
    redirectTo: f["redirect-to"] === undefined
      ? undefined
      : urlFlag("redirect-to", f["redirect-to"]),
    hugeDocBytes: intFlag("huge-doc-bytes", f["huge-doc-bytes"], {
      fallback: 40 * 1024 * 1024,
      min: 0,
    }),
    hugeListing: f["huge-listing"] ?? false,
  };
}
