/**
 * `deno task crawls --kv PATH [--json]`: the crawls a KV file holds, one line each: id, state,
 * items stored of those planned, the registry and the options that made it (as flags: the command
 * that resumes it), and when it started and ended. PATH is a KV file or a KV Connect URL (with
 * `DENO_KV_ACCESS_TOKEN`).
 */
import { UsageError } from "../lib/base/errors.ts";
import { helpText, parseFlags, runMain } from "../lib/cli/flags.ts";
import { listingLine } from "../lib/cli/crawl_list.ts";
import { readStoredKv } from "../lib/cli/kv_file.ts";
import { listCrawlListings } from "../lib/engine/mod.ts";

const FLAGS = {
  kv: {
    type: "string",
    value: "PATH",
    help: "KV file, or KV Connect URL with DENO_KV_ACCESS_TOKEN set (required)",
  },
  json: { type: "boolean", help: "one JSON object a line, with the whole spec" },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task crawls --kv PATH",
  summary: "Lists the crawls a KV file holds: id, state, items, registry and options, age.",
  examples: [
    "deno task crawls --kv crawl.kv",
    "deno task crawls --kv crawl.kv --json | head -1",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  if (!f.kv) throw new UsageError("--kv PATH is required");
  const path = f.kv;
  return await readStoredKv(path, async (kv) => {
    const crawls = await listCrawlListings(kv);
    if (f.json) {
      for (const c of crawls) console.log(JSON.stringify(c));
    } else if (crawls.length === 0) {
      console.error(`${path} holds no crawl`);
    } else {
      const now = Date.now();
      for (const c of crawls) console.log(listingLine(c, now));
    }
    return 0;
  });
});
