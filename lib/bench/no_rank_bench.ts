/**
 * A registry that gives no rank (`offset` absent from its listings, `skip` refused: npm's replica
 * should its `offset` go), names with npm's skew 50 ms away: rankcrawl's crawl and export, cut by
 * the prior of npm's names (`plan/npm_prior.ts`), against one sequential pager (what a user would
 * write) and against rankcrawl cutting by one listing pass first (what it did before the prior),
 * and with `offset` served, in rounds side by side.
 *
 * @module
 */
import { sequentialPager } from "./peers.ts";
import {
  crawlThenExport,
  median,
  n,
  pairedRatio,
  registry,
  rounds,
  s,
  table,
  timeIt,
  x,
} from "./harness.ts";

/** Prints the table: the pager, rankcrawl without ranks, and rankcrawl with ranks. */
export async function benchNoRank(o: { size: number; runs: number; log: (s: string) => void }) {
  const dir = await Deno.makeTempDir();
  const base = ["--synthetic", String(o.size), "--latency-ms", "50", "--npm-replica"];
  const noRank = await registry([...base, "--offset", "absent"]);
  const ranked = await registry(base);
  try {
    let round = 0;
    const crawlAndExport = async (url: string, side: string) => {
      const kv = `${dir}/${side}-${round}.kv`;
      const { crawl, exported } = await crawlThenExport(url, {
        kv,
        out: `${dir}/${side}.ndjson`,
        items: o.size,
      });
      if (!/checked: (exact|total)/.test(crawl.stdout)) {
        throw new Error(`crawl of ${side} did not end proven: ${crawl.stdout.slice(-500)}`);
      }
      await Deno.remove(kv).catch(() => {});
      return crawl.ms + exported.ms;
    };
    // Each round times every side back to back: ratios are taken within rounds.
    const t = await rounds(o.runs, {
      pager: () =>
        timeIt(() => sequentialPager(noRank.url, `${dir}/seq.ndjson`, { limit: 10_000 })),
      prior: () => crawlAndExport(noRank.url, "prior"),
      ranked: async () => {
        const ms = await crawlAndExport(ranked.url, "ranked");
        round++;
        return ms;
      },
    });
    o.log(
      `\n## No rank oracle: ${
        n(o.size)
      } names with npm's skew 50 ms away, npm-replica profile, \`offset\` absent (medians of ${o.runs} rounds; each ratio taken within a round)\n`,
    );
    o.log(table(["what", "seconds", "/ sequential pager"], [
      ["sequential pager, limit 10,000 (no rank needed)", s(median(t.pager)), ""],
      [
        "rankcrawl crawl + export, no rank: cut by the prior of npm's names (16 shards)",
        s(median(t.prior)),
        x(pairedRatio(t.prior, t.pager)),
      ],
      [
        "rankcrawl crawl + export, `offset` served: cut by ranks (16 shards)",
        s(median(t.ranked)),
        x(pairedRatio(t.ranked, t.pager)),
      ],
    ]));
  } finally {
    await noRank.close();
    await ranked.close();
    await Deno.remove(dir, { recursive: true });
  }
}
