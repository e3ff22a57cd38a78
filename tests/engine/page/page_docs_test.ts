/**
 * A page's documents: a document host behind the registry is waited out before a document is
 * recorded, and what the page charged to the process's budget of bytes always goes back.
 */
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import { JumpingClock } from "../../fake_clock.ts";
import assert from "node:assert/strict";
import { FatalError, TransientError } from "../../../lib/base/errors.ts";
import { AdaptiveLimit } from "../../../lib/base/adaptive_limit.ts";
import { DOCUMENT_RETRY } from "../../../lib/base/retry_policy.ts";
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
 * and `fetch`: the page's documents by one GET each, with the pauses it made recorded (none real).
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
  const clock = new JumpingClock();
  const pauses = clock.slept;
  const fetch = (o: Partial<DocFetch> = {}) =>
    fetchDocs(source, rows, {
      mode: "get",
      limit: new AdaptiveLimit(4),
      currentEnd: () => null,
      clock,
      ...o,
    });
  return { inner, calls, pauses, fetch };
}

Deno.test("page docs: a lagging document host's 404 fails the page, never its item at once", async () => {
  const { calls, pauses, fetch } = await answering((id) =>
    id === "b" ? Promise.resolve(LAGGING) : null
  );
  await assert.rejects(fetch({ pageFailures: 0 }), /kept failing.*"b".*may lag the registry/);
  await assert.rejects(
    fetch({ pageFailures: 1 }),
    TransientError,
    "nor on the page's second attempt",
  );
  assert.deepEqual(pauses, [], "a failing page is retried later: no pause of its own");
  calls.clear();
  // On the attempt that records: its second round asks again after each pause, then records.
  const items = await fetch({ pageFailures: 2 });
  assert.deepEqual(pauses, DOCUMENT_RETRY.behindFeedPausesMs);
  assert.equal(calls.get("b"), 2 + DOCUMENT_RETRY.behindFeedPausesMs.length);
  assert.deepEqual(items[1].doc, {
    kind: "error",
    status: 404,
    reason: "gave up: not found on the document host (it may lag the registry)",
  });
  assert.deepEqual(items.map((it) => it.doc?.kind), ["doc", "error", "doc", "doc"]);
});

Deno.test("page docs: a row published a moment ago on the page's recording attempt is waited for", async () => {
  // "c" is new on the relisted page: its first two answers are the lagging host's, then it is there.
  const { calls, pauses, fetch } = await answering((id, n) =>
    id === "c" && n <= 2 ? Promise.resolve(LAGGING) : null
  );
  const items = await fetch({ pageFailures: 2 });
  assert.deepEqual(items.map((it) => it.doc?.kind), ["doc", "doc", "doc", "doc"]);
  assert.equal(items[2].doc?.kind === "doc" && JSON.parse(items[2].doc.json)._id, "c");
  assert.equal(calls.get("c"), 3);
  assert.deepEqual(pauses, [DOCUMENT_RETRY.behindFeedPausesMs[0]]);
});

Deno.test("page docs: a document that kept failing for the network is not paused for", async () => {
  const { calls, pauses, fetch } = await answering((id) =>
    id === "d" ? Promise.reject(new TransientError("HTTP 503", { status: 503 })) : null
  );
  const items = await fetch({ pageFailures: 2 });
  assert.equal(items[3].doc?.kind, "error");
  assert.equal(calls.get("d"), 2, "its first round and its second");
  assert.deepEqual(pauses, []);
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
      clock: SYSTEM_CLOCK,
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
