/**
 * What a crawl will cost, said before it starts (`lib/cli/estimate.ts`): requests from the plan's
 * count and the crawl's page size, time at the `--rate` cap or at the pace the sampled documents
 * came, bytes from their sizes; and `deno task crawl --estimate` saying it before its progress.
 */
import assert from "node:assert/strict";
import { buildSpec } from "../../lib/base/spec.ts";
import {
  bytesText,
  estimateCrawl,
  estimateLine,
  fieldsNoneHas,
  sampleDocs,
} from "../../lib/cli/estimate.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { dataOf, runTask, wrapSource } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";

Deno.test("estimate: requests, time at the cap or the sampled pace, and bytes, in one line", async () => {
  const ids = Array.from({ length: 20 }, (_, i) => `p${String(i).padStart(2, "0")}`);
  const inner = new MemorySource(dataOf(ids));
  const doc = JSON.stringify({ pad: "x".repeat(2_000) }); // about 2 KiB each
  const source = wrapSource(inner, {
    doc: async (id) => {
      await new Promise((r) => setTimeout(r, 20));
      return id === "p03"
        ? { kind: "error", status: 404, reason: "x" }
        : { kind: "doc", json: doc };
    },
  });
  const spec = buildSpec({ source: "http://127.0.0.1:1/db", shards: 4, docs: true });
  const input = {
    spec,
    total: 1_000_000,
    ratePerSecond: 100,
    inFlight: 64,
    rowsPerPage: 200,
  };
  const samples = await sampleDocs(source, ids.slice(0, 5));
  const capped = estimateCrawl(input, samples);
  assert.equal(capped.listingRequests, 5_000 + 4);
  assert.equal(capped.docRequests, 1_000_000);
  assert.equal(capped.sample.count, 4, "the document that failed is left out");
  assert.equal(capped.sample.meanBytes, doc.length);
  assert.equal(capped.paceFrom, "rate");
  assert.equal(capped.seconds, (1_005_004) / 100);
  assert.equal(capped.bytes, 1_000_000 * (120 + doc.length));
  assert.match(
    estimateLine(capped, { inFlight: 64 }),
    /^estimate: 1,000,000 items: 5,004 listing and 1,000,000 document requests; about 2h47m at about 100 requests\/s \(--rate; at most: a slower host takes longer\); documents about 2\.0 KiB each \(4 sampled\): about 2\.0 GiB to store$/,
  );
  const sampled = estimateCrawl({ ...input, ratePerSecond: null }, samples);
  assert.equal(sampled.paceFrom, "sampled");
  assert.ok(sampled.perSecond! > 0 && sampled.perSecond! <= 64 / 0.02, `${sampled.perSecond}/s`);
  const keysOnly = estimateCrawl(
    { ...input, spec: { ...spec, docs: false }, ratePerSecond: null },
    [],
  );
  assert.equal(
    estimateLine(keysOnly, { inFlight: 4 }),
    "estimate: 1,000,000 items: 5,004 listing requests: about 114 MiB to store",
  );
  assert.deepEqual([bytesText(512), bytesText(1536), bytesText(5 * 2 ** 40)], [
    "512 bytes",
    "1.5 KiB",
    "5.0 TiB",
  ]);
});

Deno.test("estimate: a --doc-fields name that none of 5 or more sampled documents has is found; fewer tell nothing", () => {
  const doc = (json: object) => ({
    id: "x",
    doc: { kind: "doc" as const, json: JSON.stringify(json) },
    ms: 1,
  });
  const five = Array.from(
    { length: 5 },
    (_, i) => doc({ _id: `x${i}`, name: `x${i}`, ...(i === 2 ? { versions: {} } : {}) }),
  );
  assert.deepEqual(fieldsNoneHas(five, ["name", "versions", "nme"]), ["nme"]);
  assert.deepEqual(fieldsNoneHas(five.slice(0, 4), ["nme"]), [], "4 documents tell nothing");
  const failed = { id: "y", doc: null, ms: 1 };
  assert.deepEqual(fieldsNoneHas([...five.slice(0, 4), failed], ["nme"]), []);
});

Deno.test("estimate: `deno task crawl --estimate` says it after the plan, before the crawl's end; --npm with --source is refused", async () => {
  const data = new RegistryData(await realNames(3_000));
  const reg = await startRegistry(data, { includeDocs: false, bulkGet: false });
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--docs", "--shards", "4", "--estimate"],
    ]);
    assert.equal(run.code, 0, run.stderr);
    const lines = run.stderr.split("\n");
    const at = lines.findIndex((l) => l.startsWith("estimate: 3,000 items: "));
    assert.ok(at > lines.findIndex((l) => l.startsWith("planned ")), run.stderr);
    assert.match(
      lines[at],
      /3,000 document requests; about \S+ at about [\d,]+ requests\/s \(\d+ in flight, [\d,]+ ms each as sampled\); documents about .* each \(3 sampled\): about .* to store$/,
    );
    // A misspelt field: said before the crawl's end, which goes on.
    const typo = await runTask("crawl", [
      ...["--source", reg.url, "--kv", `${dir}/t.kv`, "--docs", "--shards", "8"],
      ...["--doc-fields", "nme,versions"],
    ]);
    assert.equal(typo.code, 0, typo.stderr);
    assert.match(
      typo.stderr,
      /^--doc-fields: none of the 7 documents sampled has "nme"; check the names \(the crawl keeps only _id and _rev of a document without them\)$/m,
    );
    const both = await runTask("crawl", ["--npm", "--source", reg.url, "--kv", `${dir}/d.kv`]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /^error: --npm is npm's replica: give --npm or --source, not both$/m);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
