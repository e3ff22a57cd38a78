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
  n,
  pairedRatio,
  registry,
  rounds,
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
        let backupFailed = false;
        let round = 0;
        const kvOf = (r: number) => `${dir}/docs-${latency}-${r}.kv`;
        // Each round times every side once, back to back: ratios are taken within a round.
        const t = await rounds(o.runs, {
          backup: async () => {
            if (backupFailed) return NaN;
            try {
              return await timeIt(() => couchbackupShallow(reg.url, `${dir}/backup.jsonl`));
            } catch (err) {
              backupFailed = true;
              o.log(`couchbackup could not run: ${(err as Error).message.split("\n")[0]}`);
              return NaN;
            }
          },
          pager: () =>
            timeIt(() =>
              sequentialPager(reg.url, `${dir}/pager.ndjson`, { limit: 1000, includeDocs: true })
            ),
          crawl: async () =>
            (await timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kvOf(round), "--docs"]))
              .ms,
          export: async () => {
            const e = await timeTask("tasks/export.ts", ["--kv", kvOf(round++)], {
              stdoutTo: `${dir}/o.ndjson`,
            });
            checkExported(e, o.size);
            return e.ms;
          },
        });
        const totals = t.crawl.map((c, i) => c + t.export[i]);
        rows.push(
          [at, "couchbackup --mode shallow", s(median(t.backup)), ""],
          [at, "include_docs pager, limit 1,000", s(median(t.pager)), ""],
          [
            at,
            "rankcrawl --docs (include_docs pages, 16 shards)",
            s(median(t.crawl)),
            x(pairedRatio(t.crawl, t.backup)),
          ],
          [at, "rankcrawl --docs + export", s(median(totals)), x(pairedRatio(totals, t.backup))],
          [
            at,
            "rankcrawl --docs + export / the include_docs pager",
            "",
            x(pairedRatio(totals, t.pager)),
          ],
        );
      } finally {
        await reg.close();
      }
    }
    if (o.byGet ?? true) rows.push(...await byGet(Math.min(o.size, 20_000), dir, o.runs));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  o.log(
    `\n## Documents: ${
      n(o.size)
    } documents (medians of ${o.runs} rounds; each ratio taken within a round)\n`,
  );
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
    let round = 0;
    const t = await rounds(runs, {
      fetcher: () =>
        timeIt(() =>
          concurrentFetcher(reg.url, `${dir}/get.ndjson`, { limit: 10_000, inFlight: 64 })
        ),
      crawl: async () =>
        (await timeTask("tasks/crawl.ts", [
          "--source",
          reg.url,
          "--kv",
          `${dir}/get-${round}.kv`,
          "--docs",
        ])).ms,
      export: async () => {
        const e = await timeTask("tasks/export.ts", ["--kv", `${dir}/get-${round}.kv`], {
          stdoutTo: `${dir}/g.ndjson`,
        });
        checkExported(e, per);
        return e.ms;
      },
      // What a user who raises the default (8 a shard, kept for npm's sake) gets: 256 in flight.
      // The round's last step: it moves `round` on (the steps run in this order).
      wider: async () =>
        (await timeTask("tasks/crawl.ts", [
          "--source",
          reg.url,
          "--kv",
          `${dir}/get-${round++}-16.kv`,
          "--docs",
          "--concurrency",
          "16",
        ])).ms,
    });
    const totals = t.crawl.map((c, i) => c + t.export[i]);
    const at = `20 ms away, one GET a document (${n(per)})`;
    return [
      [at, "ids by 10,000, 64 documents in flight (a script)", s(median(t.fetcher)), ""],
      [
        at,
        "rankcrawl --docs (16 shards)",
        s(median(t.crawl)),
        `${x(pairedRatio(t.crawl, t.fetcher))} of the script`,
      ],
      [
        at,
        "rankcrawl --docs + export",
        s(median(totals)),
        `${x(pairedRatio(totals, t.fetcher))} of the script`,
      ],
      [
        at,
        "rankcrawl --docs --concurrency 16 (256 in flight)",
        s(median(t.wider)),
        `${x(pairedRatio(t.wider, t.fetcher))} of the script`,
      ],
    ];
  } finally {
    await reg.close();
  }
}
