/**
 * `deno task export --kv PATH [--crawl-id ID]`: a crawl's items as NDJSON on stdout, one object a
 * line with `id`, `rev` and (when fetched) `doc`; streamed with flat memory. With one crawl in the
 * KV store no id is needed. PATH is a KV file or a KV Connect URL (denokv, Deploy's KV), opened with
 * the token in `DENO_KV_ACCESS_TOKEN`; the task may read that variable and reach the network, and
 * nothing else of the environment.
 */
import { UsageError } from "../lib/base/errors.ts";
import { helpText, parseFlags, runMain } from "../lib/cli/flags.ts";
import { exportNdjson } from "../lib/cli/export.ts";
import { readStoredKv } from "../lib/cli/kv_file.ts";
import { findCrawl, listCrawlListings } from "../lib/engine/mod.ts";
import { crawlChoice } from "../lib/cli/crawl_list.ts";

const FLAGS = {
  kv: {
    type: "string",
    value: "PATH",
    help: "KV file, or KV Connect URL with DENO_KV_ACCESS_TOKEN set (required)",
  },
  "crawl-id": {
    type: "string",
    value: "ID",
    help: "which crawl, when the KV file holds several",
    default: "the only one",
  },
  partial: {
    type: "boolean",
    help: "export a crawl that is not done (running, paused, failed, cancelled): what it holds now",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task export --kv PATH",
  summary: 'Writes a crawl\'s items to stdout as NDJSON: {"id","rev","doc"?,"error"?}.',
  examples: [
    "deno task export --kv crawl.kv > items.ndjson",
    "deno task export --kv x.kv | head",
    "deno task export --kv x.kv --partial > so-far.ndjson   # a crawl still running",
    "DENO_KV_ACCESS_TOKEN=... deno task export --kv http://kv-host:4512 > items.ndjson",
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
    let id = f["crawl-id"];
    if (id === undefined) {
      const crawls = await listCrawlListings(kv);
      if (crawls.length === 0) throw new UsageError(`${path} holds no crawl`);
      if (crawls.length > 1) {
        throw new UsageError(
          `${path} holds ${crawls.length} crawls; pick one with --crawl-id: ` +
            `${crawls.map(crawlChoice).join("; ")} (deno task crawls --kv ${path} lists them)`,
        );
      }
      id = crawls[0].id;
    }
    const crawl = await findCrawl(kv, id);
    if (!crawl) throw new UsageError(`no crawl with id ${id} in ${path}`);
    if (crawl.status !== "done" && !f.partial) {
      throw new UsageError(
        `crawl ${id} is ${crawl.status}, not done: its items are incomplete (use --partial to ` +
          `export what it holds now)`,
      );
    }
    try {
      const n = await exportNdjson(kv, id, Deno.stdout.writable);
      console.error(`exported ${n} items of crawl ${id} (${crawl.status}, ${crawl.total} planned)`);
    } catch (err) {
      // `export | head` closes the pipe early: the reader has what it wanted, not an error.
      if (err instanceof Deno.errors.BrokenPipe) return 0;
      throw err;
    }
    return 0;
  });
});
