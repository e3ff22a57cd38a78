/**
 * `deno task registry`: serves a CouchDB-compatible registry on 127.0.0.1 and prints
 * `listening on <URL>` (the database URL to pass as `--source`).
 */
import { helpText, intFlag, listFlag, numberFlag, parseFlags, runMain } from "../lib/cli/flags.ts";
import {
  faultFlags,
  feedFlags,
  FLAGS,
  type Flags,
  hostileFlags,
  liveFlags,
  profileFlags,
} from "./_registry_flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import {
  CHURN_KINDS,
  type FeedControls,
  RegistryData,
  type RunningRegistry,
  startRegistry,
} from "../lib/sim/registry/mod.ts";
import { collidingIds, prng } from "../lib/sim/names.ts";
import { sortKeys } from "../lib/plan/keys.ts";
import { loadKeys } from "../lib/sim/load_keys.ts";
import { parseChurnSchedule, runChurn } from "../lib/sim/churn_schedule.ts";

const HELP = {
  usage: "deno task registry",
  summary: "Serves a CouchDB-compatible registry on 127.0.0.1 and prints `listening on <URL>`\n" +
    "(the database URL to pass as --source), with injectable latency and misbehaviour.",
  examples: [
    "deno task registry --synthetic 1000000 --latency-ms 50",
    "deno task registry --fault-rate 0.1 --missing-doc-rate 0.02",
    "deno task registry --npm-replica --churn 20          # as npm's replica, changing",
  ],
};

/** A second count from a flag, or null when the flag is not given. */
function seconds(name: string, raw: string | undefined): number | null {
  return raw === undefined ? null : numberFlag(name, raw, { fallback: 0, min: 0 });
}

/**
 * What happens to the registry over time, as the flags schedule it: its changes numbered anew,
 * the feed forgetting, failing for a while, the registry going down for a while.
 */
function timeline(
  f: Flags,
  o: { data: RegistryData; feed: FeedControls; reg: RunningRegistry },
): void {
  const at = (s: number | null, what: () => unknown) =>
    s !== null && setTimeout(() => void what(), s * 1000);
  const by = intFlag("renumber-by", f["renumber-by"], { fallback: -1_000_000 });
  at(seconds("renumber-after-s", f["renumber-after-s"]), () => {
    o.data.renumber(by);
    console.log(`renumbered the changes by ${by}`);
  });
  at(seconds("forget-feed-after-s", f["forget-feed-after-s"]), () => {
    o.data.forgetFeed();
    console.log(`the feed forgot every change up to ${o.data.updateSeq}`);
  });
  const failFor = seconds("feed-fail-for-s", f["feed-fail-for-s"]) ?? 60;
  const status = intFlag("feed-fail-status", f["feed-fail-status"], {
    fallback: 500,
    min: 400,
    max: 599,
  });
  at(seconds("feed-fail-after-s", f["feed-fail-after-s"]), () => {
    o.feed.feedStatus = status;
    console.log(`_changes answers ${status} for ${failFor} s`);
    at(failFor, () => (o.feed.feedStatus = null, console.log("_changes answers again")));
  });
  const downFor = seconds("down-for-s", f["down-for-s"]) ?? 60;
  at(seconds("down-after-s", f["down-after-s"]), () => {
    // Up again `downFor` after it went down, however long the old server takes to drain.
    const closed = o.reg.down();
    console.log(`down for ${downFor} s`);
    at(downFor, () => (o.reg.up(), console.log("up again")));
    return closed;
  });
}

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
    heavyTail: f["heavy-tail"] ?? false,
  });
  data.feedHideRate = numberFlag("feed-hide-rate", f["feed-hide-rate"], {
    fallback: 0,
    min: 0,
    max: 1,
  });
  data.feedLateRate = numberFlag("feed-late-rate", f["feed-late-rate"], {
    fallback: 0,
    min: 0,
    max: 1,
  });
  data.feedLateMs = numberFlag("feed-late-ms", f["feed-late-ms"], { fallback: 5000, min: 0 });
  const feed = feedFlags(f);
  const reg = await startRegistry(data, {
    feed,
    port: intFlag("port", f.port, { fallback: 0, min: 0, max: 65535 }),
    db: f.db ?? "registry",
    latencyMs: numberFlag("latency-ms", f["latency-ms"], { fallback: 0, min: 0 }),
    docLatencyMs: numberFlag("doc-latency-ms", f["doc-latency-ms"], { fallback: 0, min: 0 }),
    docLagMs: numberFlag("doc-lag-ms", f["doc-lag-ms"], { fallback: 0, min: 0 }),
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
    ...liveFlags(f),
    ...profileFlags(f),
    docsPort: intFlag("docs-port", f["docs-port"], { fallback: 0, min: 0, max: 65535 }),
  });
  const churn = numberFlag("churn", f.churn, { fallback: 0, min: 0, max: 100_000 });
  if (churn > 0 && f["churn-schedule"] !== undefined) {
    throw new UsageError("--churn and --churn-schedule are one or the other");
  }
  const schedule = f["churn-schedule"] !== undefined
    ? parseChurnSchedule(f["churn-schedule"])
    : churn > 0
    ? [{ perSecond: churn, seconds: null }]
    : [];
  if (schedule.length > 0) {
    const kinds = listFlag("churn-kinds", f["churn-kinds"] ?? CHURN_KINDS.join(","), {
      known: CHURN_KINDS,
    });
    // Changes come one at a time, spread over each second, as a live registry's do.
    runChurn(data, schedule, {
      rand: prng(seed + 1),
      kinds,
      onPhase: (p) =>
        console.log(
          `churn: ${p.perSecond} changes a second${
            p.seconds === null ? "" : ` for ${p.seconds} s`
          } (from update_seq ${data.updateSeq})`,
        ),
    }).then(() => schedule.at(-1)?.seconds !== null && console.log("churn: schedule over"));
  }
  if (f["replace-after-s"] !== undefined) {
    const after = numberFlag("replace-after-s", f["replace-after-s"], { fallback: 0, min: 0 });
    const size = f["replace-size"] === undefined
      ? data.size
      : intFlag("replace-size", f["replace-size"], { fallback: 0, min: 1, max: 50_000_000 });
    const next = await loadKeys({ names: f.names, synthetic: size, seed: seed + 1000 });
    setTimeout(() => {
      data.replace(next);
      console.log(`replaced the database: ${data.size} documents, update_seq ${data.updateSeq}`);
    }, after * 1000);
  }
  timeline(f, { data, feed, reg });
  // The document host first: whoever waits for `listening on` has read it by then.
  if (reg.docsUrl) console.log(`documents on ${reg.docsUrl}`);
  console.log(`listening on ${reg.url}`);
  console.log(`${data.size} documents, update_seq ${data.updateSeq}`);
  await new Promise(() => {}); // serve until killed
});
