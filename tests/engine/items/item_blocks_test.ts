/** Item blocks: exact round trips, values under KV's limit, relisted ranges, prefix commits. */
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import assert from "node:assert/strict";
import { ConflictError, InputError } from "../../../lib/base/errors.ts";
import { compareKeys } from "../../../lib/plan/keys.ts";
import { itemLine } from "../../../lib/cli/export.ts";
import { crawlNdjsonBlocks } from "../../../lib/engine/crawl/reads/crawl_reads.ts";
import { blockable, packBlocks } from "../../../lib/engine/items/item_blocks.ts";
import {
  blockNdjson,
  type BlockRow,
  decodeBlock,
  encodeBlock,
} from "../../../lib/engine/items/_block_codec.ts";
import {
  countItems,
  type ExportedItem,
  iterateItems,
  pageItems,
} from "../../../lib/engine/items/item_read.ts";
import {
  countItemsBetween,
  itemsBetween,
  itemsByIds,
} from "../../../lib/engine/items/item_lookup.ts";
import { writeItems } from "../../../lib/engine/items/item_store.ts";
import { MAX_VALUE_BYTES } from "../../../lib/engine/store/kv_limits.ts";
import {
  commitShard,
  type CrawlRecord,
  getCrawl,
  keys,
  listShards,
  updateCrawl,
} from "../../../lib/engine/store/mod.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { RegistryData } from "../../../lib/sim/registry/registry_data.ts";
import { begin, finishAll, RecordingDispatcher, runOne, spec } from "../../engine_helpers.ts";
import { claimShard } from "../../../lib/engine/dispatch/_shard_runner.ts";
import { splitStraggler } from "../../../lib/engine/crawl/rebalance.ts";
import { assertCrawledExactly, dataOf, exportText, randomKeys } from "../../helpers.ts";

const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "\uffff", "z"];

async function blockEntries(kv: Deno.Kv, crawl: string) {
  const out: { first: string; rows: BlockRow[] }[] = [];
  for await (const e of kv.list<Uint8Array>({ prefix: keys.blocks(crawl) })) {
    out.push({ first: e.key[2] as string, rows: decodeBlock(e.value) });
  }
  return out;
}

/** Sets every shard back to its start (and the crawl to running), as a relist does. */
async function relistEveryShard(kv: Deno.Kv, id: string): Promise<void> {
  const crawl = await getCrawl(kv, id);
  assert.ok(
    await updateCrawl(kv, crawl as Deno.KvEntry<CrawlRecord>, {
      ...crawl.value!,
      status: "running",
    }),
  );
  for (const e of await listShards(kv, id)) {
    const reset = { ...e.value, cursor: e.value.start, after: false, done: false, lease: null };
    const counts = { items: 0, docs: 0, docErrors: 0, tooLarge: 0 };
    const next = { ...reset, ...counts, verified: null, relists: 1, revisit: true };
    assert.ok(await commitShard(kv, id, e, next));
  }
}

Deno.test("blocks: rows come back exactly, and every value stays under KV's limit", () => {
  const rows: BlockRow[] = [
    { id: "plain", rev: "1-a" },
    { id: "\u0001".repeat(1000), rev: "2-b" }, // six bytes each once JSON-escaped
    { id: 'quote"back\\slash', rev: "3-c" },
    { id: "\u{1f600}中é", rev: "4-d" },
    { id: "lone\ud800", rev: "5-e" }, // never blockable, but the codec keeps it anyway
  ];
  assert.deepEqual(decodeBlock(encodeBlock(rows)), rows);
  const withDocs = rows.map((r, i) => i % 2 ? { ...r, doc: `{"n":${i},"s":"\u0000é"}` } : r);
  assert.deepEqual(decodeBlock(encodeBlock(withDocs)), withDocs, "documents byte for byte");
  assert.deepEqual(
    decodeBlock(encodeBlock(withDocs), { docs: false }),
    rows,
    "ids and revisions only",
  );
  assert.equal(blockable({ id: "lone\ud800", rev: "5-e" }), false);
  assert.equal(blockable({ id: "x".repeat(3000), rev: "1-a" }), false);
  assert.equal(blockable({ id: rows[1].id, rev: "2-b" }), true);
  const doc = (json: string) => ({ id: "d", rev: "1-a", doc: { kind: "doc", json } });
  assert.equal(blockable(doc("{}")), true);
  assert.equal(blockable(doc(`{"x":"${"y".repeat(20_000)}"}`)), false, "large documents");
  assert.equal(blockable({ id: "d", rev: "1-a", doc: { kind: "error" } }), false);
  assert.equal(blockable({ id: "d", rev: "1-a", doc: { kind: "tooLarge" } }), false);
  const escaped = Array.from({ length: 200 }, (_, i) => ({
    id: String(i).padStart(4, "0") + "\u0001".repeat(1000),
    rev: "1-x",
  }));
  const blocks = packBlocks("c", escaped);
  assert.ok(blocks.length > 1);
  const back = blocks.flatMap((b) => {
    assert.ok(b.value.length <= MAX_VALUE_BYTES, `a block of ${b.value.length} bytes`);
    const got = decodeBlock(b.value);
    assert.equal(b.key[2], got[0].id, "a block is keyed by its first id");
    assert.equal(b.rows, got.length);
    return got;
  });
  assert.deepEqual(back, escaped);
  assert.throws(() => decodeBlock(new TextEncoder().encode("[1")), RangeError);
});

Deno.test("blocks: NDJSON copied out of a block equals the lines written item by item", () => {
  const rows: BlockRow[] = [
    { id: "plain", rev: "1-a" },
    { id: 'quote"back\\slash\u0001\n', rev: "2-b" },
    { id: "\u{1f600}中é", rev: "3-c" },
    { id: "lone\ud800", rev: "4-d" },
  ];
  const lines = blockNdjson(encodeBlock(rows))!;
  assert.equal(lines.rows, rows.length);
  const expected = rows.map((r) => itemLine(r) + "\n").join("");
  assert.equal(new TextDecoder().decode(lines.bytes), expected);
  assert.equal(blockNdjson(encodeBlock([])!)!.rows, 0);
  assert.throws(() => blockNdjson(new TextEncoder().encode('[2,"a","b"')), RangeError);
  // Documents stored raw are copied out too.
  const docs = rows.map((r, i) => i === 1 ? r : { ...r, doc: `{"_id":${JSON.stringify(r.id)}}` });
  const docLines = blockNdjson(encodeBlock(docs))!;
  assert.equal(
    new TextDecoder().decode(docLines.bytes),
    docs.map((r) => itemLine(r) + "\n").join(""),
  );
  // The smallest rows grow the most (6 bytes in a block, 19 as a line).
  const tiny = Array.from({ length: 3000 }, () => ({ id: "", rev: "" }));
  const tinyLines = blockNdjson(encodeBlock(tiny))!;
  assert.equal(tinyLines.rows, 3000);
  assert.equal(new TextDecoder().decode(tinyLines.bytes), '{"id":"","rev":""}\n'.repeat(3000));
  // Layout 2's documents as JSON strings are not a block of this version.
  const layout2 = new TextEncoder().encode(JSON.stringify([3, "a", "1-a", "{}"]));
  assert.throws(() => blockNdjson(layout2), RangeError);
  assert.throws(() => decodeBlock(layout2), RangeError);
});

Deno.test("blocks: documents stored raw come back as their JSON text, whatever it holds", () => {
  const docs = [
    String.raw`{"_id":"a","s":"}]\\"}`, // a string ending in an escaped backslash, brackets in strings
    String.raw`{"_id":"b","n":[1,[2,{"x":null}]],"e":{},"a":[],"q":"\\\"\u00e9"}`,
    `{"_id":"c","u":"\u{1f600}中é","t":true,"f":-1.5e+3}`,
    `{"_id":"d","deep":${"[".repeat(50)}${"]".repeat(50)}}`,
  ];
  for (const doc of docs) JSON.parse(doc); // each is valid JSON
  const rows: BlockRow[] = docs.map((doc, i) => ({ id: `id${i}"\\`, rev: `${i}-r`, doc }));
  rows.splice(2, 0, { id: "no document", rev: "9-z" });
  const value = encodeBlock(rows);
  assert.deepEqual(decodeBlock(value), rows);
  // Written as it came: each document's bytes are in the block unescaped.
  const text = new TextDecoder().decode(value);
  for (const doc of docs) assert.ok(text.includes(doc));
  // A document that came pretty-printed is kept on one line, the same value.
  const pretty = JSON.stringify({ _id: "p", list: [1, 2], s: "a\nb" }, null, 2) + "\n";
  const [back] = decodeBlock(encodeBlock([{ id: "p", rev: "1-p", doc: pretty }]));
  assert.ok(!back.doc!.includes("\n"));
  assert.deepEqual(JSON.parse(back.doc!), JSON.parse(pretty));
  for (const cut of [value.length - 1, value.length - 2, 40, 3]) {
    assert.throws(() => decodeBlock(value.subarray(0, cut)), RangeError, `cut at ${cut}`);
  }
  assert.throws(() => decodeBlock(new TextEncoder().encode('[4,"a","1",5]')), RangeError);
});

Deno.test("blocks: a keys-only export copies blocks out, the same bytes as item by item", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(900, [...UNI, '"', "\\", "\u0007"], 35, 7));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id } = await begin(kv, source, spec({ shards: 3, maxPage: 40 }));
  await finishAll(kv, source, id);
  const raw = await crawlNdjsonBlocks(kv, id);
  assert.ok(raw, "a keys-only crawl in blocks takes the fast way out");
  const { text, lines } = await exportText(kv, id);
  assert.equal(lines, data.size);
  let expected = "";
  for await (const it of iterateItems(kv, id)) expected += itemLine(it) + "\n";
  assert.equal(text, expected);
});

Deno.test("blocks: a range listed again with pages cut elsewhere holds each row once", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, UNI, 31, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id } = await begin(kv, source, spec({ shards: 2, maxPage: 40 }));
  await finishAll(kv, source, id);
  const before = (await blockEntries(kv, id)).map((b) => b.first);
  // Every shard listed again from its start with other page cuts, as after a relist.
  source.capabilities.maxPage = 13;
  await relistEveryShard(kv, id);
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k), partition: true });
  const after = await blockEntries(kv, id);
  assert.notDeepEqual(after.map((b) => b.first), before, "the pages were cut elsewhere");
  for (const b of after) {
    assert.equal(b.rows[0].id, b.first);
    assert.ok(b.rows.length <= 11, "every block is from the second listing");
  }
});

Deno.test("blocks: a relisted shard split before it is listed again: its child clears what was there", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(800, UNI, 34, 6));
  const source = new MemorySource(data, { maxPage: 40 });
  const { id } = await begin(kv, source, spec({ shards: 2, maxPage: 40, rebalance: true }));
  await finishAll(kv, source, id);
  source.capabilities.maxPage = 23;
  await relistEveryShard(kv, id);
  // Splits are for idle workers: every shard is held by a worker (none waits unclaimed).
  for (const e of await listShards(kv, id)) {
    assert.ok(
      await claimShard(kv, id, e.value.id, { owner: "w", leaseMs: 60_000, nowMs: Date.now() }),
    );
  }
  const split = await splitStraggler(
    { clock: SYSTEM_CLOCK, kv, source, dispatcher: new RecordingDispatcher() },
    id,
    {
      minItems: 50,
    },
  );
  assert.ok(split, "a relisted shard was split");
  const child = (await listShards(kv, id)).find((e) => e.value.id === split.child)!;
  assert.equal(child.value.revisit, true);
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k), partition: true });
});

Deno.test("blocks: a crawl begun by an earlier version is refused, never resumed or read: run again", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(1200, UNI, 36, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 2, maxPage: 100 }));
  // As versions before blocks left it: no layout on the crawl, and a page's first batch of item
  // records written ahead of each shard's cursor, the commit that moves the cursor never made.
  const entry = await getCrawl(kv, id);
  const { itemLayout: _, ...legacy } = entry.value!;
  assert.ok(await updateCrawl(kv, entry as Deno.KvEntry<CrawlRecord>, legacy));
  for (const e of await listShards(kv, id)) {
    const page = await source.list({ start: e.value.start, limit: 60 });
    await writeItems(kv, id, page.rows);
  }
  const why =
    /crawl \S+ was stored by an earlier rankcrawl \(item layout 1; this version reads 3\): delete it and run the crawl again/;
  const run = await runOne(kv, source, id, 0);
  assert.equal(run.kind, "failed");
  assert.match(run.kind === "failed" ? run.error : "", why);
  const crawl = (await getCrawl(kv, id)).value!;
  assert.equal(crawl.status, "failed");
  assert.match(crawl.error ?? "", why);
  await assert.rejects(exportText(kv, id), ConflictError);
  await assert.rejects(crawlNdjsonBlocks(kv, id), why);
});

Deno.test("blocks: documents that move between blocks and records when relisted are stored once", async () => {
  using kv = await Deno.openKv(":memory:");
  const ids = randomKeys(400, UNI, 33, 6);
  // The same items served three times, with a different share of documents too big for a block.
  const passes = [0.3, 0.6, 0].map((rate, i) => ({
    data: new RegistryData([...ids].sort(compareKeys), {
      largeDocRate: rate,
      largeDocBytes: 20_000,
    }),
    maxPage: [40, 17, 29][i],
  }));
  let id = "";
  for (const [i, pass] of passes.entries()) {
    const source = new MemorySource(pass.data, { maxPage: pass.maxPage });
    if (i === 0) id = (await begin(kv, source, spec({ shards: 2, docs: true, maxPage: 40 }))).id;
    else await relistEveryShard(kv, id);
    await finishAll(kv, source, id);
    await assertCrawledExactly(kv, id, pass.data.keys, { revs: (k) => pass.data.rev(k) });
    for await (const it of iterateItems(kv, id)) {
      assert.equal(it.doc, JSON.stringify(pass.data.doc(it.id)), `the last listing's document`);
      assert.equal(it.docBytes, new TextEncoder().encode(it.doc!).length);
    }
  }
  const records = [];
  for await (const e of kv.list({ prefix: keys.items(id) })) records.push(e.key);
  assert.equal(records.length, 0, "every document is small again: all in blocks");
});

Deno.test("blocks: a page too big for one atomic op is committed in consecutive parts, each moving the cursor", async () => {
  using kv = await Deno.openKv(":memory:");
  // 700 ids of ~1,900 bytes: 1.3 MB of rows in one 1,000-row page, over KV's 819,200 per op.
  const ids = Array.from({ length: 700 }, (_, i) => "n".repeat(1890) + String(i).padStart(4, "0"));
  const data = dataOf(ids);
  const source = new MemorySource(data, { maxPage: 1000 });
  const { id } = await begin(kv, source, spec({ shards: 1, maxPage: 1000 }));
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
  const [shard] = await listShards(kv, id);
  assert.ok(shard.value.pages >= 2, `${shard.value.pages} commits`);
  assert.ok((await blockEntries(kv, id)).length > 20);
});

Deno.test("blocks: items page through records and blocks in one order; forged cursors are 400s", async () => {
  using kv = await Deno.openKv(":memory:");
  const odd = ["m\ud800", "m\udbff", "q" + "x".repeat(3000), "\ud83d"]; // records, not blocks
  const all = [...randomKeys(300, UNI, 32, 5), ...odd].sort(compareKeys);
  const data = dataOf([...new Set(all)]);
  const source = new MemorySource(data, { maxPage: 50 });
  const { id } = await begin(kv, source, spec({ shards: 3, maxPage: 50 }));
  await finishAll(kv, source, id);
  await assertCrawledExactly(kv, id, data.keys, { revs: (k) => data.rev(k) });
  const records = [];
  for await (const e of kv.list({ prefix: keys.items(id) })) records.push(e.key);
  assert.equal(records.length, odd.length, "only the rows blocks cannot hold are records");
  const streamed: string[] = [];
  for await (const it of iterateItems(kv, id)) streamed.push(it.id);
  const paged: string[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const page = await pageItems(kv, id, { limit: 7, cursor });
    paged.push(...page.items.map((it) => it.id));
    if (page.cursor === null) break;
    cursor = page.cursor;
  }
  assert.deepEqual(paged, streamed);
  assert.equal(await countItems(kv, id), data.size);
  for (const forged of ["%%%", "czpaaa", btoa('"s\\ud800"'), btoa('"zz"')]) {
    await assert.rejects(pageItems(kv, id, { limit: 5, cursor: forged }), InputError);
  }
});

Deno.test("blocks: items read by id, counted between keys and read last key first agree with the stream", async () => {
  using kv = await Deno.openKv(":memory:");
  const odd = ["m\ud800", "m\udbff", "q" + "x".repeat(3000), "\ud83d"]; // records, not blocks
  const all = [...new Set([...randomKeys(300, UNI, 33, 5), ...odd])].sort(compareKeys);
  const data = dataOf(all);
  const source = new MemorySource(data, { maxPage: 50 });
  const { id } = await begin(kv, source, spec({ shards: 3, maxPage: 50, docs: true }));
  await finishAll(kv, source, id);
  const streamed: ExportedItem[] = [];
  for await (const it of iterateItems(kv, id)) streamed.push(it);
  const ids = streamed.map((it) => it.id);
  const asked = [...ids, "no-such", "m\ud801", ids[5]]; // absent ids, and one asked twice
  const byId = await itemsByIds(kv, id, asked);
  assert.equal(byId.size, ids.length, "every stored id, and none other");
  for (const it of streamed) assert.deepEqual(byId.get(it.id), it, it.id);
  const plain = ids.filter((k) => !odd.includes(k));
  for (
    const [from, to] of [[null, null], [plain[10], plain[200]], [null, plain[7]], [
      plain[250],
      null,
    ]]
  ) {
    // Ids KV cannot hold as string keys (byte keys, first in the export) come where they sort.
    const want = [...ids].sort(compareKeys).filter((k) =>
      (from === null || compareKeys(k, from) >= 0) && (to === null || compareKeys(k, to) < 0)
    );
    const up: string[] = [];
    for await (const b of itemsBetween(kv, id, { from, to })) up.push(...b.map((it) => it.id));
    const down: string[] = [];
    for await (const b of itemsBetween(kv, id, { from, to, descending: true })) {
      down.push(...b.map((it) => it.id));
    }
    assert.deepEqual(up, want, `${from}..${to}`);
    assert.deepEqual(down, [...up].reverse(), `${from}..${to} descending`);
    assert.equal(await countItemsBetween(kv, id, { from, to }), up.length, `${from}..${to} count`);
  }
});

Deno.test("blocks: a crawl with documents is exported out of its blocks, the same bytes", async () => {
  using kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(600, [...UNI, '"', "\\"], 36, 7));
  const source = new MemorySource(data, { maxPage: 1000, docMode: "include_docs" });
  const { id } = await begin(kv, source, spec({ shards: 3, maxPage: 1000, docs: true }));
  await finishAll(kv, source, id);
  assert.ok(await crawlNdjsonBlocks(kv, id), "documents stored raw take the fast way out");
  const { text, lines } = await exportText(kv, id);
  assert.equal(lines, data.size);
  let expected = "";
  for await (const it of iterateItems(kv, id)) expected += itemLine(it) + "\n";
  assert.equal(text, expected);
  assert.equal(text.split("\n").filter((l) => l && JSON.parse(l).doc?._id).length, data.size);
  // A crawl begun by a version that stored documents as JSON strings is not read: run it again.
  const crawl = (await kv.get<CrawlRecord>(keys.crawl(id))).value!;
  await kv.set(keys.crawl(id), { ...crawl, itemLayout: 2 });
  await assert.rejects(crawlNdjsonBlocks(kv, id), /item layout 2; this version reads 3/);
  await assert.rejects(exportText(kv, id), ConflictError);
});
