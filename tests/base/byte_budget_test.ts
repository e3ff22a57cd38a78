/**
 * The budget of body bytes (`byte_budget.ts`) and its use by the HTTP client: takes wait in the
 * order asked while the budget is spent, a take larger than the budget goes on alone, and many
 * sub-MiB documents in flight never hold more than the budget; documents that go to chunks anyway
 * are read as bytes. Counted in bytes, never in time.
 */
import assert from "node:assert/strict";
import { ByteBudget } from "../../lib/base/byte_budget.ts";
import { HttpClient } from "../../lib/sources/http/http.ts";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";

/** A budget of `limitBytes` that remembers the most it held at once (`most()`). */
function watched(limitBytes: number) {
  const budget = new ByteBudget(limitBytes);
  let most = 0;
  const take = budget.take.bind(budget);
  budget.take = async (bytes, o) => {
    const give = await take(bytes, o);
    most = Math.max(most, budget.held);
    return give;
  };
  return { budget, most: () => most };
}

Deno.test("byte budget: takes wait in order while it is spent; one over it goes on alone", async () => {
  const b = new ByteBudget(100);
  const a = await b.take(60);
  const order: string[] = [];
  const big = b.take(500).then((give) => (order.push("big"), give));
  const small = b.take(10).then((give) => (order.push("small"), give));
  await Promise.resolve();
  assert.deepEqual(order, [], "the 10 waits behind the 500, though it would fit");
  a();
  a(); // giving back twice gives back once
  const giveBig = await big;
  assert.equal(b.held, 500, "alone, over the budget");
  assert.deepEqual(order, ["big"]);
  giveBig();
  (await small)();
  assert.deepEqual(order, ["big", "small"]);
  assert.equal(b.held, 0);
  // Without waiting: held at once, over the budget.
  const x = await b.take(90);
  const y = await b.take(90, { wait: false });
  assert.equal(b.held, 180);
  x(), y();
  assert.equal(b.held, 0);
});

Deno.test("byte budget: 120 documents of 300 KiB, 40 in flight, never over a 1 MiB budget", async () => {
  const names = Array.from({ length: 120 }, (_, i) => `doc-${String(i).padStart(3, "0")}`);
  const data = new RegistryData(names, { largeDocRate: 1, largeDocBytes: 300 * 1024 });
  const reg = await startRegistry(data, { includeDocs: false, bulkGet: false });
  const { budget, most } = watched(1024 * 1024);
  try {
    const source = new CouchSource(reg.url, { bodyBytes: budget });
    let raw = 0;
    let next = 0;
    await Promise.all(Array.from({ length: 40 }, async () => {
      while (next < names.length) {
        const id = names[next++];
        const r = await source.doc(id, { rawOverBytes: 60_000 });
        assert.equal(r.kind, "raw", id);
        if (r.kind === "raw") {
          assert.deepEqual(JSON.parse(new TextDecoder().decode(r.bytes)), data.doc(id));
          raw++;
        }
      }
    }));
    assert.equal(raw, 120);
    const doc = JSON.stringify(data.doc(names[0])).length;
    assert.ok(doc > 300 * 1024, `${doc} bytes a document`);
    // At most as many 300 KiB bodies as fit in 1 MiB at once (3): never 40 of them.
    assert.ok(most() <= 1024 * 1024, `${most()} bytes held at once`);
    assert.ok(most() >= doc, "bodies were held");
    assert.equal(budget.held, 0, "every body's bytes given back");
  } finally {
    await reg.close();
  }
});

Deno.test("byte budget: a body without a declared length takes as it grows, and gives all back", async () => {
  const chunk = new Uint8Array(100 * 1024).fill(0x61);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response(
        new ReadableStream({
          start(c) {
            for (let i = 0; i < 5; i++) c.enqueue(chunk);
            c.close();
          },
        }),
      ),
  );
  const { budget, most } = watched(64 * 1024 * 1024);
  try {
    const http = new HttpClient({ bodyBytes: budget });
    const n = await http.request(
      { url: `http://127.0.0.1:${server.addr.port}/x`, maxBytes: 1 << 20 },
      (a) => a.body.length,
    );
    assert.equal(n, 500 * 1024);
    assert.ok(most() >= n, `${most()} bytes taken for a body of ${n}`);
    assert.equal(budget.held, 0);
  } finally {
    await server.shutdown();
  }
});
