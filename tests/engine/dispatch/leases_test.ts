import assert from "node:assert/strict";
import { SYSTEM_CLOCK } from "../../../lib/base/clock.ts";
import { FakeClock } from "../../fake_clock.ts";
import {
  EXPIRY_ONLY,
  leaseFor,
  leaseHeld,
  ProcessBeat,
  processOf,
  readLiveness,
  STALE_MS,
} from "../../../lib/engine/store/leases.ts";
import { keys } from "../../../lib/engine/store/mod.ts";

Deno.test("leases: held until expiry, never against its own owner, and never by a dead process", async () => {
  using kv = await Deno.openKv(":memory:");
  const beat = new ProcessBeat(kv, { clock: SYSTEM_CLOCK, label: "t" });
  const owner = beat.owner("w");
  assert.equal(processOf(owner), beat.id);
  assert.equal(processOf("test-owner"), null, "names of another shape have no process");
  const lease = leaseFor(owner, 1_000, 30_000);
  assert.deepEqual(lease, { owner, untilMs: 31_000 });
  assert.equal(leaseHeld(lease, 30_999), true);
  assert.equal(leaseHeld(lease, 31_000), false, "expired");
  assert.equal(leaseHeld(lease, 2_000, { owner }), false, "its own owner may take it again");
  assert.equal(leaseHeld(null, 2_000), false);
  // A process that never beat (or stopped) holds nothing, however long its lease.
  const now = Date.now();
  const silent = leaseFor(owner, now, 30_000);
  assert.equal(leaseHeld(silent, now, { liveness: await readLiveness(kv, now) }), false);
  assert.equal(leaseHeld(silent, now, { liveness: EXPIRY_ONLY }), true);
  // Beating: held; a beat older than STALE_MS: dead; `test-owner` style names: by expiry only.
  const release = await beat.acquire();
  assert.equal(leaseHeld(silent, now, { liveness: await readLiveness(kv, now) }), true);
  const later = Date.now() + STALE_MS + 1;
  assert.equal(leaseHeld(silent, later, { liveness: await readLiveness(kv, later) }), false);
  const other = leaseFor("test-owner", now, 30_000);
  assert.equal(leaseHeld(other, later, { liveness: await readLiveness(kv, later) }), true);
  await release();
});

Deno.test("leases: the beat runs while held, and is deleted when the last holder lets go or on stop", async () => {
  using kv = await Deno.openKv(":memory:");
  const clock = new FakeClock();
  const beat = new ProcessBeat(kv, { label: "t", everyMs: 20, clock });
  const beatOf = async () => (await kv.get<{ atMs: number }>(keys.beat(beat.id))).value;
  assert.equal(await beatOf(), null, "an idle process writes nothing");
  const a = await beat.acquire();
  const b = await beat.acquire();
  const first = (await beatOf())!.atMs;
  assert.equal(first, clock.now(), "the first beat before any lease is taken");
  await clock.advance(80);
  assert.equal((await beatOf())!.atMs, first + 80, "it beats again, every 20 ms of its clock");
  await a();
  await a(); // idempotent
  assert.notEqual(await beatOf(), null, "still held by b");
  await b();
  assert.equal(await beatOf(), null, "the last holder let go: gone");
  const c = await beat.acquire();
  assert.notEqual(await beatOf(), null, "held again");
  await beat.stop();
  assert.equal(await beatOf(), null, "stopped whoever held it");
  assert.equal(clock.pending, 0, "and its timer with it");
  await c();
});
