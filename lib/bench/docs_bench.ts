/**
 * Crawling with documents against `@cloudant/couchbackup --mode shallow` and a plain
 * `include_docs` pager, with the registry on loopback and 20 ms away; and one GET per document
 * (the npm replica's case) against the same registry refusing bulk reads.
 *
 * @module
 */
import {
  checkExported,
  median,
  medianOf,
  n,
  registry,
  s,
  table,
  timeIt,
  timeTask,
  x,
} from "./harness.ts";
import { concurrentFetcher, couchbackupShallow, sequentialPager } from "./peers.ts";

/** Prints the documents table. */
export async function benchDocs(
  o: { size: number; runs: number; log: (s: string) => void; byGet?: boolean },
) {
  const dir = await Deno.makeTempDir();
  const rows: (string | number)[][] = [];
  try {
    for (const latency of [0, 20]) {
      const reg = await registry(["--synthetic", String(o.size), "--latency-ms", String(latency)]);
      try {
        const at = latency ? `${latency} ms away` : "loopback";
        let backup = NaN;
        try {
          backup = await medianOf(
            o.runs,
            () => timeIt(() => couchbackupShallow(reg.url, `${dir}/backup.jsonl`)),
          );
        } catch (err) {
          o.log(`couchbackup could not run: ${(err as Error).message.split("\n")[0]}`);
        }
        const pager = await medianOf(
          o.runs,
          () =>
            timeIt(() =>
              sequentialPager(reg.url, `${dir}/pager.ndjson`, { limit: 1000, includeDocs: true })
            ),
        );
        const crawls: number[] = [];
        const totals: number[] = [];
        for (let r = 0; r < o.runs; r++) {
          const kv = `${dir}/docs-${latency}-${r}.kv`;
          const c = await timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kv, "--docs"]);
          const e = await timeTask("tasks/export.ts", ["--kv", kv], {
            stdoutTo: `${dir}/o.ndjson`,
          });
          checkExported(e, o.size);
          crawls.push(c.ms);
          totals.push(c.ms + e.ms);
        }
        const crawl = median(crawls);
        const total = median(totals);
        rows.push(
          [at, "couchbackup --mode shallow", s(backup), ""],
          [at, "include_docs pager, limit 1,000", s(pager), ""],
          [at, "rankcrawl --docs (include_docs pages, 16 shards)", s(crawl), x(crawl / backup)],
          [at, "rankcrawl --docs + export", s(total), x(total / backup)],
          [at, "rankcrawl --docs + export / the include_docs pager", "", x(total / pager)],
        );
      } finally {
        await reg.close();
      }
    }
    if (o.byGet ?? true) rows.push(...await byGet(Math.min(o.size, 20_000), dir, o.runs));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  o.log(`\n## Documents: ${n(o.size)} documents (median of ${o.runs})\n`);
  o.log(
    table(["registry", "what", "seconds", "rankcrawl / peer (couchbackup unless named)"], rows),
  );
}

/**
 * The npm replica's case, 20 ms away: no bulk reads, one GET per document; rankcrawl against a
 * script that pages the ids and keeps 64 document requests in flight. Rows of the table.
 */
async function byGet(per: number, dir: string, runs: number): Promise<(string | number)[][]> {
  const reg = await registry([
    "--synthetic",
    String(per),
    "--latency-ms",
    "20",
    "--no-include-docs",
    "--no-bulk-get",
  ]);
  try {
    const fetcher = await medianOf(
      runs,
      () =>
        timeIt(() =>
          concurrentFetcher(reg.url, `${dir}/get.ndjson`, { limit: 10_000, inFlight: 64 })
        ),
    );
    const crawls: number[] = [];
    const totals: number[] = [];
    for (let r = 0; r < runs; r++) {
      const kv = `${dir}/get-${r}.kv`;
      const c = await timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kv, "--docs"]);
      const e = await timeTask("tasks/export.ts", ["--kv", kv], { stdoutTo: `${dir}/g.ndjson` });
      checkExported(e, per);
      crawls.push(c.ms);
      totals.push(c.ms + e.ms);
    }
    const at = `20 ms away, one GET a document (${n(per)})`;
    return [
      [at, "ids by 10,000, 64 documents in flight (a script)", s(fetcher), ""],
      [
        at,
        "rankcrawl --docs (16 shards)",
        s(median(crawls)),
        `${x(median(crawls) / fetcher)} of the script`,
      ],
      [
        at,
        "rankcrawl --docs + export",
        s(median(totals)),
        `${x(median(totals) / fetcher)} of the script`,
      ],
    ];
  } finally {
    await reg.close();
  }
}
