import assert from "node:assert/strict";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";
import { parseRetryAfter } from "../../lib/sources/http/http.ts";
import { FatalError, TransientError } from "../../lib/base/errors.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { planShards } from "../../lib/plan/planner.ts";
import { assertExactPlan, dataOf, randomKeys, spawnRegistry } from "../helpers.ts";
import { JumpingClock } from "../fake_clock.ts";

const UNI = ["a", "b", "-", "@", "/", "é", "中", "\u{1f600}", "\uffff", "z"];

Deno.test("couch source: plans exactly against `deno task registry` started as a subprocess", async () => {
  const reg = await spawnRegistry(["--synthetic", "20000", "--no-skip", "--max-limit", "1000"]);
  try {
    const source = new CouchSource(reg.url, { maxPage: 1000 });
    const plan = await planShards(source, 56);
    assert.equal(plan.total, 20000);
    const { syntheticNames, bundledNames } = await import("../../lib/sim/names.ts");
    assertExactPlan(plan, dataOf(syntheticNames(await bundledNames(), 20000, { seed: 42 })), 56);
  } finally {
    await reg.close();
  }
});

Deno.test("couch source: unicode ids, scoped ids and documents over HTTP", async () => {
  const data = dataOf(randomKeys(3000, UNI, 5, 5));
  data.put("@scope/name");
  const reg = await startRegistry(data, {});
  try {
    const source = new CouchSource(reg.url, { maxPage: 100 });
    const plan = await planShards(source, 13);
    assertExactPlan(plan, data, 13);
    const doc = await source.doc("@scope/name");
    assert.ok(doc.kind === "doc" && JSON.parse(doc.json)._id === "@scope/name");
    const astral = data.keys.find((k) => k.includes("\u{1f600}"))!;
    const d2 = await source.doc(astral);
    assert.ok(d2.kind === "doc" && JSON.parse(d2.json)._id === astral);
    const miss = await source.doc("no such thing");
    assert.deepEqual(miss, { kind: "error", status: 404, reason: "not found" });
  } finally {
    await reg.close();
  }
});

Deno.test("couch source: 25% injected faults of every kind still give an exact plan", async () => {
  const data = dataOf(randomKeys(8000, UNI, 6, 6));
  const reg = await startRegistry(data, { faultRate: 0.25, retryAfterS: 0, seed: 9, slowMs: 30 });
  try {
    let retries = 0;
    const source = new CouchSource(reg.url, {
      maxPage: 500,
      clock: new JumpingClock(),
      maxAttempts: 20,
      onRetry: () => retries++,
    });
    const plan = await planShards(source, 16);
    assertExactPlan(plan, data, 16);
    assert.ok(retries > 0, "faults were injected and retried");
    assert.ok(reg.stats.faults > 0);
  } finally {
    await reg.close();
  }
});

Deno.test("couch source: non-CouchDB answers are fatal with a clear reason", async () => {
  const answers: Record<string, () => Response> = {
    "/html/_all_docs": () =>
      new Response("<html><body>hello</body></html>", { headers: { "content-type": "text/html" } }),
    "/types/_all_docs": () => Response.json({ total_rows: "many", offset: 0, rows: [] }),
    "/order/_all_docs": () =>
      Response.json({
        total_rows: 2,
        offset: 0,
        rows: [{ id: "b", key: "b", value: { rev: "1" } }, {
          id: "a",
          key: "a",
          value: { rev: "1" },
        }],
      }),
    "/offset/_all_docs": () => Response.json({ total_rows: 1, offset: 5, rows: [] }),
    "/missing/_all_docs": () => new Response("{}", { status: 404 }),
  };
  const fake: typeof fetch = (input) => {
    const path = new URL(input instanceof Request ? input.url : String(input)).pathname;
    // The database's own info (asked first) is not what is tested here: none.
    return Promise.resolve(answers[path]?.() ?? new Response("{}", { status: 404 }));
  };
  const reasons: Record<string, RegExp> = {
    html: /not a CouchDB answer/,
    types: /total_rows is not a count/,
    order: /keys out of order/,
    offset: /offset 5 > total_rows 1/,
    missing: /not a CouchDB database/,
  };
  for (const [db, re] of Object.entries(reasons)) {
    const source = new CouchSource(`http://x.test/${db}`, {
      fetch: fake,
      clock: new JumpingClock(),
    });
    await assert.rejects(() => source.list({ limit: 10 }), (err: Error) => {
      assert.ok(err instanceof FatalError, `${db}: ${err}`);
      assert.match(err.message, re);
      return true;
    });
  }
});

/** The database info every source reads once before its first request (its id order). */
function dbInfo(input: RequestInfo | URL): Response | null {
  const url = new URL(input instanceof Request ? input.url : String(input));
  return url.pathname === "/db"
    ? new Response('{"db_name":"db"}', { headers: { "content-type": "application/json" } })
    : null;
}

Deno.test("couch source: transient errors retry with Retry-After, then give up", async () => {
  const delays: number[] = [];
  let calls = 0;
  const fake: typeof fetch = (input) => {
    const info = dbInfo(input);
    if (info) return Promise.resolve(info);
    calls++;
    return Promise.resolve(
      calls === 1
        ? new Response("slow down", { status: 429, headers: { "retry-after": "2" } })
        : calls === 2
        ? new Response('{"total_rows": 3, "off', {
          headers: { "content-type": "application/json" },
        })
        : new Response("oops", { status: 503 }),
    );
  };
  const clock = new JumpingClock(Date.now(), (ms) => delays.push(ms));
  const source = new CouchSource("http://x.test/db", {
    fetch: fake,
    clock,
    maxAttempts: 4,
    backoffBaseMs: 10,
  });
  await assert.rejects(() => source.list({ limit: 1 }), TransientError);
  assert.equal(calls, 4);
  assert.ok(delays[0] >= 2000, "Retry-After honoured");
  assert.equal(parseRetryAfter("7"), 7000);
  assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4000), 6000);
  assert.equal(parseRetryAfter(null), undefined);
});

Deno.test("couch source: a damaged document body is retried for two rounds before it is the document's own", async () => {
  const answers = (cut: number) => {
    let calls = 0;
    const fake: typeof fetch = (input) => {
      const info = dbInfo(input);
      if (info) return Promise.resolve(info);
      calls++;
      const body = calls <= cut ? '{"_id":"a","x' : '{"_id":"a","x":1}';
      return Promise.resolve(
        new Response(body, { headers: { "content-type": "application/json" } }),
      );
    };
    const source = new CouchSource("http://x.test/db", {
      fetch: fake,
      clock: new JumpingClock(),
      docMaxAttempts: 4,
    });
    return { source, calls: () => calls };
  };
  // Cut four times in a row (one whole round), then whole: the document, not an error.
  const luck = answers(4);
  assert.deepEqual(await luck.source.doc("a"), {
    kind: "doc",
    json: '{"_id":"a","x":1}',
    docRev: null,
  });
  assert.equal(luck.calls(), 5);
  // Cut every time: the document's own error, after two rounds of four attempts.
  const broken = answers(Infinity);
  const r = await broken.source.doc("a");
  assert.equal(r.kind, "error");
  assert.equal(r.kind === "error" && r.status, 200);
  assert.match(r.kind === "error" ? r.reason : "", /invalid JSON/);
  assert.equal(broken.calls(), 8);
});

Deno.test("couch source: a closed port is transient, then an error naming the URL", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  const source = new CouchSource(`http://user:secret@127.0.0.1:${port}/db`, {
    clock: new JumpingClock(),
    maxAttempts: 2,
  });
  await assert.rejects(() => source.list({ limit: 1 }), (err: Error) => {
    assert.ok(err instanceof TransientError);
    assert.ok(!err.message.includes("secret"), "credentials never appear in messages");
    assert.match(err.message, new RegExp(`connection refused at http://127.0.0.1:${port}/db`));
    return true;
  });
});

Deno.test("registry data: synthetic generator is sorted and deterministic", async () => {
  const { syntheticNames, bundledNames } = await import("../../lib/sim/names.ts");
  const base = await bundledNames();
  assert.equal(base.length, 226_995);
  const a = syntheticNames(base, 50_000, { seed: 3 });
  const b = syntheticNames(base, 50_000, { seed: 3 });
  assert.deepEqual(a, b);
  assert.equal(new Set(a).size, 50_000);
  assert.ok(new RegistryData(a).checkSorted());
});

Deno.test("couch source: a listing answered 200 {error} is asked again like a 5xx, _all_docs and views", async () => {
  for (const view of [undefined, "d/v"]) {
    let calls = 0;
    const page = view
      ? '{"total_rows":1,"offset":0,"rows":[{"id":"a","key":"a","value":1}]}'
      : '{"total_rows":1,"offset":0,"rows":[{"id":"a","key":"a","value":{"rev":"1-a"}}]}';
    const fake: typeof fetch = (input) => {
      const url = new URL(input instanceof Request ? input.url : String(input));
      const json = (body: string) =>
        Promise.resolve(new Response(body, { headers: { "content-type": "application/json" } }));
      if (url.pathname === "/db") return json('{"db_name":"db"}');
      if (url.pathname === "/db/_design/d") return json('{"views":{"v":{"map":"f"}}}');
      return json(++calls === 1 ? '{"error":"timeout","reason":"upstream"}' : page);
    };
    const source = new CouchSource("http://x.test/db", {
      fetch: fake,
      clock: new JumpingClock(),
      view,
    });
    const got = await source.list({ limit: 1 });
    assert.equal(got.rows.length, 1, view ?? "_all_docs");
    assert.equal(calls, 2, "the error body was asked again");
  }
});

Deno.test("couch source: a first listing without keys goes out with the database info, keyed ones after", async () => {
  const data = dataOf(["a", "b", "c"]);
  const reg = await startRegistry(data, { port: 0 });
  try {
    const order: string[] = [];
    let releaseInfo = () => {};
    const infoHeld = new Promise<void>((r) => releaseInfo = r);
    const fake: typeof fetch = async (input, init) => {
      const url = new URL(String(input));
      const what = url.pathname.endsWith("/_all_docs")
        ? (url.searchParams.has("startkey") ? "keyed" : "keyless")
        : "info";
      order.push(`${what} sent`);
      // The database info answers only once a keyless listing was sent meanwhile.
      if (what === "info") await infoHeld;
      if (what === "keyless") releaseInfo();
      const res = await fetch(input, init);
      order.push(`${what} answered`);
      return res;
    };
    const source = new CouchSource(reg.url, { fetch: fake, clock: new JumpingClock() });
    const first = await source.list({ limit: 2 });
    assert.deepEqual(first.rows.map((r) => r.id), ["a", "b"]);
    const keyed = await source.list({ start: "b", limit: 2 });
    assert.deepEqual(keyed.rows.map((r) => r.id), ["b", "c"]);
    assert.deepEqual(order.slice(0, 2), ["info sent", "keyless sent"]);
    assert.ok(order.indexOf("keyed sent") > order.indexOf("info answered"));
  } finally {
    await reg.close();
  }
});
