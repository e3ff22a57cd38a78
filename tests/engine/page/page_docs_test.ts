/**
 * A page's documents: a document behind its listing on a document host lagging the registry is
 * pending (never an error, never a pause of the page), and what the page charged to the process's
 * budget of bytes always goes back.
 */
import assert from "node:assert/strict";
import { FatalError, TransientError } from "../../../lib/base/errors.ts";
import { AdaptiveLimit } from "../../../lib/base/adaptive_limit.ts";
import type { DocResult } from "../../../lib/plan/source.ts";
import { DocMemory } from "../../../lib/engine/page/doc_memory.ts";
import { type DocFetch, fetchDocs } from "../../../lib/engine/page/page_docs.ts";
import { rowsDocBytes } from "../../../lib/plan/source.ts";
import { MemorySource } from "../../../lib/sources/memory_source.ts";
import { dataOf, wrapSource } from "../../helpers.ts";

const LAGGING: DocResult = {
  kind: "error",
  status: 404,
  reason: "not found on the document host (it may lag the registry)",
  later: true,
};

/**
 * A source over a, b, c, d whose documents answer as `answer` says (else as they are), its rows,
 * and `fetch`: the page's documents by one GET each.
 */
async function answering(answer: (id: string, n: number) => Promise<DocResult> | null) {
  const inner = new MemorySource(dataOf(["a", "b", "c", "d"]));
  const calls = new Map<string, number>();
  const source = wrapSource(inner, {
    doc: (id) => {
      const n = (calls.get(id) ?? 0) + 1;
      calls.set(id, n);
      return answer(id, n) ?? inner.doc(id);
    },
  });
  const rows = (await inner.list({ start: null, limit: 10 })).rows;
  const fetch = (o: Partial<DocFetch> = {}) =>
    fetchDocs(source, rows, {
      mode: "get",
      limit: new AdaptiveLimit(4),
      currentEnd: () => null,
      ...o,
    });
  return { inner, calls, rows, fetch };
}

Deno.test("page docs: a lagging document host's 404 makes its item pending at once: no failed page, no pause", async () => {
  const { calls, rows, fetch } = await answering((id) =>
    id === "b" ? Promise.resolve(LAGGING) : null
  );
  const items = await fetch({ pageFailures: 0 });
  assert.deepEqual(items[1].doc, LAGGING);
  assert.equal(items[1].rev, rows[1].rev);
  assert.equal(calls.get("b"), 1, "asked again later, by the pending documents' asker");
  assert.deepEqual(items.map((it) => it.doc?.kind), ["doc", "error", "doc", "doc"]);
});

Deno.test("page docs: a document served at an older revision is pending at the listed one, with the ETag it came with", async () => {
  const { rows, fetch } = await answering((id) =>
    id === "c"
      ? Promise.resolve({ kind: "doc", json: '{"_id":"c"}', docRev: "0-old", etag: '"e1"' })
      : null
  );
  const items = await fetch({ pageFailures: 0 });
  assert.equal(items[2].rev, rows[2].rev);
  assert.deepEqual(items[2].doc, {
    kind: "error",
    status: 0,
    reason: `the document served is revision 0-old, not the listed ${rows[2].rev}`,
    later: true,
    etag: '"e1"',
  });
});

Deno.test("page docs: a page whose every document is behind is not a failed page (the host answered)", async () => {
  const { fetch } = await answering(() => Promise.resolve(LAGGING));
  const items = await fetch({ pageFailures: 0 });
  assert.deepEqual(items.map((it) => it.doc?.kind === "error" && it.doc.later), [
    true,
    true,
    true,
    true,
  ]);
});

Deno.test("page docs: a document that kept failing for the network is not paused for", async () => {
  const { calls, fetch } = await answering((id) =>
    id === "d" ? Promise.reject(new TransientError("HTTP 503", { status: 503 })) : null
  );
  const items = await fetch({ pageFailures: 2 });
  assert.equal(items[3].doc?.kind, "error");
  assert.equal(calls.get("d"), 2, "its first round and its second");
});

Deno.test("page docs: every byte a failing page charged goes back to the budget", async () => {
  const memory = new DocMemory(1 << 30);
  const { fetch } = await answering((id) =>
    id === "c" ? Promise.reject(new TransientError("HTTP 503", { status: 503 })) : null
  );
  await assert.rejects(fetch({ memory }), TransientError);
  assert.equal(memory.held, 0, "three documents arrived, the page failed: nothing is held");
  // A page that succeeds holds what its items hold, until the page is written.
  const items = await fetch({ memory, pageFailures: 2 });
  assert.ok(rowsDocBytes(items) > 0);
  assert.equal(memory.held, rowsDocBytes(items));
});

Deno.test("page docs: a document served older than listed is not charged, nor held", async () => {
  const memory = new DocMemory(1 << 30);
  const { fetch } = await answering((id) =>
    id === "a" ? Promise.resolve({ kind: "doc", json: '{"_id":"a"}', docRev: "0-old" }) : null
  );
  const items = await fetch({ pageFailures: 2, memory });
  assert.match(items[0].doc?.kind === "error" ? items[0].doc.reason : "", /revision 0-old/);
  assert.equal(memory.held, rowsDocBytes(items));
});

Deno.test("page docs: a fatal answer is thrown once the requests in flight have ended, their bytes back", async () => {
  const memory = new DocMemory(1 << 30);
  let release!: () => void;
  const held = new Promise<void>((r) => release = r);
  const { inner, fetch } = await answering((id) =>
    id === "a"
      ? Promise.reject(new FatalError("the registry is gone"))
      : id === "b"
      ? held.then(() => inner.doc("b"))
      : null
  );
  let settled = false;
  const fetching = fetch({ memory }).finally(() => settled = true);
  for (let i = 0; i < 20; i++) await Promise.resolve();
  assert.equal(settled, false, "b is still in flight");
  release();
  await assert.rejects(fetching, FatalError);
  assert.equal(memory.held, 0, "b arrived before the error was thrown, and went back");
});

Deno.test("page docs: a page of 50 or more whose every document answers 404 fails the crawl, saying where they were looked for; 49 or one found do not", async () => {
  const ids = Array.from({ length: 60 }, (_, i) => `p${String(i).padStart(3, "0")}`);
  const missing: DocResult = { kind: "error", status: 404, reason: "not_found" };
  const page = async (count: number, found: string | null) => {
    const inner = new MemorySource(dataOf(ids.slice(0, count)));
    const source = wrapSource(inner, {
      doc: (id) => id === found ? inner.doc(id) : Promise.resolve(missing),
    });
    const rows = (await inner.list({ start: null, limit: 100 })).rows;
    return fetchDocs(source, rows, {
      mode: "get",
      limit: new AdaptiveLimit(8),
      currentEnd: () => null,
    });
  };
  await assert.rejects(
    page(60, null),
    (err: Error) =>
      err instanceof FatalError &&
      /^documents are not at .*\/<id>: 60 ids listed \("p000", "p001", "p002", …\) each answered 404\. This registry serves them elsewhere: give --docs-url \(docsUrl\) their base; for npm's replica, --docs-url https:\/\/registry\.npmjs\.org$/
        .test(err.message),
  );
  assert.equal((await page(49, null)).length, 49, "a short page of deleted documents is not it");
  assert.equal((await page(60, "p030")).length, 60, "one document there: they are not elsewhere");
});
