/**
 * Reading a body within its bounds (`lib/sources/http/body_read.ts`): a compressed body is inflated
 * a few KB of wire bytes at a time, so its cap is looked at before a bomb has grown, however large
 * the chunks the socket hands over.
 */
import assert from "node:assert/strict";
import { ByteBudget } from "../../lib/base/byte_budget.ts";
import {
  largeAnswers,
  QUICK_BODY_BYTES,
  readCapped,
  SLOW_BODY,
  SlowBodyError,
  TooLargeError,
} from "../../lib/sources/http/body_read.ts";
import { gzipBomb } from "../../lib/sim/registry/registry_hostile.ts";

/** An answer whose whole body comes as one chunk (as a loaded socket may hand it over). */
function oneChunk(bytes: Uint8Array, encoding: string): Response {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(bytes);
      c.close();
    },
  });
  return new Response(body, { headers: { "content-encoding": encoding } });
}

const bounds = (maxBytes: number) => ({
  url: "http://127.0.0.1:1/doc",
  maxBytes,
  large: largeAnswers(),
  held: [],
  bytes: new ByteBudget(64 * 1024 * 1024),
});

Deno.test("body read: a gzip bomb handed over in one 1.4 MB chunk is cut at its cap before it inflates (not 1 GiB at once)", async () => {
  const bomb = await gzipBomb(1024 ** 3);
  const before = Deno.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => peak = Math.max(peak, Deno.memoryUsage().rss), 2);
  try {
    await assert.rejects(
      readCapped(oneChunk(bomb, "gzip"), bounds(32 * 1024 * 1024)),
      TooLargeError,
    );
  } finally {
    clearInterval(sampler);
  }
  peak = Math.max(peak, Deno.memoryUsage().rss);
  const grewMiB = (peak - before) / 2 ** 20;
  // Inflated whole, the chunk alone is 1,024 MiB; in steps, the cap (32 MiB) and one step.
  assert.ok(grewMiB < 256, `resident memory grew ${grewMiB.toFixed(0)} MiB`);
});

Deno.test("body read: a gzip and a deflate body handed over in one chunk read back byte for byte", async () => {
  const text = JSON.stringify({
    _id: "x",
    versions: Array.from({ length: 20_000 }, (_, i) => ({ v: `1.0.${i}`, d: "é".repeat(i % 7) })),
  });
  const plain = new TextEncoder().encode(text);
  for (const encoding of ["gzip", "deflate"] as const) {
    const packed = new Uint8Array(
      await new Response(
        new Blob([plain]).stream().pipeThrough(
          new CompressionStream(encoding) as unknown as ReadableWritablePair<
            Uint8Array,
            Uint8Array
          >,
        ),
      ).arrayBuffer(),
    );
    assert.ok(packed.length > 3 * 4096, "spans several steps");
    const read = await readCapped(oneChunk(packed, encoding), bounds(plain.length));
    assert.equal(read.length, plain.length, encoding);
    assert.deepEqual(read, plain, encoding);
  }
});

Deno.test("body read: a body without a length, handed over as 4 KiB views of 64 KiB buffers (as Deno 2.5 does), holds its bytes, not sixteen times them", async () => {
  let sent = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(c) {
      if (sent >= 40 * 1024 * 1024) return c.close();
      const big = new Uint8Array(64 * 1024).fill(32);
      c.enqueue(big.subarray(0, 4096));
      sent += 4096;
    },
  });
  const before = Deno.memoryUsage().rss;
  let peak = before;
  const sampler = setInterval(() => peak = Math.max(peak, Deno.memoryUsage().rss), 2);
  try {
    // 32 MiB held before the cap is passed: as views, 512 MiB of buffers.
    await assert.rejects(readCapped(new Response(body), bounds(32 * 1024 * 1024)), TooLargeError);
  } finally {
    clearInterval(sampler);
  }
  const grewMiB = (Math.max(peak, Deno.memoryUsage().rss) - before) / 2 ** 20;
  assert.ok(grewMiB < 256, `resident memory grew ${grewMiB.toFixed(0)} MiB`);
});

/**
 * A server on 127.0.0.1 answering each request with `bytes` under their declared length, the
 * second half sent `pauseMs` after the first; and a fetch of it whose controller `readCapped` may
 * stop, as the HTTP client's attempt gives it.
 */
async function declared(bytes: Uint8Array, pauseMs: number) {
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const server = Deno.serve({ port: 0, hostname: "127.0.0.1", onListen() {} }, () => {
    const half = bytes.length >> 1;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes.subarray(0, half));
        const t = setTimeout(() => {
          timers.delete(t);
          try {
            c.enqueue(bytes.subarray(half));
            c.close();
          } catch { /* the reader went away */ }
        }, pauseMs);
        timers.add(t);
      },
    });
    return new Response(body, { headers: { "content-length": String(bytes.length) } });
  });
  const stop = new AbortController();
  const res = await fetch(`http://127.0.0.1:${server.addr.port}/doc`, { signal: stop.signal });
  const held: (() => void)[] = [];
  return {
    res,
    held,
    stopped: () => stop.signal.aborted,
    bounds: {
      ...bounds(1024 * 1024),
      held,
      abort: (reason: Error) => stop.abort(reason),
    },
    async close() {
      timers.forEach(clearTimeout);
      await server.shutdown();
    },
  };
}

Deno.test("body read: a short body with a declared length is read in one go, byte for byte, its bytes taken from the budget first", async () => {
  const bytes = new Uint8Array(QUICK_BODY_BYTES).map((_, i) => i % 251);
  const d = await declared(bytes, 0);
  try {
    const budget = d.bounds.bytes;
    const read = await readCapped(d.res, d.bounds);
    assert.deepEqual(read, bytes);
    assert.equal(budget.held, QUICK_BODY_BYTES, "taken before it was read, until given back");
    assert.equal(d.held.length, 1);
    d.held.splice(0).forEach((give) => give());
    assert.equal(budget.held, 0);
  } finally {
    await d.close();
  }
});

Deno.test("body read: a short body with a declared length that stops halfway is cut at the slow-body deadline, its request stopped", async () => {
  const d = await declared(
    new TextEncoder().encode(JSON.stringify({ _id: "x", pad: "y".repeat(500) })),
    60_000,
  );
  try {
    const started = performance.now();
    await assert.rejects(readCapped(d.res, d.bounds), SlowBodyError);
    assert.ok(d.stopped(), "its request was stopped");
    const tookMs = performance.now() - started;
    // Not a wall-clock bound: cut by its own deadline (graceMs), long before the second half.
    assert.ok(tookMs >= SLOW_BODY.graceMs - 50 && tookMs < 60_000, `cut after ${tookMs} ms`);
  } finally {
    await d.close();
  }
});
