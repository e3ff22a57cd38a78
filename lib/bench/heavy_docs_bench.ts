/**
 * Documents of real sizes from a host with a rate limit: an npm-replica registry whose document
 * sizes have a heavy tail (most a few KB, 1% of 1-3 MB, 0.1% of 10-12 MB) and whose document host
 * answers 429 beyond 200 requests a second. rankcrawl with no `--rate` (its pace learned from the
 * 429s) and with `--rate 150`, beside the concurrent fetcher a user would write (64 in flight, a 429
 * asked again after its `Retry-After` or 1 s): documents a second, 429s received, peak RSS of the
 * process tree, KV bytes per item.
 *
 * @module
 */
import { mapPool } from "../base/pool.ts";
import { CouchSource } from "../sources/couch/mod.ts";
import { n, registry, s, table, timeTask, x } from "./harness.ts";
import { pageThrough } from "./peers.ts";

/** The concurrent fetcher with retries on 429: the documents written and the 429s it got. */
async function politeFetcher(
  dbUrl: string,
  docsUrl: string,
  o: { inFlight: number; out: string },
): Promise<{ docs: number; tooMany: number }> {
  const src = new CouchSource(dbUrl, { maxPage: 1000 });
  const file = await Deno.open(o.out, { write: true, create: true, truncate: true });
  const enc = new TextEncoder();
  let tooMany = 0;
  const docs = await pageThrough(src, { start: null, end: null }, async (rows) => {
    const got = await mapPool(rows, async (r) => {
      for (;;) {
        const res = await fetch(`${docsUrl}/${encodeURIComponent(r.id)}`);
        if (res.status !== 429) return (await res.text()).trim();
        await res.body?.cancel();
        tooMany++;
        const wait = Number(res.headers.get("retry-after") ?? "1") * 1000;
        await new Promise((go) => setTimeout(go, wait));
      }
    }, { concurrency: o.inFlight });
    await file.write(enc.encode(got.map((d) => d + "\n").join("")));
  }, { limit: 1000 });
  file.close();
  return { docs, tooMany };
}

/** Bytes of a KV file and its write-ahead log. */
async function kvBytes(path: string): Promise<number> {
  let total = 0;
  for (const f of [path, `${path}-wal`]) total += (await Deno.stat(f).catch(() => null))?.size ?? 0;
  return total;
}

/** Prints the heavy-tail table. */
export async function benchHeavyDocs(o: { size: number; log: (s: string) => void }) {
  const reg = await registry([
    ...["--synthetic", String(o.size), "--npm-replica", "--docs-elsewhere", "--heavy-tail"],
    ...["--rate-limit", "200", "--doc-latency-ms", "5"],
  ]);
  const dir = await Deno.makeTempDir();
  try {
    const docsUrl = reg.docsUrl!;
    const rows: (string | number)[][] = [];
    const runs: { label: string; args: string[] }[] = [
      { label: "rankcrawl, no --rate (pace learned from 429s)", args: [] },
      { label: "rankcrawl --rate 150", args: ["--rate", "150"] },
    ];
    let first = NaN;
    for (const r of runs) {
      const kv = `${dir}/${r.args.length ? "rate" : "learned"}.kv`;
      const t = await timeTask("tasks/crawl.ts", [
        ...["--source", reg.url, "--docs-url", docsUrl, "--docs", "--kv", kv, ...r.args],
      ]);
      // The summary's pace line (the last: progress lines before it say the same, earlier).
      const pace = t.stdout.split("\n").filter((l) => l.startsWith("  pace: ")).at(-1) ?? "";
      const pushed = [...pace.matchAll(/([\d,]+) pushed back of ([\d,]+)/g)]
        .map((m) => [Number(m[1].replace(/,/g, "")), Number(m[2].replace(/,/g, ""))]);
      const tooMany = pushed.reduce((a, p) => a + p[0], 0);
      const requests = pushed.reduce((a, p) => a + p[1], 0);
      first = Number.isNaN(first) ? t.ms : first;
      rows.push([
        r.label,
        s(t.ms),
        n(o.size / (t.ms / 1000)),
        requests ? `${n(tooMany)} (${((100 * tooMany) / requests).toFixed(1)}%)` : "0",
        t.peakMiB,
        n((await kvBytes(kv)) / o.size),
        x(t.ms / first),
      ]);
    }
    const started = performance.now();
    const peer = await politeFetcher(reg.url, docsUrl, { inFlight: 64, out: `${dir}/peer.ndjson` });
    const ms = performance.now() - started;
    rows.push([
      "concurrent fetcher, 64 in flight, 429 asked again after Retry-After or 1 s",
      s(ms),
      n(peer.docs / (ms / 1000)),
      n(peer.tooMany),
      "(in the bench process)",
      n((await Deno.stat(`${dir}/peer.ndjson`)).size / peer.docs) + " (NDJSON)",
      x(ms / first),
    ]);
    o.log(
      `\n## Documents of real sizes from a host limiting to 200 requests a second: ${n(o.size)} ` +
        "documents (most a few KB, 1% of 1-3 MB, 0.1% of 10-12 MB), one GET each\n",
    );
    o.log(table(
      ["crawl", "seconds", "docs/s", "429s received", "peak RSS MiB", "bytes per item", "ratio"],
      rows,
    ));
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}
