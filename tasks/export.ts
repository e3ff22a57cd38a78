/**
 * `deno task export --kv PATH [--crawl-id ID]`: a crawl's items as NDJSON on stdout, one object a
 * line with `id`, `rev` and (when fetched) `doc`; streamed with flat memory. With one crawl in the
 * KV file no id is needed.
 */
import { parseFlags, runMain } from "../lib/cli/flags.ts";
import { UsageError } from "../lib/base/errors.ts";
import { exportNdjson } from "../lib/cli/export.ts";
import { listCrawls } from "../lib/engine/store.ts";

runMain(async () => {
  const f = parseFlags(Deno.args, {
    kv: { type: "string" },
    "crawl-id": { type: "string" },
    help: { type: "boolean", short: "h" },
  });
  if (f.help) {
    console.log("usage: deno task export --kv PATH [--crawl-id ID]");
    return 0;
  }
  if (!f.kv) throw new UsageError("--kv PATH is required");
  try {
    await Deno.stat(f.kv);
  } catch {
    throw new UsageError(`no KV file at ${f.kv}`);
  }
  const kv = await Deno.openKv(f.kv);
  try {
    let id = f["crawl-id"];
    if (id === undefined) {
      const crawls = await listCrawls(kv);
      if (crawls.length === 0) throw new UsageError(`${f.kv} holds no crawl`);
      if (crawls.length > 1) {
        throw new UsageError(
          `${f.kv} holds ${crawls.length} crawls; pick one with --crawl-id (${
            crawls.map((c) => c.id).join(", ")
          })`,
        );
      }
      id = crawls[0].id;
    }
    const n = await exportNdjson(kv, id, Deno.stdout.writable);
    console.error(`exported ${n} items of crawl ${id}`);
  } finally {
    kv.close();
  }
});
