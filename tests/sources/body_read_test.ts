/**
 * Reading a body within its bounds (`lib/sources/http/body_read.ts`): a compressed body is inflated
 * a few KB of wire bytes at a time, so its cap is looked at before a bomb has grown, however large
 * the chunks the socket hands over.
 */
import assert from "node:assert/strict";
import { ByteBudget } from "../../lib/base/byte_budget.ts";
import { largeAnswers, readCapped, TooLargeError } from "../../lib/sources/http/body_read.ts";
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
