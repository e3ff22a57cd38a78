/**
 * Leases, and whether their owners are alive: the one place that decides whether a lease (on a
 * shard, on a crawl's planning, on a crawl's change feed) is held.
 *
 * A lease names its owner and an expiry (`untilMs`, on the holder's clock, renewed while it works).
 * Every process that works beats a heartbeat in KV (`ProcessBeat`, about once a second); an owner
 * name carries its process's id. A lease is held while it has not expired AND its owner's process
 * beat within {@linkcode STALE_MS}, so a killed process's work is taken over within seconds, under
 * any permissions and across machines (no `/proc`), and a process that stops cleanly deletes its
 * beat, which frees its leases at once. Owner names of another shape (tests, earlier versions)
 * have no process: their leases simply expire.
 *
 * Clocks: expiries and beats are compared with the reader's clock, so processes on several
 * machines need clocks within a second or two of each other (NTP).
 *
 * @module
 */
import type { Clock } from "../../base/clock.ts";
import { keys } from "./keys.ts";
import { kvOp, present, updateRecord } from "./kv_ops.ts";
import type { Lease } from "./records.ts";

/** How often a process beats, in milliseconds. */
export const BEAT_EVERY_MS = 1_000;

/** A process whose last beat is older than this is dead, in milliseconds. */
export const STALE_MS = 3_000;

/**
 * How long a lease holds unless its holder renews it, in milliseconds: shards (each commit and
 * heartbeat renews), a crawl's change feed, its finishing. A live holder's lease is renewed long
 * before; a dead one's is free once its process's beat is stale, so this bounds only what an
 * owner without a process (another version, a test) blocks.
 */
export const LEASE_MS = 30_000;

/** A process's heartbeat, as stored. */
export interface Beat {
  /** When it beat last, epoch ms (its clock). */
  atMs: number;
  /** What it is (`crawl`, `worker`, `serve`), for status. */
  label: string;
}

/** Which processes are alive, as read at one moment. */
export interface Liveness {
  /** True when `owner` names a process that is not alive (stopped, or silent too long). */
  dead(owner: string): boolean;
}

/** Liveness that knows of no process: leases held only by expiry (tests, one-off tools). */
export const EXPIRY_ONLY: Liveness = { dead: () => false };

const OWNER = /@([0-9a-f-]{36})#[0-9a-f]+$/;

/** The process id an owner name carries, or null for names of another shape. */
export function processOf(owner: string): string | null {
  return OWNER.exec(owner)?.[1] ?? null;
}

/** A lease for `owner` from `nowMs`, for `leaseMs`. */
export function leaseFor(owner: string, nowMs: number, leaseMs: number): Lease {
  return { owner, untilMs: nowMs + leaseMs };
}

/**
 * True when `lease` is held by someone other than `owner` (when given): not expired at `nowMs`,
 * and its owner not dead by `liveness`.
 */
export function leaseHeld(
  lease: Lease | null | undefined,
  nowMs: number,
  options: { liveness?: Liveness; owner?: string } = {},
): boolean {
  if (!lease || lease.owner === options.owner) return false;
  return lease.untilMs > nowMs && !(options.liveness ?? EXPIRY_ONLY).dead(lease.owner);
}

/**
 * Reads every process's beat once: the liveness of all owners at `nowMs` (a few keys, one list).
 */
export async function readLiveness(
  kv: Deno.Kv,
  nowMs: number,
  options: { staleMs?: number } = {},
): Promise<Liveness> {
  const staleMs = options.staleMs ?? STALE_MS;
  const alive = new Set<string>();
  await kvOp(async () => {
    for await (const e of kv.list<Beat>({ prefix: keys.beats() })) {
      if (nowMs - e.value.atMs < staleMs) alive.add(e.key[1] as string);
    }
  });
  return {
    dead: (owner) => {
      const p = processOf(owner);
      return p !== null && !alive.has(p);
    },
  };
}

/**
 * Takes, or renews, the lease on the record at `key` for `owner` in one guarded update of that
 * record, unless another owner holds it (alive, unexpired: {@linkcode leaseHeld}) or `blocked`
 * says the record may not be taken now. `record` builds what is written from the current record
 * and the new lease. Returns the record as written, or null when it was not taken.
 */
export async function takeLease<T extends { lease?: Lease | null }>(
  kv: Deno.Kv,
  key: Deno.KvKey,
  o: {
    owner: string;
    nowMs: number;
    leaseMs: number;
    record: (current: T | null, lease: Lease) => T;
    blocked?: (current: T | null) => boolean;
  },
): Promise<Deno.KvEntry<T> | null> {
  const liveness = await readLiveness(kv, o.nowMs);
  let ours = false;
  const entry = await updateRecord<T>(kv, key, (cur) => {
    ours = !leaseHeld(cur?.lease, o.nowMs, { liveness, owner: o.owner }) &&
      !(o.blocked?.(cur) ?? false);
    return ours ? o.record(cur, leaseFor(o.owner, o.nowMs, o.leaseMs)) : undefined;
  });
  return ours ? present(entry) : null;
}

/**
 * Gives the lease on the record at `key` back if `owner` still holds it, so that nobody waits for
 * it to expire, in one guarded update of that record that also writes `also` (what ends with the
 * lease). Returns the record as it stands after.
 */
export async function releaseLease<T extends { lease?: Lease | null }>(
  kv: Deno.Kv,
  key: Deno.KvKey,
  owner: string,
  o: { also?: Partial<T>; maxAttempts?: number } = {},
): Promise<Deno.KvEntryMaybe<T>> {
  return await updateRecord<T>(
    kv,
    key,
    (cur) => cur?.lease?.owner === owner ? { ...cur, ...o.also, lease: null } : undefined,
    { maxAttempts: o.maxAttempts },
  );
}

/**
 * This process's heartbeat (see the module comment). It beats only while something of the process
 * works: `acquire()` (a worker loop, a queue message, a whole local crawl) writes the first beat
 * before any lease is taken, then one every {@linkcode BEAT_EVERY_MS}; when the last holder lets
 * go, or on `stop()`, the beat is deleted, which frees the process's leases at once. An idle
 * server writes nothing. Owner names for its workers come from `owner(label)`.
 */
export class ProcessBeat {
  /** This process's id (a UUID), carried by its owner names. */
  readonly id: string = crypto.randomUUID();
  #kv: Deno.Kv;
  #label: string;
  #clock: Clock;
  #everyMs: number;
  #holders = 0;
  #stopBeats: (() => void) | undefined;
  #beating: Promise<unknown> = Promise.resolve();
  #change: Promise<void> = Promise.resolve();

  /**
   * A heartbeat of this process in `kv`, labelled `label`, every `everyMs` (@default
   * {@linkcode BEAT_EVERY_MS}) of `clock` (the environment's).
   */
  constructor(
    kv: Deno.Kv,
    options: { label: string; clock: Clock; everyMs?: number },
  ) {
    this.#kv = kv;
    this.#label = options.label;
    this.#clock = options.clock;
    this.#everyMs = options.everyMs ?? BEAT_EVERY_MS;
  }

  /** An owner name for one worker of this process: `<label>@<process id>#<random>`. */
  owner(label: string): string {
    const worker = crypto.getRandomValues(new Uint32Array(1))[0].toString(16);
    return `${label}@${this.id}#${worker}`;
  }

  /**
   * Holds the beat (starting it, and waiting for the first beat, when nobody held it); the
   * returned function lets go (idempotent).
   */
  async acquire(): Promise<() => Promise<void>> {
    if (++this.#holders === 1) this.#change = this.#change.then(() => this.#start());
    await this.#change;
    let held = true;
    return async () => {
      if (!held) return;
      held = false;
      // After `stop()` the count is 0 already: letting go then changes nothing.
      if (this.#holders > 0 && --this.#holders === 0) {
        this.#change = this.#change.then(() => this.#halt());
        await this.#change;
      }
    };
  }

  async #start(): Promise<void> {
    if (this.#stopBeats !== undefined || this.#holders === 0) return;
    await this.#beat();
    this.#stopBeats = this.#clock.every(this.#everyMs, () => {
      // A missed beat is made up by the next.
      return this.#beating = this.#beat().catch(() => {});
    });
  }

  #beat(): Promise<unknown> {
    const beat: Beat = { atMs: this.#clock.now(), label: this.#label };
    // Expiry only tidies up after killed processes; liveness is judged by `atMs`.
    return kvOp(() => this.#kv.set(keys.beat(this.id), beat, { expireIn: 60_000 }));
  }

  async #halt(): Promise<void> {
    if (this.#holders > 0) return;
    this.#stopBeats?.();
    this.#stopBeats = undefined;
    await this.#beating;
    await kvOp(() => this.#kv.delete(keys.beat(this.id))).catch(() => {});
  }

  /** Stops beating and deletes the beat whoever holds it: the process's leases are free at once. */
  async stop(): Promise<void> {
    this.#holders = 0;
    this.#change = this.#change.then(() => this.#halt());
    await this.#change;
  }
}
