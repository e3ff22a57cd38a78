/**
 * Registries that misbehave the way real ones and proxies do. Every crawl here must end either
 * `done` with every item exactly once (and exactly the bad documents carrying an error), or failed
 * with one line saying why; never "done" with items missing, never retrying forever.
 */
import assert from "node:assert/strict";
import { buildSpec } from "../../lib/base/spec.ts";
import { runLocalCrawl } from "../../lib/cli/local_crawl.ts";
import { iterateItems } from "../../lib/engine/items/item_read.ts";
import { listCrawls } from "../../lib/engine/store/mod.ts";
import { sortKeys } from "../../lib/plan/keys.ts";
import { bundledNames, collidingIds, syntheticNames } from "../../lib/sim/names.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { badKindOf, type HostileOptions } from "../../lib/sim/registry/registry_hostile.ts";
import { type RegistryOptions, startRegistry } from "../../lib/sim/registry/registry_server.ts";
import type { CouchSourceOptions } from "../../lib/sources/couch/couch_source.ts";
import { assertCrawledExactly } from "../helpers.ts";
import { JumpingClock } from "../fake_clock.ts";

/** Crawls a registry over `keys` served with `options` into a temp KV; returns what it stored. */
async function crawl(
  keys: string[],
  options: RegistryOptions,
  run: { docs?: boolean; shards?: number; rebalance?: boolean; source?: CouchSourceOptions } = {},
) {
  const data = new RegistryData(keys);
  const reg = await startRegistry(data, options);
  const dir = await Deno.makeTempDir();
  try {
    const res = await runLocalCrawl({
      kvPath: `${dir}/c.kv`,
      spec: buildSpec({
        source: reg.url,
        shards: run.shards ?? 4,
        docs: run.docs,
        rebalance: run.rebalance,
      }),
      sourceUrl: reg.url,
      sourceOptions: { clock: new JumpingClock(), ...run.source },
    });
    using kv = await Deno.openKv(`${dir}/c.kv`);
    const [record] = await listCrawls(kv);
    await assertCrawledExactly(kv, record.id, data.keys);
    const items = new Map<string, { doc?: string; error?: { status: number; reason: string } }>();
    for await (const it of iterateItems(kv, record.id)) items.set(it.id, it);
    return { res, record, items, data, stats: reg.stats };
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const names = async (n: number) => syntheticNames(await bundledNames(), n, { seed: 11 });

Deno.test("hostile: pages cut to 100 rows without a word: done only with every item", async () => {
  const { res, record } = await crawl(await names(12_000), { silentCap: 100 });
  assert.equal(res.report.status, "done");
  assert.equal(res.report.itemsStored, 12_000);
  assert.equal(record.pageCap, 100, "the cap is learned and kept for the crawl");
  assert.equal(res.report.verification?.status, "exact");
});

Deno.test("hostile: a registry answering 400 to large limits gets smaller pages", async () => {
  const { res, record } = await crawl(await names(8_000), { maxLimit: 300 });
  assert.equal(res.report.itemsStored, 8_000);
  assert.ok(record.maxPage === 10_000 && res.report.pages >= 8_000 / 300);
});

Deno.test("hostile: ids built to collide are each stored once and come back exactly", async () => {
  const keys = sortKeys([...await names(2_000), ...collidingIds()]);
  // Documents in the listing (include_docs): every one arrives with its row.
  const inline = await crawl(keys, {}, { docs: true });
  for (const id of collidingIds()) assert.equal(JSON.parse(inline.items.get(id)!.doc!)._id, id);
  // One GET per id: no id may change the request's path; "." and ".." cannot be asked for.
  const { items } = await crawl(keys, { includeDocs: false, bulkGet: false }, { docs: true });
  for (const id of collidingIds()) assert.ok(items.has(id), JSON.stringify(id.slice(0, 20)));
  const unaddressable = collidingIds().filter((i) => i === "." || i === ".." || !i.isWellFormed());
  assert.equal(unaddressable.length, 6);
  for (const id of unaddressable) {
    assert.match(items.get(id)!.error!.reason, /cannot be requested by URL/);
  }
  for (const id of collidingIds().filter((i) => !unaddressable.includes(i))) {
    assert.equal(JSON.parse(items.get(id)!.doc!)._id, id, JSON.stringify(id.slice(0, 20)));
  }
});

Deno.test("hostile: 3% of documents refused, HTML, arrays, empty: recorded, and the crawl ends", async () => {
  const hostile: HostileOptions = {
    badDocRate: 0.03,
    badDocs: ["401", "403", "410", "html", "array", "empty"],
  };
  const keys = await names(4_000);
  const { res, items } = await crawl(keys, { ...hostile, includeDocs: false, bulkGet: false }, {
    docs: true,
  });
  const expected = { "401": 401, "403": 403, "410": 410, html: 200, array: 200, empty: 200 };
  let bad = 0;
  for (const id of keys) {
    const kind = badKindOf(id, hostile) as keyof typeof expected | null;
    const it = items.get(id)!;
    if (kind === null) {
      assert.equal(it.error, undefined, `${id} is fine`);
      continue;
    }
    bad++;
    assert.equal(
      it.error?.status,
      expected[kind],
      `${id}: ${kind} gives ${JSON.stringify(it.error)}`,
    );
  }
  assert.ok(bad > 60, `${bad} bad documents`);
  assert.equal(res.report.docErrors, bad);
});

Deno.test("hostile: a document that never answers and one that never ends are bounded", async () => {
  const keys = await names(600);
  // Documents over 1 MB are too large here (32 MiB by default): a streamed 8 MB body is cut off.
  const hostile: HostileOptions = {
    badDocRate: 0.01,
    badDocs: ["slow", "huge"],
    slowDocMs: 2000,
    hugeDocBytes: 8_000_000,
  };
  const hits = new Map<string, number>();
  const counting: typeof fetch = (input, init) => {
    const url = String(input);
    hits.set(url, (hits.get(url) ?? 0) + 1);
    return fetch(input, init);
  };
  const { items } = await crawl(keys, { ...hostile, includeDocs: false, bulkGet: false }, {
    docs: true,
    rebalance: false, // a split would hand the page to a new shard with fresh attempts
    source: { fetch: counting, docTimeoutMs: 400, docMaxAttempts: 2, maxDocBytes: 1_000_000 },
  });
  for (const id of keys) {
    const kind = badKindOf(id, hostile);
    const it = items.get(id)! as { error?: { reason: string }; tooLarge?: boolean };
    if (kind === "slow") assert.match(it.error!.reason, /timed out/);
    if (kind === "huge") assert.equal(it.tooLarge, true, "recorded, not held in memory");
  }
  // Documents only: the database's own URL (its info: update_seq, the id order) is asked more.
  const docHits = [...hits].filter(([url]) => !/\/registry(\?|$)/.test(url) && !url.includes("/_"));
  const most = Math.max(...docHits.map(([, n]) => n));
  assert.ok(
    most <= 2 * 4,
    `a document was requested ${most} times (2 attempts, 3 page tries, a second round on the last)`,
  );
});

Deno.test("hostile: a document host refusing nearly everything fails the crawl fast, one line", async () => {
  const data = new RegistryData(await names(3_000));
  const reg = await startRegistry(data, {
    badDocRate: 1,
    badDocs: ["403"],
    includeDocs: false,
    bulkGet: false,
  });
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      () =>
        runLocalCrawl({
          kvPath: `${dir}/c.kv`,
          spec: buildSpec({ source: reg.url, shards: 2, docs: true }),
          sourceUrl: reg.url,
        }),
      /refuses access \(HTTP 403 for \d+ of \d+ documents\)/,
    );
    assert.ok(reg.stats.docs < 600, `${reg.stats.docs} documents asked before giving up`);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("hostile: a listing that claims 2 GB is refused before it is read, asked again, then fails", async () => {
  const data = new RegistryData(await names(1_000));
  const reg = await startRegistry(data, { hugeListing: true });
  const dir = await Deno.makeTempDir();
  // This isolate's own memory (heap and array buffers, where an answer read in would sit): the
  // process's RSS also counts the test files running beside it under --parallel.
  const held = () => Deno.memoryUsage().heapUsed + Deno.memoryUsage().external;
  const before = held();
  try {
    await assert.rejects(
      () =>
        runLocalCrawl({
          kvPath: `${dir}/c.kv`,
          spec: buildSpec({ source: reg.url, shards: 2 }),
          sourceUrl: reg.url,
        }),
      /_all_docs\?.* is over \d+ bytes \(8 attempts\)/,
    );
    assert.ok(held() - before < 200 * 1024 * 1024, "nothing like 2 GB was held");
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
