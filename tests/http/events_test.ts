import assert from "node:assert/strict";
import { clockWithNow } from "../../lib/base/clock.ts";
import { type FeedEvent, StatusFeed } from "../../lib/http/events.ts";
import { createApp } from "../../lib/http/app.ts";
import { cancelCrawl, createCrawl, deleteCrawl } from "../../lib/engine/mod.ts";
import { buildSpec } from "../../lib/base/spec.ts";
import { RecordingDispatcher } from "../engine_helpers.ts";
import { FakeClock, nextTurn } from "../fake_clock.ts";

const SRC = "http://127.0.0.1:5999/registry";
const fixedNow = () => 1_700_000_000_000;

Deno.test("events: one look per tick for every listener, and only what changed is sent", async () => {
  const kv = await Deno.openKv(":memory:");
  const clock = new FakeClock(fixedNow());
  const feed = new StatusFeed(kv, { clock, everyMs: 10, maxListeners: 5 });
  try {
    for (const shards of [3, 4]) {
      await createCrawl(kv, buildSpec({ source: SRC, shards }), {
        id: `c${shards}`,
        clock: clockWithNow(fixedNow),
      });
    }
    const a: FeedEvent[][] = [];
    const b: FeedEvent[][] = [];
    const subA = (await feed.subscribe((e) => a.push(e)))!;
    const subB = (await feed.subscribe((e) => b.push(e)))!;
    assert.equal(feed.listeners, 2);
    for (const sub of [subA, subB]) {
      assert.deepEqual(sub.snapshot.map((e) => [e.event, JSON.parse(e.data).id]), [
        ["crawl", "c3"],
        ["crawl", "c4"],
      ]);
    }
    // Eight ticks with nothing changed: nothing is sent.
    await clock.advance(80);
    assert.deepEqual([a.length, b.length], [0, 0]);

    await cancelCrawl(kv, "c3", { clock: clockWithNow(fixedNow) });
    await clock.advance(10);
    assert.deepEqual([a.length, b.length], [1, 1], "the next tick sends the change");
    assert.equal(a[0], b[0], "one computation, the same batch handed to every listener");
    assert.deepEqual(a[0].map((e) => [e.event, JSON.parse(e.data).id]), [["crawl", "c3"]]);
    assert.equal(JSON.parse(a[0][0].data).status, "cancelled");

    await deleteCrawl(kv, "c3", { clock: clockWithNow(fixedNow) });
    const gone = [{ event: "gone", data: JSON.stringify({ id: "c3" }) }];
    await clock.advance(10);
    // A delete marks the crawl `deleting`, then removes it: a tick between the two sends that
    // status (a change) in a batch of its own; then the crawl is gone, and nothing else is sent.
    const between = a.slice(1, -1);
    assert.ok(between.length <= 1, `${between.length} batches between cancel and gone`);
    for (const batch of between) {
      assert.deepEqual(batch.map((e) => [e.event, JSON.parse(e.data).status]), [
        ["crawl", "deleting"],
      ]);
    }
    assert.deepEqual(a.at(-1), gone);

    await clock.advance(50);
    assert.deepEqual(a.at(-1), gone, "nothing after it");
    subA.unsubscribe();
    subB.unsubscribe();
    assert.equal(feed.listeners, 0);
    assert.equal(clock.pending, 0, "no listener: no tick");
  } finally {
    kv.close();
  }
});

Deno.test("events: at most maxListeners streams; a freed place can be taken again", async () => {
  const kv = await Deno.openKv(":memory:");
  const feed = new StatusFeed(kv, { clock: clockWithNow(fixedNow), everyMs: 10, maxListeners: 2 });
  try {
    const one = await feed.subscribe(() => {});
    const two = await feed.subscribe(() => {});
    assert.ok(one && two);
    assert.equal(await feed.subscribe(() => {}), null);
    one.unsubscribe();
    const three = await feed.subscribe(() => {});
    assert.ok(three);
    two.unsubscribe();
    three.unsubscribe();
  } finally {
    kv.close();
  }
});

Deno.test("events: GET /events beyond maxEventStreams is a 503 with a JSON reason", async () => {
  const kv = await Deno.openKv(":memory:");
  const app = createApp({
    kv,
    token: "t",
    allowedSources: [SRC],
    dispatcher: new RecordingDispatcher(),
    eventsEveryMs: 10,
    maxEventStreams: 1,
    clock: clockWithNow(fixedNow),
  });
  const get = () => app.request("/events", { headers: { authorization: "Bearer t" } });
  try {
    const first = await get();
    assert.equal(first.status, 200);
    const refused = await get();
    assert.equal(refused.status, 503);
    assert.match((await refused.json()).error, /too many event streams are open \(at most 1\)/);
    await first.body!.cancel();
    // The stream's place is freed when its reader goes away.
    let again = await get();
    for (let i = 0; i < 1000 && again.status === 503; i++) {
      await again.body?.cancel();
      await nextTurn();
      again = await get();
    }
    assert.equal(again.status, 200);
    await again.body!.cancel();
  } finally {
    kv.close();
  }
});

Deno.test("events: closing the feed (a stopping server) ends every open stream", async () => {
  const kv = await Deno.openKv(":memory:");
  const feed = new StatusFeed(kv, { clock: clockWithNow(fixedNow), everyMs: 10 });
  const app = createApp({
    kv,
    token: "t",
    allowedSources: [SRC],
    dispatcher: new RecordingDispatcher(),
    statusFeed: feed,
    clock: clockWithNow(fixedNow),
  });
  const get = () => app.request("/events", { headers: { authorization: "Bearer t" } });
  try {
    const open = await Promise.all([get(), get()]);
    assert.deepEqual(open.map((r) => r.status), [200, 200]);
    feed.close();
    // Each stream ends by itself: reading it to its end returns.
    for (const res of open) await res.text();
    assert.equal(feed.listeners, 0);
    const late = await get();
    assert.equal(late.status, 503);
    assert.match((await late.json()).error, /stopping/);
  } finally {
    kv.close();
  }
});
