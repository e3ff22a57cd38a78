/**
 * A sink in a process of its own, for `sinks_e2e_test.ts` to kill: delivers every crawl's notes in
 * the KV file `Deno.args[0]` to an append-only NDJSON log `Deno.args[1]` (one line a batch: its
 * range, its items' ids and revisions, its deletions), every 100 ms, until killed. Run with
 * `deno run --allow-read --allow-write tests/sink_child.ts KV LOG`.
 */
import { deliver, type Sink } from "../lib/engine/mod.ts";
import { listCrawls } from "../lib/engine/store/mod.ts";

/** The NDJSON sink: a line a batch, written whole before its note counts as given. */
export function ndjsonSink(write: (line: string) => void): Sink {
  return {
    name: "ndjson-log",
    apply(b) {
      const items = b.items.map((it) => [it.id, it.rev]);
      write(JSON.stringify({ range: b.range, items, deleted: b.deleted }) + "\n");
      return Promise.resolve();
    },
  };
}

if (import.meta.main) {
  const [kvPath, logPath] = Deno.args;
  const log = await Deno.open(logPath, { append: true, create: true, write: true });
  const enc = new TextEncoder();
  const sink = ndjsonSink((line) => log.writeSync(enc.encode(line)));
  const kv = await Deno.openKv(kvPath);
  for (;;) {
    try {
      for (const crawl of await listCrawls(kv)) await deliver({ kv }, crawl.id, sink);
    } catch {
      // Locked for a moment by the crawl's process: tried again.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
