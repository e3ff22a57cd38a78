import assert from "node:assert/strict";
import { type AppDeps, createApp } from "../../lib/http/app.ts";
import { planCrawl } from "../../lib/engine/crawl/planning.ts";
import { MemorySource } from "../../lib/sources/memory_source.ts";
import { getCrawl, keys, listCrawls, listShards } from "../../lib/engine/store/mod.ts";
import { ctxOf, finishAll, RecordingDispatcher, runOne } from "../engine_helpers.ts";
import { dataOf, randomKeys, wrapSource } from "../helpers.ts";

const TOKEN = "t0ps3cret-token";
const SRC = "http://127.0.0.1:5999/registry";

async function setup(extra: Partial<AppDeps> = {}) {
  const kv = await Deno.openKv(":memory:");
  const dispatcher = new RecordingDispatcher();
  const data = dataOf(randomKeys(1500, "abcdefghij-".split(""), 51, 6));
  const source = new MemorySource(data, { maxPage: 100 });
  const planned = dispatcher.plans;
  const app = createApp({
    kv,
    token: TOKEN,
    metricsToken: "scraper-token",
    allowedSources: [SRC],
    dispatcher,
    eventsEveryMs: 20,
    openSource: (url) => {
      assert.equal(url, SRC, "only the allowed source is opened");
      return source;
    },
    ...extra,
  });
  const call = (method: string, path: string, body?: unknown, token: string | null = TOKEN) =>
    app.request(path, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        "content-type": "application/json",
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
  return { kv, app, call, dispatcher, source, data, planned };
}

Deno.test("api: health and status page need no token; everything else does", async () => {
  const { kv, call } = await setup();
  try {
    assert.equal((await call("GET", "/healthz", undefined, null)).status, 200);
    const page = await call("GET", "/", undefined, null);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<title>rankcrawl status<\/title>/);
    for (
      const [m, p] of [["GET", "/crawls"], ["POST", "/crawls"], ["GET", "/crawls/x"], [
        "POST",
        "/crawls/x/pause",
      ]]
    ) {
      const none = await call(m, p, undefined, null);
      assert.equal(none.status, 401, `${m} ${p} without token`);
      const wrong = await call(m, p, undefined, "nope");
      assert.equal(wrong.status, 401, `${m} ${p} with a wrong token`);
      const text = await wrong.text();
      assert.ok(!text.includes(TOKEN), "the token never appears in answers");
    }
  } finally {
    kv.close();
  }
});

Deno.test("api: validation of bodies and parameters answers 4xx with a JSON reason", async () => {
  const { kv, call } = await setup();
  try {
    const bad: [unknown, number, RegExp][] = [
      ["{not json", 400, /not valid JSON/],
      [{ source: SRC }, 400, /shards/],
      [{ source: SRC, shards: 0 }, 400, /shards/],
      [{ source: SRC, shards: -3 }, 400, /shards/],
      [{ source: SRC, shards: "4" }, 400, /shards/],
      [{ source: SRC, shards: 2.5 }, 400, /shards/],
      [{ source: "not a url", shards: 4 }, 400, /source is not a URL/],
      [{ source: "ftp://127.0.0.1:5999/registry", shards: 4 }, 400, /http\(s\)/],
      [{ source: "http://u:pw@127.0.0.1:5999/registry", shards: 4 }, 400, /credentials/],
      [{ source: `${SRC}?limit=5`, shards: 4 }, 400, /without \? or #/],
      [{ source: SRC, docsUrl: "file:///etc/passwd", shards: 4 }, 400, /docsUrl/],
      [{ source: SRC, shards: 4, extra: true }, 400, /extra|Unrecognized/],
      [{ source: SRC, shards: 4, docs: "yes" }, 400, /docs/],
      [{ source: SRC, shards: 4, follow: 1 }, 400, /follow/],
      [{ source: SRC, shards: 4, view: "no-slash" }, 400, /view must be ddoc\/view/],
      [{ source: "http://169.254.169.254/latest", shards: 4 }, 403, /not allowed/],
      [{ source: "http://10.0.0.1/registry", shards: 4 }, 403, /not allowed/],
      [{ source: SRC, docs: true, docsUrl: "http://evil.example/", shards: 4 }, 403, /not allowed/],
      [{ source: SRC, docsUrl: `${SRC}/docs`, shards: 4 }, 400, /docsUrl is about documents/],
      [{ source: SRC, docFields: ["name"], shards: 4 }, 400, /give docs too/],
      [[1, 2, 3], 400, /body|Expected object/],
      [{ source: SRC, shards: 4, pad: "x".repeat(40_000) }, 413, /too large/],
    ];
    for (const [body, code, re] of bad) {
      const res = await call("POST", "/crawls", body);
      assert.equal(res.status, code, JSON.stringify(body).slice(0, 80));
      const json = await res.json();
      assert.match(json.error, re);
    }
    assert.equal((await call("GET", "/crawls/no-such")).status, 404);
    assert.equal((await call("GET", "/crawls/bad%20id")).status, 400);
    assert.equal((await call("POST", "/crawls/no-such/pause")).status, 404);
    assert.equal((await call("GET", "/nope")).status, 404);
    assert.equal((await call("DELETE", "/crawls/no-such")).status, 404);
    assert.equal((await call("GET", "/crawls/no-such/plan.svg")).status, 404);
    const forged = await call("GET", "/crawls/no-such/items?cursor=AAAA");
    assert.ok(forged.status === 400 || forged.status === 404, String(forged.status));
  } finally {
    kv.close();
  }
});

Deno.test("api: lifecycle: create, plan, run, pause, resume, finish, items, cancel", async () => {
  const { kv, call, dispatcher, source, data, planned } = await setup();
  try {
    const created = await call("POST", "/crawls", { source: SRC, shards: 4, maxPage: 100 });
    assert.equal(created.status, 202);
    const { id, status } = await created.json();
    assert.equal(status, "planning");
    assert.deepEqual(planned, [id]);
    const again = await call("POST", "/crawls", { source: SRC, shards: 4, maxPage: 100 });
    assert.equal(again.status, 200, "the same spec is the same crawl");
    assert.equal((await again.json()).id, id);
    // The planner (a queue message in production) runs:
    await planCrawl(ctxOf(kv, source, { dispatcher }), id);
    let st = await (await call("GET", `/crawls/${id}`)).json();
    assert.equal(st.status, "running");
    assert.equal(st.total, data.size);
    assert.equal(st.shards.length, 4);
    // Pause: shards stop being worked on.
    assert.equal((await call("POST", `/crawls/${id}/pause`)).status, 200);
    assert.deepEqual(await runOne(kv, source, id, 0), { kind: "busy" });
    assert.equal((await (await call("GET", `/crawls/${id}`)).json()).itemsStored, 0);
    // Resume re-dispatches every unfinished shard; the crawl then finishes.
    dispatcher.shards.length = 0;
    const resumed = await call("POST", `/crawls/${id}/resume`);
    assert.equal((await resumed.json()).status, "running");
    assert.deepEqual(dispatcher.shards.map((d) => d.shardId), [0, 1, 2, 3]);
    await finishAll(kv, source, id, { deps: { dispatcher } });
    st = await (await call("GET", `/crawls/${id}`)).json();
    assert.equal(st.status, "done");
    assert.equal(st.itemsStored, data.size);
    // Items page by page, each once.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
      const res = await call("GET", `/crawls/${id}/items?limit=400${q}`);
      const body: { items: { id: string }[]; cursor: string | null } = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      seen.push(...body.items.map((i) => i.id));
      cursor = body.cursor;
    } while (cursor);
    assert.equal(seen.length, data.size);
    assert.equal(new Set(seen).size, data.size);
    assert.equal((await call("GET", `/crawls/${id}/items?limit=0`)).status, 400);
    assert.equal((await call("GET", `/crawls/${id}/items?limit=abc`)).status, 400);
    // A finished crawl cannot be cancelled or paused.
    assert.equal((await call("POST", `/crawls/${id}/cancel`)).status, 409);
    assert.equal((await call("POST", `/crawls/${id}/pause`)).status, 409);
    // A second crawl is cancelled while running; its shards stay as they were.
    const c2 = await (await call("POST", "/crawls", { source: SRC, shards: 2, id: "second" }))
      .json();
    await planCrawl(ctxOf(kv, source, { dispatcher }), c2.id);
    assert.equal((await (await call("POST", `/crawls/second/cancel`)).json()).status, "cancelled");
    assert.equal((await getCrawl(kv, "second")).value!.status, "cancelled");
    assert.equal((await listShards(kv, "second")).length, 2);
    assert.equal((await call("POST", `/crawls/second/resume`)).status, 409);
    const list = await (await call("GET", "/crawls")).json();
    assert.deepEqual(list.crawls.map((c: { id: string }) => c.id).sort(), [id, "second"].sort());
  } finally {
    kv.close();
  }
});

Deno.test("api: sources are normalized before the allowlist: spaces, case, trailing slash", async () => {
  const { kv, call, planned } = await setup();
  try {
    const forms = [` ${SRC} `, SRC.toUpperCase().replace("REGISTRY", "registry"), `${SRC}/`];
    const ids = new Set<string>();
    for (const source of forms) {
      const res = await call("POST", "/crawls", { source, shards: 3 });
      assert.ok(res.status === 202 || res.status === 200, `${source}: ${res.status}`);
      ids.add((await res.json()).id);
    }
    assert.equal(ids.size, 1, "every spelling is the same crawl");
    assert.equal(planned.length, 1, "planned once");
    const [crawl] = (await (await call("GET", "/crawls")).json()).crawls;
    assert.equal(crawl.source, SRC);
  } finally {
    kv.close();
  }
});

Deno.test("api: a forged items cursor is a 400 or stays inside its crawl, never a 500", async () => {
  const { kv, call, source, data } = await setup();
  try {
    for (const id of ["mine", "other"]) {
      await call("POST", "/crawls", { source: SRC, shards: 2, id });
      await planCrawl(ctxOf(kv, source, { dispatcher: new RecordingDispatcher() }), id);
      await finishAll(kv, source, id, { deps: {} });
    }
    const first = await (await call("GET", `/crawls/mine/items?limit=5`)).json();
    assert.equal(first.items.length, 5);
    const forged = ["AAAA", "not+base64/but=ok", "____", first.cursor.slice(0, -4) + "QUJD", "x"];
    for (const cursor of forged) {
      const res = await call("GET", `/crawls/mine/items?cursor=${encodeURIComponent(cursor)}`);
      const body = await res.json();
      assert.ok(res.status === 200 || res.status === 400, `${cursor}: ${res.status}`);
      if (res.status === 400) assert.match(body.error, /cursor/);
      else {for (const it of body.items) {
          assert.ok(data.rev(it.id) !== undefined, `${it.id} is one of mine`);
        }}
    }
    for (const cursor of ["A".repeat(5000), "%00", "a b"]) {
      const res = await call("GET", `/crawls/mine/items?cursor=${cursor}`);
      assert.equal(res.status, 400, cursor);
    }
  } finally {
    kv.close();
  }
});

Deno.test("api: DELETE removes a crawl and everything it stored; only it", async () => {
  const { kv, call, source, data } = await setup();
  try {
    for (const id of ["one", "two"]) {
      await call("POST", "/crawls", { source: SRC, shards: 2, id });
      await planCrawl(ctxOf(kv, source, { dispatcher: new RecordingDispatcher() }), id);
      await finishAll(kv, source, id);
    }
    let before = 0;
    for await (const e of kv.list({ prefix: [] })) if (e.key.includes("one")) before++;
    const res = await call("DELETE", "/crawls/one");
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.deleted, true);
    assert.equal(body.keys, before, "every key of the crawl is counted once");
    assert.equal((await call("GET", "/crawls/one")).status, 404);
    let left = 0;
    for await (const e of kv.list({ prefix: [] })) if (e.key.includes("one")) left++;
    assert.equal(left, 0, "no key of the deleted crawl is left");
    const two = await (await call("GET", "/crawls/two")).json();
    assert.equal(two.itemsStored, data.size, "the other crawl is untouched");
  } finally {
    kv.close();
  }
});

Deno.test("api: /metrics takes the API token or the scraper's, and counts what the store holds", async () => {
  const { kv, call, source, data } = await setup();
  try {
    const { id } = await (await call("POST", "/crawls", { source: SRC, shards: 2 })).json();
    await planCrawl(ctxOf(kv, source, { dispatcher: new RecordingDispatcher() }), id);
    await finishAll(kv, source, id);
    assert.equal((await call("GET", "/metrics", undefined, null)).status, 401);
    assert.equal((await call("GET", "/metrics", undefined, "wrong")).status, 401);
    assert.equal((await call("GET", "/crawls", undefined, "scraper-token")).status, 401);
    for (const token of [TOKEN, "scraper-token"]) {
      const res = await call("GET", "/metrics", undefined, token);
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, /^rankcrawl_crawls\{state="done"\} 1$/m);
      assert.match(
        text,
        new RegExp(`^rankcrawl_items_stored\\{crawl="${id}"\\} ${data.size}$`, "m"),
      );
      assert.ok(!text.includes(TOKEN));
    }
  } finally {
    kv.close();
  }
});

Deno.test("api: a documents crawl's pending documents are in its status and /metrics", async () => {
  const { kv, call } = await setup();
  try {
    const { id } = await (await call("POST", "/crawls", { source: SRC, shards: 2, docs: true }))
      .json();
    await kv.set(keys.pendingDocsState(id), {
      notes: 7,
      pending: 3,
      asked: 20,
      notModified: 12,
      landed: 7,
      expired: 1,
      atMs: 0,
    });
    const status = await (await call("GET", `/crawls/${id}`)).json();
    assert.deepEqual(status.pendingDocs, {
      pending: 3,
      landed: 7,
      expired: 1,
      asked: 20,
      notModified: 12,
    });
    assert.equal(status.docErrors, 1, "one given up on is a document error");
    const text = await (await call("GET", "/metrics")).text();
    assert.match(text, new RegExp(`^rankcrawl_documents_pending\\{crawl="${id}"\\} 3$`, "m"));
    assert.match(
      text,
      new RegExp(`^rankcrawl_documents_not_modified_total\\{crawl="${id}"\\} 12$`, "m"),
    );
  } finally {
    kv.close();
  }
});

Deno.test("api: plan.svg draws the plan; /events streams crawl states", async () => {
  const { kv, call, source } = await setup();
  try {
    const { id } = await (await call("POST", "/crawls", { source: SRC, shards: 5 })).json();
    await planCrawl(ctxOf(kv, source, { dispatcher: new RecordingDispatcher() }), id);
    const svg = await call("GET", `/crawls/${id}/plan.svg`);
    assert.equal(svg.status, 200);
    assert.equal(svg.headers.get("content-type"), "image/svg+xml");
    const text = await svg.text();
    assert.match(text, /^<svg /);
    assert.equal((text.match(/class="balanced-cut"/g) ?? []).length, 4, "N-1 cuts for N shards");
    const events = await call("GET", "/events");
    assert.equal(events.status, 200);
    assert.match(events.headers.get("content-type") ?? "", /text\/event-stream/);
    const reader = events.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    while (!seen.includes("\n\n")) seen += (await reader.read()).value ?? "";
    await reader.cancel();
    assert.match(seen, /^event: crawl$/m);
    assert.match(seen, new RegExp(`"id":"${id}"`));
    assert.match(seen, /"status":"running"/);
  } finally {
    kv.close();
  }
});

Deno.test("api: /locate answers keys at percentiles and ranks exactly, and a key's rank", async () => {
  const { kv, call, data } = await setup();
  try {
    const q = (params: string) =>
      call("GET", `/locate?source=${encodeURIComponent(SRC)}&${params}`);
    const res = await q("percentile=0,50,100");
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.total, data.size);
    assert.deepEqual(
      body.located.map((l: { key: string }) => l.key),
      [data.keys[0], data.keys[Math.floor(data.size / 2)], data.keys[data.size - 1]],
    );
    assert.equal(body.method, "rank");
    const byRank = await (await q("rank=7,1234")).json();
    assert.deepEqual(byRank.located.map((l: { key: string }) => l.key), [
      data.keys[7],
      data.keys[1234],
    ]);
    const place = await (await q(`key=${encodeURIComponent(data.keys[321])}`)).json();
    assert.deepEqual([place.rank, place.present, place.total], [321, true, data.size]);
    for (
      const [params, code, re] of [
        ["percentile=101", 400, /percentile/],
        ["percentile=50&rank=3", 400, /exactly one/],
        ["rank=-1", 400, /rank/],
        [`rank=${data.size}`, 400, /outside/],
        ["percentile=", 400, /empty/],
        ["percentile=0x10", 400, /from 0 to 100, got "0x10"/],
        ["percentile=1e1", 400, /percentile/],
        ["key=%ED%A0%80", 400, /not well-formed UTF-8/],
        ["percentile=50&view=pkg/nope", 400, /unknown parameter view/],
      ] as [string, number, RegExp][]
    ) {
      const r = await q(params);
      assert.equal(r.status, code, params);
      assert.match((await r.json()).error, re);
    }
    const outside = await call("GET", "/locate?source=http://169.254.169.254/x&percentile=50");
    assert.equal(outside.status, 403);
    await outside.body?.cancel();
    const anon = await call("GET", `/locate?source=${SRC}&percentile=50`, undefined, null);
    assert.equal(anon.status, 401);
    await anon.body?.cancel();
  } finally {
    kv.close();
  }
});

Deno.test("api: POST /crawls beyond the active bound is a 429, beyond the stored one a 409", async () => {
  const { kv, call } = await setup({ maxActiveCrawls: 2, maxStoredCrawls: 3 });
  try {
    const create = (shards: number) => call("POST", "/crawls", { source: SRC, shards });
    const ids: string[] = [];
    for (const shards of [2, 3]) {
      const res = await create(shards);
      assert.equal(res.status, 202);
      ids.push((await res.json()).id);
    }
    const busy = await create(4);
    assert.equal(busy.status, 429);
    assert.match(
      (await busy.json()).error,
      /2 crawls are planning, running or paused \(at most 2\)/,
    );
    assert.equal(
      (await create(2)).status,
      200,
      "asking again for a crawl that exists is no new one",
    );
    assert.equal((await call("POST", `/crawls/${ids[0]}/cancel`)).status, 200);
    const third = await create(4);
    assert.equal(third.status, 202, "a cancelled crawl no longer counts as active");
    assert.equal((await call("POST", `/crawls/${ids[1]}/cancel`)).status, 200);
    const full = await create(5);
    assert.equal(full.status, 409);
    assert.match((await full.json()).error, /3 crawls are stored \(at most 3\): delete/);
    assert.equal((await call("DELETE", `/crawls/${ids[0]}`)).status, 200);
    assert.equal((await create(5)).status, 202);
    assert.equal((await listCrawls(kv)).length, 3);
  } finally {
    kv.close();
  }
});

Deno.test("api: the audit log has a line per state change and per refused token, never a secret", async () => {
  const lines: string[] = [];
  const { kv, call } = await setup({ audit: (l) => lines.push(l) });
  try {
    const { id } = await (await call("POST", "/crawls", { source: SRC, shards: 3 })).json();
    await call("GET", `/crawls/${id}`);
    await call("POST", "/crawls/nope/pause");
    await call("GET", "/crawls", undefined, "wrong-token-value");
    await call("POST", `/crawls/${id}/cancel`);
    await call("DELETE", `/crawls/${id}`);
    assert.deepEqual(lines, [
      "audit: POST /crawls 202",
      "audit: POST /crawls/nope/pause 404",
      "audit: GET /crawls refused: missing or wrong token",
      `audit: POST /crawls/${id}/cancel 200`,
      `audit: DELETE /crawls/${id} 200`,
    ]);
    assert.ok(lines.every((l) => !l.includes(TOKEN) && !l.includes("wrong-token-value")));
  } finally {
    kv.close();
  }
});

Deno.test("api: GET /crawls/:id/errors pages through the documents that could not be had", async () => {
  const { kv, call, dispatcher, source, data } = await setup();
  try {
    // One document in seven answers 404; one in eleven is not JSON.
    const failing = wrapSource(source, {
      doc: (id) => {
        const n = data.keys.indexOf(id);
        if (n % 7 === 0) {
          return Promise.resolve({ kind: "error", status: 404, reason: "not found" });
        }
        if (n % 11 === 0) {
          return Promise.resolve({ kind: "error", status: 200, reason: "not a JSON object" });
        }
        return source.doc(id);
      },
    });
    const created = await call("POST", "/crawls", { source: SRC, shards: 3, docs: true });
    const { id } = await created.json();
    await planCrawl(ctxOf(kv, failing, { dispatcher }), id);
    await finishAll(kv, failing, id, { deps: { dispatcher } });
    const st = await (await call("GET", `/crawls/${id}`)).json();
    const want = data.keys.filter((_, n) => n % 7 === 0 || n % 11 === 0);
    assert.equal(st.docErrors, want.length);
    const got: { id: string; status: number; reason: string }[] = [];
    let cursor: string | null = null;
    do {
      const q: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
      const res = await call("GET", `/crawls/${id}/errors?limit=37${q}`);
      const body: { errors: typeof got; cursor: string | null } = await res.json();
      assert.equal(res.status, 200, JSON.stringify(body));
      assert.ok(body.errors.length <= 37);
      got.push(...body.errors);
      cursor = body.cursor;
    } while (cursor);
    assert.deepEqual(got.map((e) => e.id), want, "each failed document once, in key order");
    const first = got.find((e) => e.id === data.keys[0])!;
    assert.deepEqual([first.status, first.reason], [404, "not found"]);
    assert.equal(got.find((e) => e.id === data.keys[11])!.status, 200);
    for (const bad of ["limit=0", "limit=1001", "limit=x", "cursor=%25%25", "cursor=AAAA"]) {
      const res = await call("GET", `/crawls/${id}/errors?${bad}`);
      assert.equal(res.status, 400, bad);
      assert.match((await res.json()).error, /limit|cursor/);
    }
    assert.equal((await call("GET", "/crawls/nope/errors")).status, 404);
    assert.equal((await call("GET", `/crawls/${id}/errors`, undefined, null)).status, 401);
    const icon = await call("GET", "/favicon.ico", undefined, null);
    assert.equal(icon.status, 200);
    assert.match(await icon.text(), /^<svg/);
  } finally {
    kv.close();
  }
});
