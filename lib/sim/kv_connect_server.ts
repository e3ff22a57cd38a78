/**
 * A KV Connect server in memory, for tests: what `denokv serve` speaks (the published protocol,
 * `denokv/proto/kv-connect.md` and `schema/datapath.proto`, version 2), so that Deno's own remote KV
 * client — the code users run against denokv or Deploy's KV — can be driven on 127.0.0.1 (denokv
 * itself is a binary these machines cannot download).
 *
 * Keys and values stay opaque bytes: the client encodes them, and byte order is key order. Reads are
 * strongly consistent; an atomic write checks versionstamps (an empty one: the key is absent),
 * applies set, delete and the LE64 sum/min/max, and honours expiry. Queues are refused (denokv has
 * none either), as is watching.
 *
 * @module
 */
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";

/** A running KV Connect server. */
export interface KvConnectServer {
  /** The URL to give `Deno.openKv`. */
  url: string;
  /** Keys stored now (expired ones not counted). */
  size(): number;
  /** Stops serving. */
  close(): Promise<void>;
}

interface Entry {
  key: Uint8Array;
  value: Uint8Array;
  encoding: number;
  versionstamp: Uint8Array;
  expireAtMs: number;
}

const M_SET = 1, M_DELETE = 2, M_SUM = 3, M_MAX = 4, M_MIN = 5;
const VE_LE64 = 2;
const AW_SUCCESS = 1, AW_CHECK_FAILURE = 2;
const SR_SUCCESS = 1;

/**
 * Starts a server on 127.0.0.1 that accepts `accessToken` (a metadata exchange with another token
 * is a 401 with a plain-text reason, as the protocol asks).
 */
export function startKvConnectServer(
  accessToken: string,
  options: { port?: number; clock?: Clock } = {},
): KvConnectServer {
  const clock = options.clock ?? SYSTEM_CLOCK;
  const now = () => clock.now();
  const store = new KvMemory(now);
  const databaseId = crypto.randomUUID();
  const dataToken = crypto.randomUUID();
  const text = (body: string, status: number) =>
    new Response(body, { status, headers: { "content-type": "text/plain" } });
  const protobuf = (bytes: Uint8Array) =>
    new Response(bytes as BodyInit, { headers: { "content-type": "application/x-protobuf" } });
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: options.port ?? 0, onListen: () => {} },
    async (req) => {
      const path = new URL(req.url).pathname;
      const auth = req.headers.get("authorization") ?? "";
      if (req.method !== "POST") return text("method not allowed", 405);
      if (path === "/") {
        if (auth !== `Bearer ${accessToken}`) return text("invalid access token", 401);
        const body = await req.json().catch(() => ({}));
        const versions: number[] = body?.supportedVersions ?? [1];
        if (!versions.includes(2)) return text("protocol version 2 is required", 400);
        return Response.json({
          version: 2,
          databaseId,
          endpoints: [{ url: "/v2", consistency: "strong" }],
          token: dataToken,
          expiresAt: new Date(now() + 3_600_000).toISOString(),
        });
      }
      if (auth !== `Bearer ${dataToken}`) return text("invalid data token", 401);
      if (req.headers.get("x-denokv-database-id") !== databaseId) {
        return text("unknown database", 400);
      }
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await req.arrayBuffer());
      } catch {
        return text("the request body was cut (the client went away)", 400);
      }
      try {
        if (path === "/v2/snapshot_read") return protobuf(store.snapshotRead(bytes));
        if (path === "/v2/atomic_write") return protobuf(store.atomicWrite(bytes));
      } catch (err) {
        return text((err as Error).message, 400);
      }
      return text(`not supported here: ${path}`, 404);
    },
  );
  return {
    url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}`,
    size: () => store.size(),
    close: () => server.shutdown(),
  };
}

/** The store: entries sorted by key bytes. */
class KvMemory {
  #entries: Entry[] = [];
  #version = 0n;
  #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  size(): number {
    return this.#entries.filter((e) => this.#live(e)).length;
  }

  #live(e: Entry): boolean {
    return e.expireAtMs === 0 || e.expireAtMs > this.#now();
  }

  /** The index of the first entry whose key is >= `key`. */
  #lowerBound(key: Uint8Array): number {
    let lo = 0, hi = this.#entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareBytes(this.#entries[mid].key, key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  #get(key: Uint8Array): Entry | undefined {
    const e = this.#entries[this.#lowerBound(key)];
    return e && compareBytes(e.key, key) === 0 && this.#live(e) ? e : undefined;
  }

  snapshotRead(body: Uint8Array): Uint8Array {
    const out = new ProtoWriter();
    for (const range of readFields(body).filter((f) => f.field === 1)) {
      const r = readFields(range.bytes!);
      const start = fieldBytes(r, 1);
      const end = fieldBytes(r, 2);
      const limit = fieldNumber(r, 3);
      const reverse = fieldNumber(r, 4) === 1;
      const from = this.#lowerBound(start);
      const to = this.#lowerBound(end);
      const hits = this.#entries.slice(from, Math.max(from, to)).filter((e) => this.#live(e));
      const picked = reverse ? hits.reverse().slice(0, limit) : hits.slice(0, limit);
      const rangeOut = new ProtoWriter();
      for (const e of picked) {
        rangeOut.message(
          1,
          new ProtoWriter().bytes(1, e.key).bytes(2, e.value).varint(3, e.encoding)
            .bytes(4, e.versionstamp),
        );
      }
      out.message(1, rangeOut);
    }
    return out.varint(4, 1).varint(8, SR_SUCCESS).finish();
  }

  atomicWrite(body: Uint8Array): Uint8Array {
    const fields = readFields(body);
    if (fields.some((f) => f.field === 3)) throw new Error("queues are not supported");
    const failed: number[] = [];
    fields.filter((f) => f.field === 1).forEach((check, i) => {
      const c = readFields(check.bytes!);
      const want = fieldBytes(c, 2);
      const have = this.#get(fieldBytes(c, 1));
      const ok = want.length === 0 ? !have : have !== undefined &&
        compareBytes(have.versionstamp, want) === 0;
      if (!ok) failed.push(i);
    });
    if (failed.length > 0) {
      const out = new ProtoWriter().varint(1, AW_CHECK_FAILURE);
      for (const i of failed) out.varint(4, i);
      return out.finish();
    }
    const versionstamp = new Uint8Array(10);
    new DataView(versionstamp.buffer).setBigUint64(0, ++this.#version);
    for (const m of fields.filter((f) => f.field === 2)) {
      this.#mutate(readFields(m.bytes!), versionstamp);
    }
    return new ProtoWriter().varint(1, AW_SUCCESS).bytes(2, versionstamp).finish();
  }

  #mutate(m: Field[], versionstamp: Uint8Array): void {
    const key = fieldBytes(m, 1);
    const type = fieldNumber(m, 3);
    const valueFields = readFields(fieldBytes(m, 2));
    let value = fieldBytes(valueFields, 1);
    const encoding = fieldNumber(valueFields, 2);
    const at = this.#lowerBound(key);
    const found = this.#entries[at] && compareBytes(this.#entries[at].key, key) === 0;
    if (type === M_DELETE) {
      if (found) this.#entries.splice(at, 1);
      return;
    }
    if (type === M_SUM || type === M_MIN || type === M_MAX) {
      if (encoding !== VE_LE64) throw new Error("sum, min and max need a KvU64");
      const old = found && this.#live(this.#entries[at]) ? this.#entries[at] : undefined;
      if (old && old.encoding !== VE_LE64) throw new Error("the stored value is not a KvU64");
      const a = old ? le64(old.value) : undefined;
      const b = le64(value);
      const next = a === undefined
        ? b
        : type === M_SUM
        ? (a + b) & 0xffff_ffff_ffff_ffffn
        : type === M_MIN
        ? (a < b ? a : b)
        : (a > b ? a : b);
      value = new Uint8Array(8);
      new DataView(value.buffer).setBigUint64(0, next, true);
    } else if (type !== M_SET) {
      throw new Error(`mutation type ${type} is not supported`);
    }
    const entry: Entry = {
      key,
      value,
      encoding,
      versionstamp,
      expireAtMs: fieldNumber(m, 4),
    };
    if (found) this.#entries[at] = entry;
    else this.#entries.splice(at, 0, entry);
  }
}

function le64(bytes: Uint8Array): bigint {
  return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/** One protobuf field: a varint's value, or a length-delimited field's bytes. */
interface Field {
  field: number;
  value: number;
  bytes?: Uint8Array;
}

function readVarint(buf: Uint8Array, at: { i: number }): number {
  let value = 0, scale = 1;
  for (;;) {
    if (at.i >= buf.length) throw new Error("truncated protobuf varint");
    const b = buf[at.i++];
    value += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) return value;
    scale *= 128;
  }
}

/** The fields of one protobuf message (wire types 0, 1, 2 and 5). */
function readFields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  const at = { i: 0 };
  while (at.i < buf.length) {
    const tag = readVarint(buf, at);
    const field = Math.floor(tag / 8), wire = tag % 8;
    if (wire === 0) out.push({ field, value: readVarint(buf, at) });
    else if (wire === 2) {
      const n = readVarint(buf, at);
      if (at.i + n > buf.length) throw new Error("truncated protobuf field");
      out.push({ field, value: n, bytes: buf.subarray(at.i, at.i + n) });
      at.i += n;
    } else if (wire === 1 || wire === 5) at.i += wire === 1 ? 8 : 4;
    else throw new Error(`protobuf wire type ${wire} is not supported`);
  }
  return out;
}

function fieldBytes(fields: Field[], n: number): Uint8Array {
  return fields.find((f) => f.field === n)?.bytes ?? new Uint8Array();
}

function fieldNumber(fields: Field[], n: number): number {
  return fields.find((f) => f.field === n)?.value ?? 0;
}

/** Writes one protobuf message. */
class ProtoWriter {
  #parts: number[] = [];

  #varint(v: number): void {
    while (v >= 0x80) {
      this.#parts.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.#parts.push(v);
  }

  varint(field: number, v: number): this {
    this.#varint(field * 8);
    this.#varint(v);
    return this;
  }

  bytes(field: number, b: Uint8Array): this {
    this.#varint(field * 8 + 2);
    this.#varint(b.length);
    for (const x of b) this.#parts.push(x);
    return this;
  }

  message(field: number, m: ProtoWriter): this {
    return this.bytes(field, m.finish());
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.#parts);
  }
}
