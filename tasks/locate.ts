/**
 * `deno task locate --source URL (--rank R | --percentile P | --key K) [--json]`: the key at a rank
 * or percentile, exactly, with the listing requests it took; or a key's rank and percentile.
 * Several ranks or percentiles (comma-separated) share their probes.
 */
import { UsageError } from "../lib/base/errors.ts";
import { helpText, intFlag, parseFlags, runMain, urlFlag, viewFlag } from "../lib/cli/flags.ts";
import { compareJson, decodeViewRow, encodeViewRow, type Json } from "../lib/plan/view/mod.ts";
import { locateKeys, locateRanks, parseRankQuery, SEARCH_PAGE } from "../lib/plan/locate.ts";
import { HEADER_FLAG, VIEW_FLAG } from "../lib/cli/spec_flags.ts";
import { parseHeader } from "../lib/sources/http/mod.ts";
import { openSourceRef } from "../lib/sources/open_source.ts";
import type { Source } from "../lib/plan/source.ts";

const FLAGS = {
  source: {
    type: "string",
    value: "URL",
    help: "database URL of the registry, or sqlite:FILE#table (required)",
  },
  rank: { type: "string", value: "R[,R...]", help: "the key with exactly R keys before it" },
  percentile: {
    type: "string",
    value: "P[,P...]",
    help: "the key at rank floor(P/100 x total), P from 0 to 100 (50 = the median)",
  },
  key: { type: "string", value: "K", help: "where K sits: its rank, percentile, and if present" },
  json: { type: "boolean", help: "print one JSON object" },
  "max-page": {
    type: "string",
    value: "L",
    help: "rows per listing request",
    default: String(SEARCH_PAGE),
  },
  view: VIEW_FLAG,
  header: HEADER_FLAG,
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task locate --source URL (--rank R | --percentile P | --key K)",
  summary: "Finds the exact key at a rank or percentile of a registry, or a key's rank.",
  examples: [
    "deno task locate --source http://127.0.0.1:5984/registry --percentile 50",
    "deno task locate --source http://127.0.0.1:5984/registry --percentile 1,25,50,75,99 --json",
    "deno task locate --source http://127.0.0.1:5984/registry --key react",
  ],
};

function jsonFlag(raw: string): Json {
  try {
    return JSON.parse(raw);
  } catch {
    throw new UsageError(`--key over a view is JSON (e.g. '"react"' or '["a", 3]'), got ${raw}`);
  }
}

/** Where `--key` sits. Over a view the key is JSON; its rank is that of its first row. */
async function locateKey(source: Source, raw: string, view: string | undefined) {
  if (view === undefined) return (await locateKeys(source, [raw]))[0];
  const key = jsonFlag(raw);
  const [found] = await locateKeys(source, [encodeViewRow({ key, docid: "" })]);
  const next = found.next === null ? null : decodeViewRow(found.next);
  return { ...found, key, next, present: next !== null && compareJson(next.key, key) === 0 };
}

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  if (f.source === undefined) throw new UsageError("--source URL is required");
  const asked = [f.rank, f.percentile, f.key].filter((v) => v !== undefined).length;
  if (asked !== 1) throw new UsageError("give exactly one of --rank, --percentile or --key");
  const view = viewFlag(f.view);
  const source = openSourceRef(urlFlag("source", f.source), {
    view,
    headers: (f.header ?? []).map(parseHeader),
    maxPage: intFlag("max-page", f["max-page"], { fallback: SEARCH_PAGE, min: 2, max: 10_000 }),
  });
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  if (f.key !== undefined) {
    const place = await locateKey(source, f.key, view);
    if (f.json) console.log(JSON.stringify({ ...place, requests: source.requests, ms: ms() }));
    else {
      console.log(
        `${JSON.stringify(place.key)} ${place.present ? "is" : "would be"} at rank ${place.rank} ` +
          `of ${place.total} (percentile ${place.percentile.toFixed(4)}), ` +
          `${source.requests} requests`,
      );
    }
    return 0;
  }
  const kind = f.rank !== undefined ? "rank" : "percentile";
  const found = await locateRanks(source, parseRankQuery(kind, f[kind]!, { name: `--${kind}` }));
  // Over a view, keys found print as {key, docid}.
  const rows = found.located.map((r) => ({
    ...r,
    key: view === undefined ? r.key : decodeViewRow(r.key),
  }));
  const { total, requests, method } = found;
  if (f.json) {
    console.log(JSON.stringify({ total, located: rows, requests, method, ms: ms() }));
    return 0;
  }
  for (const r of rows) {
    const p = "percentile" in r ? `percentile ${r.percentile}  ` : "";
    console.log(`${p}rank ${r.rank}  ${JSON.stringify(r.key)}`);
  }
  console.log(`${total} keys; ${requests} listing requests (method ${method}) in ${ms()} ms`);
});
