/**
 * The mirror app (`lib/mirror/mirror_app.ts`) through `app.request()`, on a crawl made in memory:
 * `_all_docs` (keys, bounds, skip, `offset` as the rank), `_changes` (normal, `since`, `limit`,
 * `doc_ids`, longpoll and continuous with their timeouts, a bound of open feeds), the mirror's own
 * sequence (a batch given twice adds nothing; a deletion gets a tombstone one generation past its
 * revision, which `open_revs` and `_bulk_get` answer with its parent), `_local` checkpoints, and
 * read tokens (Bearer, or Basic with the token as the password).
 */
import assert from "node:assert/strict";
import { SYSTEM_CLOCK } from "../../lib/base/clock.ts";
import { deliverAll } from "../../lib/engine/sinks/mod.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { createMirrorApp, mirrorSink } from "../../lib/mirror/mod.ts";
import { tombstoneRev } from "../../lib/mirror/mirror_sink.ts";
import { begin, finishAll, spec } from "../engine_helpers.ts";
import { dataOf, randomKeys } from "../helpers.ts";

const ASCII = "abcdefghijklmnop-".split("");

async function mirrored(n: number, o: { docs?: boolean } = {}) {
  const docs = o.docs ?? true;
  const kv = await Deno.openKv(":memory:");
  const data = dataOf(randomKeys(n, ASCII, 301, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const { id } = await begin(kv, source, spec({ shards: 3, docs }));
  await finishAll(kv, source, id);
  const sink = mirrorSink(kv);
  const level = () => deliverAll({ kv }, id, sink);
  await level();
  const app = createMirrorApp({ kv, clock: SYSTEM_CLOCK }, {
    db: (name) => Promise.resolve(name === "db" ? { crawlId: id, docs } : null),
    npmDb: () => Promise.resolve({ crawlId: id, docs }),
    readToken: "tok-123",
    uuid: "u1",
    maxStreams: 1,
  });
  const get = async (
    path: string,
    init: { method?: string; body?: string; headers?: Record<string, string> } = {},
  ) => {
    const res = await app.request(path, {
      method: init.method,
      body: init.body,
      headers: { authorization: "Bearer tok-123", ...init.headers },
    });
    return { status: res.status, body: await res.text(), headers: res.headers };
  };
  return { kv, data, id, sink, level, app, get, keys: [...data.keys] };
}

Deno.test("mirror app: tokens, the welcome, _all_docs with keys, bounds, skip and offset as the rank", async () => {
  const m = await mirrored(500);
  try {
    assert.equal((await m.app.request("/db")).status, 401);
    const basic = btoa("anyone:tok-123");
    assert.equal(
      (await m.app.request("/db", { headers: { authorization: `Basic ${basic}` } })).status,
      200,
    );
    assert.equal(JSON.parse((await m.get("/")).body).uuid, "u1");
    const info = JSON.parse((await m.get("/db/")).body);
    assert.deepEqual([info.doc_count, info.update_seq], [500, 500]);
    assert.deepEqual(info.rankcrawl, {
      crawl: m.id,
      status: "done",
      checked: "exact",
      following: false,
    });
    const k = m.keys;
    const page = JSON.parse(
      (await m.get(
        `/db/_all_docs?startkey=${encodeURIComponent(JSON.stringify(k[100]))}&limit=3&skip=2`,
      )).body,
    );
    assert.equal(page.offset, 102);
    assert.deepEqual(page.rows.map((r: { id: string }) => r.id), k.slice(102, 105));
    const bounded = JSON.parse(
      (await m.get(
        `/db/_all_docs?startkey=${JSON.stringify(k[10])}&endkey=${
          JSON.stringify(k[20])
        }&inclusive_end=false`,
      )).body,
    );
    assert.deepEqual(bounded.rows.map((r: { id: string }) => r.id), k.slice(10, 20));
    const keyed = JSON.parse(
      (await m.get("/db/_all_docs?include_docs=true", {
        method: "POST",
        body: JSON.stringify({ keys: [k[5], "no-such-id"] }),
      })).body,
    );
    assert.equal(keyed.rows[0].doc._id, k[5]);
    assert.deepEqual(keyed.rows[1], { key: "no-such-id", error: "not_found" });
    assert.equal((await m.get("/nodb")).status, 404);
  } finally {
    m.kv.close();
  }
});

Deno.test("mirror app: _all_docs answers as CouchDB does, descending too, from records and from blocks", async () => {
  for (const docs of [true, false]) {
    const m = await mirrored(700, { docs });
    try {
      const k = m.keys;
      const probes = [k[0], k[3], k[350], k[699], "a", "m", "zzzz", "", k[350] + "\0"];
      const asked: Record<string, string | number | boolean>[] = [];
      for (const descending of [false, true]) {
        for (const start of [undefined, ...probes.slice(0, 6)]) {
          for (const end of [undefined, k[100], k[600], "m"]) {
            for (const inclusiveEnd of [true, false]) {
              const q: Record<string, string | number | boolean> = { descending };
              if (start !== undefined) q.startkey = start;
              if (end !== undefined) q.endkey = end;
              if (!inclusiveEnd) q.inclusive_end = false;
              asked.push(q, { ...q, skip: 3, limit: 5 });
            }
          }
        }
        for (const key of probes) asked.push({ descending, key });
      }
      for (const q of asked) {
        const params = Object.entries(q).map(([n, v]) =>
          `${n}=${encodeURIComponent(typeof v === "string" ? JSON.stringify(v) : String(v))}`
        );
        const got = JSON.parse((await m.get(`/db/_all_docs?${params.join("&")}`)).body);
        const want = couchAllDocs(k, q);
        assert.deepEqual(
          [got.total_rows, got.offset, got.rows.map((r: { id: string }) => r.id)],
          [want.total, want.offset, want.ids],
          `docs ${docs} ${JSON.stringify(q)}`,
        );
      }
    } finally {
      m.kv.close();
    }
  }
});

/** What CouchDB answers `_all_docs` with (ids in code point order), for the test's queries. */
function couchAllDocs(sorted: readonly string[], q: Record<string, string | number | boolean>) {
  const desc = q.descending === true;
  const start = (q.key ?? q.startkey) as string | undefined;
  const end = (q.key ?? q.endkey) as string | undefined;
  const closed = q.key !== undefined || q.inclusive_end !== false;
  const order = desc ? [...sorted].reverse() : [...sorted];
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0) * (desc ? -1 : 1);
  const before = start === undefined ? 0 : order.filter((x) => cmp(x, start) < 0).length;
  const rows = order.filter((x) =>
    (start === undefined || cmp(x, start) >= 0) &&
    (end === undefined || (closed ? cmp(x, end) <= 0 : cmp(x, end) < 0))
  );
  const skip = (q.skip as number | undefined) ?? 0;
  const limit = (q.limit as number | undefined) ?? Infinity;
  return {
    total: sorted.length,
    offset: Math.min(sorted.length, before + skip),
    ids: rows.slice(skip, skip + limit),
  };
}

Deno.test("mirror app: _changes in the mirror's own sequence; twice adds nothing; a deletion's tombstone; longpoll, continuous and their bound", async () => {
  const m = await mirrored(300);
  try {
    const all = JSON.parse((await m.get("/db/_changes")).body);
    assert.equal(all.results.length, 300);
    assert.deepEqual(all.results.slice(0, 2).map((r: { seq: number }) => r.seq), [1, 2]);
    assert.equal(all.last_seq, 300);
    const limited = JSON.parse((await m.get("/db/_changes?since=10&limit=5")).body);
    assert.deepEqual(limited.results.map((r: { seq: number }) => r.seq), [11, 12, 13, 14, 15]);
    assert.equal(limited.pending, 285);
    const filtered = JSON.parse(
      (await m.get("/db/_changes?filter=_doc_ids", {
        method: "POST",
        body: JSON.stringify({ doc_ids: [m.keys[7]] }),
      })).body,
    );
    assert.deepEqual(filtered.results.map((r: { id: string }) => r.id), [m.keys[7]]);
    // The same batch given again: nothing appended.
    await m.sink.apply({
      crawlId: m.id,
      range: { from: null, to: null },
      items: m.keys.map((id) => ({ id, rev: m.data.rev(id)! })),
      deleted: [],
      seq: null,
      keys: "ids",
    });
    assert.equal(JSON.parse((await m.get("/db")).body).update_seq, 300);
    // A deletion: a tombstone one generation past, answered with its parent.
    const gone = m.keys[42];
    const rev = m.data.rev(gone)!;
    await m.sink.apply({
      crawlId: m.id,
      range: null,
      items: [],
      deleted: [gone],
      seq: null,
      keys: "ids",
    });
    const tomb = tombstoneRev(rev);
    assert.equal(Number.parseInt(tomb), Number.parseInt(rev) + 1);
    const last = JSON.parse((await m.get("/db/_changes?since=300")).body).results;
    assert.deepEqual(last, [{ seq: 301, id: gone, changes: [{ rev: tomb }], deleted: true }]);
    // Newest first from the head, since ignored (as CouchDB and PouchDB): limit=1 is the head.
    const seqs = (body: string) => JSON.parse(body).results.map((r: { seq: number }) => r.seq);
    const head = JSON.parse((await m.get("/db/_changes?descending=true&limit=1")).body);
    assert.deepEqual([seqs(JSON.stringify(head)), head.last_seq, head.pending], [[301], 301, 300]);
    assert.deepEqual(seqs((await m.get("/db/_changes?descending=true&since=5&limit=3")).body), [
      301,
      300,
      299,
    ]);
    const down = JSON.parse((await m.get("/db/_changes?descending=true")).body);
    const up = JSON.parse((await m.get("/db/_changes")).body);
    assert.deepEqual(down.results, up.results.toReversed());
    assert.deepEqual([down.results.length, down.last_seq, down.pending], [300, 1, 0]);
    assert.ok(!seqs(JSON.stringify(down)).includes(43), "the deleted id's older entry is gone");
    const picked = JSON.parse(
      (await m.get("/db/_changes?descending=true&filter=_doc_ids", {
        method: "POST",
        body: JSON.stringify({ doc_ids: [m.keys[7], m.keys[100]] }),
      })).body,
    );
    assert.deepEqual(picked.results.map((r: { id: string }) => r.id), [m.keys[100], m.keys[7]]);
    const refused = await m.get("/db/_changes?descending=true&feed=longpoll");
    assert.equal(refused.status, 400);
    assert.match(JSON.parse(refused.body).reason, /descending is served with feed=normal only/);
    // The store still holds it (only the sink was told): open_revs asks for the tombstone.
    const bulk = JSON.parse(
      (await m.get("/db/_bulk_get?revs=true", {
        method: "POST",
        body: JSON.stringify({ docs: [{ id: m.keys[1], rev: "9-nope" }] }),
      })).body,
    );
    assert.equal(bulk.results[0].docs[0].error.error, "not_found");
    // longpoll: nothing after the head, so it waits its timeout and says where it is.
    const t = performance.now();
    const poll = JSON.parse((await m.get("/db/_changes?feed=longpoll&since=now&timeout=300")).body);
    assert.ok(performance.now() - t >= 250);
    assert.deepEqual([poll.results, poll.last_seq], [[], 301]);
    // continuous: rows a line, then its last_seq; a second one at once is over the bound.
    const feed = await m.app.request("/db/_changes?feed=continuous&since=298&timeout=300", {
      headers: { authorization: "Bearer tok-123" },
    });
    const over = await m.get("/db/_changes?feed=continuous&timeout=100");
    assert.equal(over.status, 503);
    const lines = (await feed.text()).trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.seq ?? `last ${l.last_seq}`), [299, 300, 301, "last 301"]);
    assert.equal((await m.get("/db/_changes?feed=continuous&limit=1")).status, 200, "freed");
  } finally {
    m.kv.close();
  }
});

Deno.test("mirror app: documents with revs and open_revs; _local checkpoints kept beside the crawl", async () => {
  const m = await mirrored(50);
  try {
    const id = m.keys[3];
    const rev = m.data.rev(id)!;
    const doc = JSON.parse((await m.get(`/db/${encodeURIComponent(id)}?revs=true`)).body);
    assert.deepEqual([doc._id, doc._rev, doc._revisions.start], [id, rev, Number.parseInt(rev)]);
    const open = JSON.parse(
      (await m.get(
        `/db/${encodeURIComponent(id)}?open_revs=${
          encodeURIComponent(JSON.stringify([rev, "7-x"]))
        }`,
      )).body,
    );
    assert.deepEqual([open[0].ok._rev, open[1]], [rev, { missing: "7-x" }]);
    assert.equal((await m.get(`/db/${encodeURIComponent(id)}?rev=7-x`)).status, 404);
    assert.equal((await m.get("/db/_local/abc")).status, 404);
    const put = await m.get("/db/_local/abc", {
      method: "PUT",
      body: JSON.stringify({ session_id: "s", history: [] }),
    });
    assert.equal(put.status, 201);
    const local = JSON.parse((await m.get("/db/_local/abc")).body);
    assert.deepEqual([local._id, local._rev, local.session_id], ["_local/abc", "0-1", "s"]);
  } finally {
    m.kv.close();
  }
});
