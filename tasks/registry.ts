/**
 * `deno task registry`: serves a CouchDB-compatible registry on 127.0.0.1 and prints
 * `listening on <URL>` (the database URL to pass as `--source`).
 */
import { intFlag, numberFlag, parseFlags, runMain } from "../lib/cli/flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import { FAULT_KINDS, type FaultKind, startRegistry } from "../lib/sim/registry_server.ts";
import { RegistryData } from "../lib/sim/registry_data.ts";
import { loadKeys } from "../lib/sim/load_keys.ts";
import { prng } from "../lib/sim/names.ts";

const HELP = `usage: deno task registry [--names FILE | --synthetic N] [--port P] [--db NAME]
  [--latency-ms X] [--doc-latency-ms X] [--hot-prefix P --hot-ms X]
  [--fault-rate F] [--faults 500,503,429,truncated,drop,slow] [--retry-after-s S] [--slow-ms X]
  [--missing-doc-rate R] [--seed S]
  [--no-skip] [--no-include-docs] [--max-limit L] [--large-doc-rate R] [--large-doc-bytes B]
  [--churn PER_SECOND]`;

runMain(async () => {
  const f = parseFlags(Deno.args, {
    names: { type: "string" },
    synthetic: { type: "string" },
    port: { type: "string" },
    db: { type: "string" },
    "latency-ms": { type: "string" },
    "doc-latency-ms": { type: "string" },
    "hot-prefix": { type: "string" },
    "hot-ms": { type: "string" },
    "fault-rate": { type: "string" },
    faults: { type: "string" },
    "retry-after-s": { type: "string" },
    "slow-ms": { type: "string" },
    "missing-doc-rate": { type: "string" },
    seed: { type: "string" },
    "no-skip": { type: "boolean" },
    "no-include-docs": { type: "boolean" },
    "max-limit": { type: "string" },
    "large-doc-rate": { type: "string" },
    "large-doc-bytes": { type: "string" },
    churn: { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (f.help) {
    console.log(HELP);
    return 0;
  }
  const faults = f.faults === undefined ? FAULT_KINDS : f.faults.split(",").map((s) => {
    if (!FAULT_KINDS.includes(s as FaultKind)) {
      throw new UsageError(`--faults: unknown fault "${s}" (known: ${FAULT_KINDS.join(",")})`);
    }
    return s as FaultKind;
  });
  const seed = intFlag("seed", f.seed, { fallback: 42 });
  const keys = await loadKeys({
    names: f.names,
    synthetic: f.synthetic === undefined
      ? undefined
      : intFlag("synthetic", f.synthetic, { fallback: 0, min: 1, max: 50_000_000 }),
    seed,
  });
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
    faultRate: numberFlag("fault-rate", f["fault-rate"], { fallback: 0, min: 0, max: 1 }),
    faults,
    retryAfterS: intFlag("retry-after-s", f["retry-after-s"], { fallback: 1, min: 0 }),
    slowMs: intFlag("slow-ms", f["slow-ms"], { fallback: 1000, min: 0 }),
    missingDocRate: numberFlag("missing-doc-rate", f["missing-doc-rate"], {
      fallback: 0,
      min: 0,
      max: 1,
    }),
    skip: !f["no-skip"],
    includeDocs: !f["no-include-docs"],
    maxLimit: intFlag("max-limit", f["max-limit"], { fallback: 10_000, min: 1 }),
    seed,
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
