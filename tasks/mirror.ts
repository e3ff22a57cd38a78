/**
 * `deno task mirror --kv PATH [--crawl-id ID] [--port P]`: serves a crawl read-only as a CouchDB
 * database (for replicators, PouchDB, followers) and an npm registry (for `npm view`), printing
 * `mirror on <URL>` and `npm registry on <URL>`. Reads need `MIRROR_TOKEN` as a bearer token unless
 * `MIRROR_PUBLIC=1`. Ctrl-C stops it.
 */
import { UsageError } from "../lib/base/errors.ts";
import { helpText, intFlag, onInterrupt, parseFlags, runMain } from "../lib/cli/flags.ts";
import { openStoredKv } from "../lib/cli/kv_file.ts";
import { serveMirror } from "../lib/cli/mirror_serve.ts";

const FLAGS = {
  kv: { type: "string", value: "PATH", help: "KV file holding the crawl (required)" },
  "crawl-id": {
    type: "string",
    value: "ID",
    help: "which crawl, when the KV file holds several",
    default: "the only one",
  },
  port: {
    type: "string",
    value: "P",
    help: "port on 127.0.0.1 (0: any free one)",
    default: "5985",
  },
  help: { type: "boolean", short: "h", help: "show this help" },
} as const;

const HELP = {
  usage: "deno task mirror --kv PATH",
  summary: "Serves a crawl read-only as a CouchDB database and an npm registry's metadata.\n" +
    "Reads need MIRROR_TOKEN (Authorization: Bearer) unless MIRROR_PUBLIC=1.",
  examples: [
    "MIRROR_PUBLIC=1 deno task mirror --kv npm.kv",
    "npm view react --registry http://127.0.0.1:5985/npm/",
  ],
};

runMain(async () => {
  const f = parseFlags(Deno.args, FLAGS);
  if (f.help) {
    console.log(helpText(HELP, FLAGS));
    return 0;
  }
  if (!f.kv) throw new UsageError("--kv PATH is required");
  const port = intFlag("port", f.port, { fallback: 5985, min: 0, max: 65535 });
  const token = Deno.env.get("MIRROR_TOKEN") || null;
  const open = Deno.env.get("MIRROR_PUBLIC") === "1";
  if (token === null && !open) {
    throw new UsageError(
      "MIRROR_TOKEN is not set; set it (readers send it as a bearer token) or MIRROR_PUBLIC=1",
    );
  }
  const kv = await openStoredKv(f.kv);
  const mirror = await serveMirror({ kv }, {
    kvPath: f.kv,
    crawlId: f["crawl-id"] ?? null,
    hostname: "127.0.0.1",
    port,
    readToken: open ? null : token,
    log: (l) => console.error(l),
  });
  console.log(`mirror on ${mirror.dbUrl}`);
  console.log(`npm registry on ${mirror.npmUrl}`);
  await new Promise<void>((resolve) => onInterrupt(() => resolve()));
  await mirror.close();
  kv.close();
  return 0;
});
