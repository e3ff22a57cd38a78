/**
 * What npm's replica's missing features cost: the same names served 50 ms away by a full
 * CouchDB-style registry and by the npm-replica profile (GET only, `update_seq` on listings
 * refused, no `pending`), crawled keys only and exported, timed in rounds side by side.
 *
 * @module
 */
import { crawlThenExport, median, pairedRatio, registry, rounds, s, table, x } from "./harness.ts";

/** Prints the table: crawl, export and both for each registry, and the replica's ratio. */
export async function benchReplica(o: { size: number; runs: number; log: (s: string) => void }) {
  const dir = await Deno.makeTempDir();
  const base = ["--synthetic", String(o.size), "--latency-ms", "50"];
  const couch = await registry(base);
  const npm = await registry([...base, "--npm-replica"]);
  try {
    let round = 0;
    const kv = (side: string) => `${dir}/${side}-${round}.kv`;
    const both = async (side: string, url: string) => {
      const { crawl, exported } = await crawlThenExport(url, {
        kv: kv(side),
        out: `${dir}/${side}.ndjson`,
        items: o.size,
      });
      times[side].push({ crawl: crawl.ms, export: exported.ms });
      return crawl.ms + exported.ms;
    };
    const times: Record<string, { crawl: number; export: number }[]> = { couch: [], npm: [] };
    // Each round times both back to back: ratios are taken within rounds.
    const t = await rounds(o.runs, {
      couch: () => both("couch", couch.url),
      npm: async () => {
        const ms = await both("npm", npm.url);
        round++;
        return ms;
      },
    });
    const row = (label: string, side: string, total: number[]) => [
      label,
      s(median(times[side].map((r) => r.crawl))),
      s(median(times[side].map((r) => r.export))),
      s(median(total)),
    ];
    o.log(
      `\n### Keys only, ${o.size.toLocaleString("en-US")} names 50 ms away: npm's replica ` +
        `beside a full CouchDB-style registry (median of ${o.runs})\n`,
    );
    o.log(table(["registry", "crawl s", "export s", "crawl + export s"], [
      row("CouchDB-style (update_seq on listings, POST, pending)", "couch", t.couch),
      row("npm-replica profile (GET only, update_seq refused, no pending)", "npm", t.npm),
    ]));
    o.log(`\nnpm replica / CouchDB-style, crawl + export: ${x(pairedRatio(t.npm, t.couch))}x`);
  } finally {
    await couch.close();
    await npm.close();
    await Deno.remove(dir, { recursive: true });
  }
}
