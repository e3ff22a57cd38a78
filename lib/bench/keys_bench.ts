/**
 * Keys-only crawling against the peers a user would pick: one sequential pager (limits 1,000 and
 * 10,000) and 16 even-split pagers, with the registry on loopback and 50 ms away; rankcrawl's
 * crawl, its export, and both together; KV's own write and read ceilings measured in the same run;
 * and the crawl's peak memory.
 *
 * @module
 */
import { writeItems } from "../engine/items/item_store.ts";
import { bundledNames, syntheticNames } from "../sim/names.ts";
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
import { evenSplitPagers, sequentialPager } from "./peers.ts";

/**
 * KV's ceilings on this machine now for one record per item: writes (16 writers, as a crawl) and
 * a list scan. Keys-only crawls store blocks of rows instead, so they can pass these.
 */
export async function kvCeilings(
  dir: string,
  ids: string[],
): Promise<{ write: number; list: number }> {
  const kv = await Deno.openKv(`${dir}/ceiling.kv`);
  try {
    const items = ids.map((id) => ({ id, rev: "1-0123456789abcdef0123456789abcdef" }));
    const parts = 16;
    const ms = await timeIt(() =>
      Promise.all(Array.from({ length: parts }, (_, i) =>
        writeItems(
          kv,
          "ceiling",
          items.slice(
            Math.floor((i * items.length) / parts),
            Math.floor(((i + 1) * items.length) / parts),
          ),
        )))
    );
    let count = 0;
    const listMs = await timeIt(async () => {
      for await (const _ of kv.list({ prefix: ["item", "ceiling"] }, { batchSize: 1000 })) count++;
    });
    return { write: items.length / (ms / 1000), list: count / (listMs / 1000) };
  } finally {
    kv.close();
  }
}

/**
 * Prints the keys-only table of a large registry, 50 ms away only (where a user would crawl it
 * from): the sequential pager at limit 10,000 against rankcrawl's crawl and export. Each side is
 * timed `runs` times (a pager takes 40 s at 4.5M names).
 */
export async function benchKeysLarge(o: { size: number; runs: number; log: (s: string) => void }) {
  const dir = await Deno.makeTempDir();
  const rows: (string | number)[][] = [];
  try {
    const reg = await registry(["--synthetic", String(o.size), "--latency-ms", "50"]);
    const kvOf = (r: number) => `${dir}/keys-large-${r}.kv`;
    try {
      let round = 0;
      // Each round times both sides back to back: ratios are taken within a round.
      const t = await rounds(o.runs, {
        seq: () => timeIt(() => sequentialPager(reg.url, `${dir}/seq.ndjson`, { limit: 10_000 })),
        crawl: async () =>
          (await timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kvOf(round)])).ms,
        export: async () => {
          const kv = kvOf(round++);
          const e = await timeTask("tasks/export.ts", ["--kv", kv], {
            stdoutTo: `${dir}/out.ndjson`,
          });
          checkExported(e, o.size);
          await Deno.remove(kv).catch(() => {});
          return e.ms;
        },
      });
      const totals = t.crawl.map((c, i) => c + t.export[i]);
      rows.push(
        ["sequential pager, limit 10,000", s(median(t.seq)), ""],
        [
          "rankcrawl crawl (16 shards, into KV)",
          s(median(t.crawl)),
          x(pairedRatio(t.crawl, t.seq)),
        ],
        ["rankcrawl crawl + export", s(median(totals)), x(pairedRatio(totals, t.seq))],
      );
    } finally {
      await reg.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  o.log(
    `\n## Keys only: ${
      n(o.size)
    } names of real length, 50 ms away (medians of ${o.runs} rounds; each ratio taken within a round)\n`,
  );
  o.log(table(["what", "seconds", "rankcrawl / sequential pager"], rows));
}

/** Prints the keys-only table. */
export async function benchKeys(o: { size: number; runs: number; log: (s: string) => void }) {
  const dir = await Deno.makeTempDir();
  const ids = syntheticNames(await bundledNames(), o.size, { seed: 42 });
  const rows: (string | number)[][] = [];
  let ceilings = { write: 0, list: 0 };
  let crawlRate = 0;
  let exportRate = 0;
  let peak = 0;
  try {
    for (const latency of [0, 50]) {
      const reg = await registry(["--synthetic", String(o.size), "--latency-ms", String(latency)]);
      try {
        const at = latency ? `${latency} ms away` : "loopback";
        let round = 0;
        const kvOf = (r: number) => `${dir}/keys-${latency}-${r}.kv`;
        // Each round times every side once, back to back: ratios are taken within a round.
        const t = await rounds(o.runs, {
          seq1k: () => timeIt(() => sequentialPager(reg.url, `${dir}/seq.ndjson`, { limit: 1000 })),
          seq10k: () =>
            timeIt(() => sequentialPager(reg.url, `${dir}/seq.ndjson`, { limit: 10_000 })),
          even: () => timeIt(() => evenSplitPagers(reg.url, dir, { shards: 16, limit: 10_000 })),
          crawl: async () => {
            const c = await timeTask("tasks/crawl.ts", ["--source", reg.url, "--kv", kvOf(round)]);
            peak = Math.max(peak, c.peakMiB);
            return c.ms;
          },
          export: async () => {
            const e = await timeTask("tasks/export.ts", ["--kv", kvOf(round++)], {
              stdoutTo: `${dir}/out.ndjson`,
            });
            checkExported(e, o.size);
            return e.ms;
          },
        });
        const crawl = median(t.crawl);
        const exp = median(t.export);
        const seq1k = median(t.seq1k);
        const seq10k = median(t.seq10k);
        const even = median(t.even);
        // Each round's best sequential pager, against that round's crawl.
        const best = t.seq1k.map((a, i) => Math.min(a, t.seq10k[i]));
        const totals = t.crawl.map((c, i) => c + t.export[i]);
        if (latency === 0) {
          crawlRate = o.size / (crawl / 1000);
          exportRate = o.size / (exp / 1000);
        }
        rows.push(
          [at, "sequential pager, limit 1,000", s(seq1k), ""],
          [at, "sequential pager, limit 10,000", s(seq10k), ""],
          [at, "16 even-split pagers, limit 10,000", s(even), ""],
          [at, "rankcrawl crawl (16 shards, into KV)", s(crawl), x(pairedRatio(t.crawl, best))],
          [at, "rankcrawl export (KV to NDJSON)", s(exp), ""],
          [at, "rankcrawl crawl + export", s(median(totals)), x(pairedRatio(totals, best))],
        );
      } finally {
        await reg.close();
      }
    }
    ceilings = await kvCeilings(dir, ids);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  o.log(
    `\n## Keys only: ${
      n(o.size)
    } names of real length (medians of ${o.runs} rounds; each ratio taken within a round)\n`,
  );
  o.log(table(["registry", "what", "seconds", "rankcrawl / best sequential pager"], rows));
  o.log("");
  o.log(table(["KV on this machine, same run", "items/s", "rankcrawl's share"], [
    [
      "one record per item, 16 writers (the layout before blocks)",
      n(ceilings.write),
      `crawl ${x(crawlRate / ceilings.write)}`,
    ],
    ["one record per item, list scan", n(ceilings.list), `export ${x(exportRate / ceilings.list)}`],
  ]));
  o.log(
    `\ncrawl peak memory: ${peak} MiB; crawl ${n(crawlRate)} items/s, export ${
      n(exportRate)
    } items/s (loopback)`,
  );
}
