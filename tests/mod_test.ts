/**
 * The library entry point, used the way another project would: only `mod.ts` is imported. A rank
 * oracle written here in a few lines (a sorted table with a counting query, as an SQL table with an
 * index would answer) is planned and searched like a CouchDB listing.
 */
import assert from "node:assert/strict";
import {
  compareKeys,
  InputError,
  keysAtRanks,
  type Listing,
  type ListOptions,
  locateKeys,
  MemorySource,
  type Page,
  percentileRank,
  planShards,
  sortKeys,
} from "../mod.ts";

/** `select key from t where key >= $start order by key limit $n`, `select count(*) ... < $start`. */
class TableListing implements Listing {
  readonly description = "table";
  readonly capabilities = { skip: false, maxPage: 50 };
  requests = 0;
  constructor(private readonly sorted: string[]) {}
  list(o: ListOptions): Promise<Page> {
    this.requests++;
    const below = (k: string) => this.sorted.filter((x) => compareKeys(x, k) < 0).length;
    let rows = o.descending
      ? [...this.sorted].reverse().filter((k) => o.start == null || compareKeys(k, o.start) <= 0)
      : this.sorted.filter((k) => o.start == null || compareKeys(k, o.start) >= 0);
    if (o.end != null) {
      rows = rows.filter((k) =>
        o.descending ? compareKeys(k, o.end!) > 0 : compareKeys(k, o.end!) < 0
      );
    }
    const offset = o.descending
      ? this.sorted.length - (o.start == null ? this.sorted.length : below(o.start) + 1)
      : o.start == null
      ? 0
      : below(o.start);
    return Promise.resolve({
      offset,
      total: this.sorted.length,
      rows: rows.slice(0, o.limit).map((id) => ({ id, rev: "" })),
    });
  }
}

const words = Array.from({ length: 4001 }, (_, i) => `w${(i * 7919) % 100_000}`);

Deno.test("mod: a rank oracle written in a few lines is planned into exactly equal shards", async () => {
  const sorted = sortKeys([...new Set(words)]);
  const table = new TableListing(sorted);
  const plan = await planShards(table, 7);
  assert.equal(plan.total, 4001);
  assert.equal(plan.method, "rank");
  assert.deepEqual(plan.shards.map((s) => s.items), [571, 572, 571, 572, 571, 572, 572]);
  plan.shards.forEach((s, i) => {
    assert.equal(s.start, i === 0 ? null : sorted[Math.floor((i * 4001) / 7)]);
  });
  const { keys } = await keysAtRanks(table, (total) => [percentileRank(50, total)]);
  assert.equal(keys[0], sorted[2000], "the exact median");
  const [place] = await locateKeys(table, [sorted[1234]]);
  assert.deepEqual([place.rank, place.present], [1234, true]);
});

Deno.test("mod: the in-memory source plans the same keys; bad input is an InputError", async () => {
  const memory = MemorySource.fromKeys(words, { maxPage: 50 });
  const a = await planShards(memory, 7);
  const b = await planShards(new TableListing(sortKeys([...new Set(words)])), 7);
  assert.deepEqual(a.shards, b.shards);
  await assert.rejects(() => planShards(memory, 0), InputError);
  await assert.rejects(() => planShards(memory, 5000), /more shards than items/);
});
