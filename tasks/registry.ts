/**
 * `deno task registry`: serves a CouchDB-compatible registry on 127.0.0.1 and prints
 * `listening on <URL>` (the database URL to pass as `--source`).
 */
import {
  type FlagValues,
  helpText,
  intFlag,
  numberFlag,
  parseFlags,
  runMain,
  urlFlag,
} from "../lib/cli/flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import { FAULT_KINDS, type FaultOptions } from "../lib/sim/registry_faults.ts";
import { BAD_DOC_KINDS, type HostileOptions } from "../lib/sim/registry_hostile.ts";
import { collidingIds, prng } from "../lib/sim/names.ts";
import { sortKeys } from "../lib/plan/keys.ts";
import { startRegistry } from "../lib/sim/registry_server.ts";
import { RegistryData } from "../lib/sim/registry_data.ts";
import { loadKeys } from "../lib/sim/load_keys.ts";

const FLAGS = {
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
  "hot-prefix": { type: "string", value: "P", help: "documents under P cost --hot-ms more" },
  "hot-ms": { type: "string", value: "X", help: "extra latency of hot documents", default: "0" },
  "fault-rate": { type: "string", value: "F", help: "share of failing requests", default: "0" },
  faults: {
    type: "string",
    value: "LIST",
    help: "which faults to inject",
    default: FAULT_KINDS.join(","),
  },
  "retry-after-s": { type: "string", value: "S", help: "Retry-After of a 429", default: "1" },
  "slow-ms": { type: "string", value: "X", help: "delay of a slow fault", default: "1000" },
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
  "large-doc-bytes": {
    type: "string",
    value: "B",
    help: "padding of a large document",
    default: "150000",
  },
  churn: { type: "string", value: "N", help: "random changes per second", default: "0" },
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
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task registry",
  summary: "Serves a CouchDB-compatible registry on 127.0.0.1 and prints `listening on <URL>`\n" +
    "(the database URL to pass as --source), with injectable latency and misbehaviour.",
  examples: [
    "deno task registry --synthetic 1000000 --latency-ms 50",
    "deno task registry --fault-rate 0.1 --missing-doc-rate 0.02",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  const seed = intFlag("seed", f.seed, { fallback: 42 });
  const keys = await loadKeys({
    names: f.names,
    synthetic: f.synthetic === undefined
      ? undefined
      : intFlag("synthetic", f.synthetic, { fallback: 0, min: 1, max: 50_000_000 }),
    seed,
  });
  if (f["colliding-ids"]) {
    const have = new Set(keys);
    keys.push(...collidingIds().filter((id) => !have.has(id)));
    sortKeys(keys);
  }
  const data = new RegistryData(keys, {
    largeDocRate: numberFlag("large-doc-rate", f["large-doc-rate"], {
      fallback: 0,
      min: 0,
      max: 1,
    }),
    largeDocBytes: intFlag("large-doc-bytes", f["large-doc-bytes"], { fallback: 150_000, min: 0 }),
  });
  const reg = await startRegistry(data, {
    port: intFlag("port", f.port, { fallback: 0, min: 0, max: 65535 }),
    db: f.db ?? "registry",
    latencyMs: numberFlag("latency-ms", f["latency-ms"], { fallback: 0, min: 0 }),
    docLatencyMs: numberFlag("doc-latency-ms", f["doc-latency-ms"], { fallback: 0, min: 0 }),
    hotPrefix: f["hot-prefix"],
    hotMs: numberFlag("hot-ms", f["hot-ms"], { fallback: 0, min: 0 }),
    missingDocRate: numberFlag("missing-doc-rate", f["missing-doc-rate"], {
      fallback: 0,
      min: 0,
      max: 1,
    }),
    skip: !f["no-skip"],
    includeDocs: !f["no-include-docs"],
    maxLimit: intFlag("max-limit", f["max-limit"], { fallback: 10_000, min: 1 }),
    seed,
    bulkGet: !f["no-bulk-get"],
    ...faultFlags(f),
    ...hostileFlags(f),
  });
  const churn = numberFlag("churn", f.churn, { fallback: 0, min: 0 });
  if (churn > 0) {
    const rand = prng(seed + 1);
    setInterval(() => data.churn(Math.max(1, Math.round(churn / 10)), rand), 100);
  }
  console.log(`listening on ${reg.url}`);
  console.log(`${data.size} documents, update_seq ${data.updateSeq}`);
  await new Promise(() => {}); // serve until killed
});

type Flags = FlagValues<typeof FLAGS>;

/** A comma-separated list of known words. */
function listFlag<T extends string>(name: string, raw: string, known: readonly T[]): T[] {
  return raw.split(",").map((w) => {
    if (!known.includes(w as T)) {
      throw new UsageError(`--${name}: unknown kind "${w}" (known: ${known.join(",")})`);
    }
    return w as T;
  });
}

function faultFlags(f: Flags): FaultOptions {
  return {
    faultRate: numberFlag("fault-rate", f["fault-rate"], { fallback: 0, min: 0, max: 1 }),
    faults: f.faults === undefined ? FAULT_KINDS : listFlag("faults", f.faults, FAULT_KINDS),
    retryAfterS: intFlag("retry-after-s", f["retry-after-s"], { fallback: 1, min: 0 }),
    slowMs: intFlag("slow-ms", f["slow-ms"], { fallback: 1000, min: 0 }),
  };
}

function hostileFlags(f: Flags): HostileOptions {
  return {
    silentCap: f["silent-cap"] === undefined
      ? undefined
      : intFlag("silent-cap", f["silent-cap"], { fallback: 0, min: 1 }),
    badDocRate: numberFlag("bad-doc-rate", f["bad-doc-rate"], { fallback: 0, min: 0, max: 1 }),
    badDocs: f["bad-docs"] === undefined
      ? BAD_DOC_KINDS
      : listFlag("bad-docs", f["bad-docs"], BAD_DOC_KINDS),
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
