/**
 * Deno KV's limits on one atomic operation, and the exact accounting that keeps every operation
 * this project commits inside them by construction (a batch is closed before it would cross any
 * limit, never sent to find out).
 *
 * The numbers and the way they are counted follow Deno's `op_kv_atomic_write` (Deno 2.9): every
 * check key and every mutation key counts once towards the payload; a mutation with a value (a
 * `set`) counts its key again plus its value, and its key towards the total key size; an enqueue
 * counts its payload and 4 bytes per backoff step. Key sizes are of the encoded key (the tuple
 * encoding: a tag byte, the part's bytes with NUL escaped as two bytes, a terminator).
 * `tests/engine/store/kv_limits_test.ts` holds these formulas against KV itself, one byte each side of each limit.
 *
 * @module
 */

/** Largest value, in bytes. */
export const MAX_VALUE_BYTES = 65_536;
/** Largest key written, encoded, in bytes. */
export const MAX_KEY_BYTES = 2_048;
/** Most checks in one atomic op. */
export const MAX_CHECKS = 100;
/** Most mutations in one atomic op. */
export const MAX_MUTATIONS = 1_000;
/** Largest total of keys and values in one atomic op, in bytes. */
export const MAX_PAYLOAD_BYTES = 819_200;
/** Largest total of the keys of `set` mutations in one atomic op, in bytes. */
export const MAX_TOTAL_KEY_BYTES = 81_920;

function zeros(bytes: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0) n++;
  return n;
}

/**
 * Bytes of a string in UTF-8, counted without encoding it (a lone surrogate counts as the 3-byte
 * replacement character it becomes).
 */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) (n += 2, i++);
    else n += 2;
  }
  return n;
}

/** Size of one encoded key part. */
export function keyPartSize(part: Deno.KvKeyPart): number {
  if (typeof part === "string") {
    let size = 2 + utf8Length(part);
    for (let i = 0; i < part.length; i++) if (part.charCodeAt(i) === 0) size++;
    return size;
  }
  if (part instanceof Uint8Array) return 2 + part.length + zeros(part);
  if (typeof part === "number") return 9;
  if (typeof part === "boolean") return 1;
  // bigint: tag, length byte and magnitude bytes; an upper bound is enough here.
  return 3 + Math.ceil(part.toString(16).length / 2);
}

/** Size of an encoded key. */
export function keySize(key: Deno.KvKey): number {
  let n = 0;
  for (const part of key) n += keyPartSize(part);
  return n;
}

/**
 * An upper bound of the stored size of a value: exact for `Uint8Array` (stored raw); for other
 * values twice their JSON text plus some headroom, which bounds V8's serialization of the plain
 * records this project stores (strings are one or two bytes a unit).
 */
export function valueSizeBound(value: unknown): number {
  if (value instanceof Uint8Array) return value.length;
  return 2 * JSON.stringify(value).length + 256;
}

/** What one atomic op holds so far, to decide whether one more mutation fits. */
export class AtomicBudget {
  /** Checks so far. */
  checks = 0;
  /** Mutations so far. */
  mutations = 0;
  /** Payload bytes so far. */
  payload = 0;
  /** Key bytes of `set` mutations so far. */
  setKeys = 0;

  /** Counts a check of a key of `keyBytes`. */
  check(keyBytes: number): this {
    this.checks++;
    this.payload += keyBytes;
    return this;
  }

  /** Counts a `set` of a key of `keyBytes` to a value of `valueBytes`. */
  set(keyBytes: number, valueBytes: number): this {
    this.mutations++;
    this.payload += 2 * keyBytes + valueBytes;
    this.setKeys += keyBytes;
    return this;
  }

  /** Counts a `delete` of a key of `keyBytes`. */
  delete(keyBytes: number): this {
    this.mutations++;
    this.payload += keyBytes;
    return this;
  }

  /** True when one more `set` (or, with `valueBytes` null, a delete) still fits every limit. */
  fitsSet(keyBytes: number, valueBytes: number | null, reserve?: AtomicBudget): boolean {
    const r = reserve ?? EMPTY;
    const isSet = valueBytes !== null;
    return this.checks + r.checks <= MAX_CHECKS &&
      this.mutations + r.mutations + 1 <= MAX_MUTATIONS &&
      this.payload + r.payload + (isSet ? 2 * keyBytes + valueBytes : keyBytes) <=
        MAX_PAYLOAD_BYTES &&
      this.setKeys + r.setKeys + (isSet ? keyBytes : 0) <= MAX_TOTAL_KEY_BYTES;
  }

  /** True when nothing was counted. */
  get empty(): boolean {
    return this.mutations === 0 && this.checks === 0;
  }
}

const EMPTY = new AtomicBudget();

/** What a full disk says. */
const FULL = /disk is full|SQLITE_FULL|No space left|disk quota/i;

/** What a file found damaged says. */
const CORRUPT = /SQLITE_CORRUPT|malformed|not a database/i;

/** What a damaged file, or a failing disk, says. */
const DAMAGED = new RegExp(`disk I/O error|SQLITE_IOERR|${CORRUPT.source}`, "i");

/**
 * Why the store cannot be written: its disk is `full` (nothing written is lost: free space and
 * resume), the file is `damaged` (SQLite found it malformed: what it holds may not all be
 * readable), or it `failed` on I/O, which a disk that filled, a failing disk and a file cut
 * short under the process all say alike.
 */
export function storageCause(err: unknown): "full" | "damaged" | "failed" {
  const msg = err instanceof Error ? err.message : String(err);
  return FULL.test(msg) ? "full" : CORRUPT.test(msg) ? "damaged" : "failed";
}

/**
 * The kind of a KV failure, by what the caller should do: `locked` (another process holds the
 * file; retry), `storage` (the disk is full, or the file or its disk failing: stop; see
 * {@linkcode storageCause}), `limit` (an operation over a KV limit: a bug, never retried), or
 * `other`.
 */
export function kvFailureKind(err: unknown): "locked" | "storage" | "limit" | "other" {
  const msg = err instanceof Error ? err.message : String(err);
  if (/database is locked|SQLITE_BUSY/i.test(msg)) return "locked";
  if (FULL.test(msg) || DAMAGED.test(msg)) return "storage";
  if (/too large|Too many (checks|mutations|keys)|key cannot be empty/i.test(msg)) return "limit";
  return "other";
}

/**
 * The mutations of one atomic op, each counted against KV's limits as it is added (one call for
 * the op and its budget, where they went side by side before): callers ask `fits…` first, or
 * build the whole plan and ask {@linkcode OpPlan.within}. Applied to a real op by `applyTo`.
 */
export class OpPlan {
  /** What the plan holds so far. */
  readonly budget: AtomicBudget = new AtomicBudget();
  #steps: ((op: Deno.AtomicOperation) => void)[] = [];

  /** Checks `entry` (its key unchanged since it was read, or absent). */
  check(entry: { key: Deno.KvKey; versionstamp: string | null }): this {
    this.budget.check(keySize(entry.key));
    this.#steps.push((op) => op.check(entry));
    return this;
  }

  /** Sets `key` to bytes, or to a record (counted by {@linkcode valueSizeBound}). */
  set(key: Deno.KvKey, value: unknown): this {
    this.budget.set(keySize(key), valueSizeBound(value));
    this.#steps.push((op) => op.set(key, value));
    return this;
  }

  /** Deletes `key`. */
  delete(key: Deno.KvKey): this {
    this.budget.delete(keySize(key));
    this.#steps.push((op) => op.delete(key));
    return this;
  }

  /** Adds `n` to the `Deno.KvU64` under `key`. */
  sum(key: Deno.KvKey, n: bigint): this {
    this.budget.set(keySize(key), 8);
    this.#steps.push((op) => op.sum(key, n));
    return this;
  }

  /** True when one more `set` of `value` under `key` still fits, with `reserve` left free. */
  fitsSet(key: Deno.KvKey, value: unknown, reserve?: AtomicBudget): boolean {
    return this.budget.fitsSet(keySize(key), valueSizeBound(value), reserve);
  }

  /** True when everything planned fits one op. */
  get within(): boolean {
    const b = this.budget;
    return b.checks <= MAX_CHECKS && b.mutations <= MAX_MUTATIONS &&
      b.payload <= MAX_PAYLOAD_BYTES && b.setKeys <= MAX_TOTAL_KEY_BYTES;
  }

  /** Adds the planned mutations to `op`. */
  applyTo(op: Deno.AtomicOperation): Deno.AtomicOperation {
    for (const step of this.#steps) step(op);
    return op;
  }
}
