/**
 * A crawl with documents is not made where its documents are not (`lib/engine/crawl/docs_check.ts`):
 * a registry that lists on one host and serves documents on another (npm's replica), crawled with
 * documents and no documents URL, ends within seconds with the URL to give, leaving no crawl in the
 * file; the same command with it crawls them, exact.
 */
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { buildSpec } from "../../../lib/base/spec.ts";
import { PermanentError } from "../../../lib/base/errors.ts";
import { checkDocsHere } from "../../../lib/engine/crawl/docs_check.ts";
import { listCrawlListings } from "../../../lib/engine/mod.ts";
import { runLocalCrawl } from "../../../lib/cli/local_crawl.ts";
import { RegistryData } from "../../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../../lib/sim/registry/registry_server.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { CouchSource } from "../../../lib/sources/couch/mod.ts";
import { dataOf, wrapSource } from "../../helpers.ts";
import { realNames } from "../../registry_timeline.ts";

Deno.test("docs check: documents served on another host, asked without --docs-url: no crawl made, the hint; with it: done, exact", async () => {
  const data = new RegistryData(await realNames(2_000));
  const reg = await startRegistry(data, {
    docsElsewhere: true,
    includeDocs: false,
    bulkGet: false,
  });
  const dir = await Deno.makeTempDir();
  try {
    const kvPath = `${dir}/c.kv`;
    const spec = buildSpec({ source: reg.url, shards: 4, docs: true });
    await assert.rejects(
      runLocalCrawl({ kvPath, spec, sourceUrl: reg.url }),
      (err: Error) =>
        err instanceof PermanentError &&
        /^documents are not at http:\/\/127\.0\.0\.1:\d+\/registry\/<id>: 3 ids listed .* each answered 404\. .*--docs-url/
          .test(err.message),
    );
    const asked = reg.stats.docs;
    assert.ok(asked <= 3, `${asked} documents asked`);
    {
      using kv = await Deno.openKv(kvPath);
      assert.deepEqual(await listCrawlListings(kv), [], "no crawl left to pick from");
    }
    const withDocs = buildSpec({ ...spec, docsUrl: reg.docsUrl! });
    const res = await runLocalCrawl({ kvPath, spec: withDocs, sourceUrl: reg.url });
    assert.equal(res.report.status, "done");
    assert.equal(res.report.documents, data.size);
    assert.equal(res.report.docErrors, 0);
    assert.equal(res.report.verification?.status, "exact");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("docs check: one document there, a listing that fails, an empty registry or no documents asked: the crawl goes on", async () => {
  const ids = ["a", "b", "c", "d"];
  const inner = new MemorySource(dataOf(ids));
  const spec = buildSpec({ source: "http://127.0.0.1:1/db", docs: true });
  const missing = { kind: "error" as const, status: 404, reason: "not_found" };
  const allMissing = wrapSource(inner, { doc: () => Promise.resolve(missing) });
  await assert.rejects(
    checkDocsHere({ source: allMissing, clock: SYSTEM_CLOCK }, spec),
    /3 ids listed \("a", "b", "c"\)/,
  );
  await checkDocsHere({ source: allMissing, clock: SYSTEM_CLOCK }, { ...spec, docs: false });
  const oneThere = wrapSource(inner, {
    doc: (id) => id === "b" ? inner.doc(id) : Promise.resolve(missing),
  });
  await checkDocsHere({ source: oneThere, clock: SYSTEM_CLOCK }, spec);
  const gone = wrapSource(inner, { list: () => Promise.reject(new Error("down")) });
  await checkDocsHere({ source: gone, clock: SYSTEM_CLOCK }, spec);
  const empty = wrapSource(new MemorySource(dataOf([])), {});
  await checkDocsHere({ source: empty, clock: SYSTEM_CLOCK }, spec);
  // A document host that never answers: the check says nothing after its time.
  const silent = wrapSource(inner, { doc: () => new Promise(() => {}) });
  await checkDocsHere({ source: silent, clock: SYSTEM_CLOCK }, spec, { timeoutMs: 50 });
  // And a source that says where its documents are is named with that host.
  const couch = new CouchSource("http://127.0.0.1:1/db", { docsUrl: "http://127.0.0.1:2/" });
  assert.equal(couch.docsUrl, "http://127.0.0.1:2");
});
