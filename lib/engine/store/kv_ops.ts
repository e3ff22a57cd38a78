/**
 * KV operations as the store runs them: a locked file (several processes) retried a bounded number
 * of times, a full disk turned into a {@linkcode StorageError}, one read-modify-write loop with
 * bounded retries for every single-record update, reads of any number of keys within `getMany`'s
 * limit, and one typed view of a maybe-absent entry.
 *
 * @module
 */
import { SYSTEM_CLOCK } from "../../base/clock.ts";
import { backoff, type BackoffPolicy, KV_LOCKED_RETRY } from "../../base/retry_policy.ts";
import { ConflictError, StorageError } from "../../base/errors.ts";
import { kvFailureKind, type OpPlan } from "./kv_limits.ts";

/** The pause before a locked file is tried again. */
const LOCKED_PAUSE: BackoffPolicy = {
  firstMs: KV_LOCKED_RETRY.pauseStepMs,
  maxMs: KV_LOCKED_RETRY.maxPauseMs,
  growth: "linear",
  jitter: "half",
};

/**
 * Runs a KV operation: `database is locked` (several processes, one file) is retried a bounded
 * number of times; a full disk becomes a {@linkcode StorageError}; anything else is rethrown.
 */
export async function kvOp<T>(fn: () => Promise<T>, options: { maxAttempts?: number } = {}) {
  const max = options.maxAttempts ?? KV_LOCKED_RETRY.maxAttempts;
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const kind = kvFailureKind(err);
      if (kind === "storage") {
        throw new StorageError(`KV: ${(err as Error).message}`, { cause: err });
      }
      if (kind !== "locked" || attempt >= max) throw err;
      // Another process holds the file's lock in real time: waited on the system's clock, never
      // a test's.
      await SYSTEM_CLOCK.sleep(backoff(LOCKED_PAUSE, attempt));
    }
  }
}

/** Keys one `getMany` reads at most (KV's limit). */
const GET_MANY = 10;

/**
 * The entries at `keys`, in their order, however many: read {@linkcode GET_MANY} a `getMany`, the
 * reads at once (each through {@linkcode kvOp}).
 */
export async function getEntries<T>(
  kv: Deno.Kv,
  keys: readonly Deno.KvKey[],
): Promise<Deno.KvEntryMaybe<T>[]> {
  const reads: Promise<Deno.KvEntryMaybe<T>[]>[] = [];
  for (let i = 0; i < keys.length; i += GET_MANY) {
    const slice = keys.slice(i, i + GET_MANY);
    reads.push(kvOp(() => kv.getMany<T[]>(slice)));
  }
  return (await Promise.all(reads)).flat();
}

/**
 * Commits `plan` as one atomic op (through {@linkcode kvOp}). `{ ok: false }` (a check failed:
 * nothing was written) is the caller's to handle.
 */
export async function commitPlan(
  kv: Deno.Kv,
  plan: OpPlan,
): Promise<Deno.KvCommitResult | Deno.KvCommitError> {
  return await kvOp(() => plan.applyTo(kv.atomic()).commit());
}

/**
 * Read-modify-write of one record with bounded retries: the one loop for every such update.
 * `change` gets the record (null when absent) and returns the next one, or `undefined` to leave it
 * as it is (the entry as read is returned then). Another writer between the read and the write
 * makes it read and decide again, at most `maxAttempts` times; `change` may throw to give up.
 * @throws ConflictError when every attempt met another writer.
 */
export async function updateRecord<T>(
  kv: Deno.Kv,
  key: Deno.KvKey,
  change: (current: T | null) => T | undefined,
  options: { maxAttempts?: number } = {},
): Promise<Deno.KvEntryMaybe<T>> {
  const max = options.maxAttempts ?? 20;
  for (let attempt = 0; attempt < max; attempt++) {
    const entry = await kvOp(() => kv.get<T>(key));
    const next = change(entry.value);
    if (next === undefined) return entry;
    const res = await kvOp(() => kv.atomic().check(entry).set(key, next).commit());
    if (res.ok) return { key, value: next, versionstamp: res.versionstamp };
  }
  throw new ConflictError(`too many concurrent updates of ${JSON.stringify(key)}`);
}

/** The entry when its key holds a value, else null (one typed view of `Deno.KvEntryMaybe`). */
export function present<T>(entry: Deno.KvEntryMaybe<T>): Deno.KvEntry<T> | null {
  return entry.versionstamp === null ? null : entry as Deno.KvEntry<T>;
}
