/**
 * The followers `follow_bench.ts` measures: rankcrawl's CLI and `serve` (processes of their own,
 * their positions read from their KV files), and the naive follower a user would write instead.
 * Each ends by comparing its copy with the registry.
 *
 * @module
 */
import { mapPool } from "../base/pool.ts";
import { type FollowState, getFeed, getFollow, listCrawls } from "../engine/store/mod.ts";
import { timeTask } from "./harness.ts";

/** The naive follower: `_changes` every second, each changed document GET, 64 in flight. */
export class NaiveFollower {
  seq: number;
  mirror = new Map<string, string>();
  #stop = false;
  #done: Promise<void> | null = null;
  requests = 0;

  /** Starts from `bootstrap` (the registry as it stood at `since`, which it would have copied). */
  constructor(
    readonly url: string,
    readonly docsUrl: string,
    since: number,
    bootstrap: Map<string, string>,
  ) {
    this.seq = since;
    this.mirror = new Map(bootstrap);
  }

  start(): void {
    this.#done = this.#loop();
  }

  async stop(): Promise<void> {
    this.#stop = true;
    await this.#done;
  }

  async #loop(): Promise<void> {
    while (!this.#stop) {
      const t = performance.now();
      for (;;) {
        const res = await fetch(`${this.url}/_changes?since=${this.seq}&limit=1000`);
        this.requests++;
        const body = await res.json() as {
          results: { id: string; deleted?: boolean; changes: { rev: string }[] }[];
          last_seq: number | string;
        };
        await mapPool(body.results, async (r) => {
          if (r.deleted) return void this.mirror.delete(r.id);
          const doc = await fetch(`${this.docsUrl}/${encodeURIComponent(r.id)}`);
          this.requests++;
          if (doc.ok) this.mirror.set(r.id, (await doc.json())._rev);
          else await doc.body?.cancel();
        }, { concurrency: 64 });
        this.seq = Number(body.last_seq);
        if (body.results.length < 1000) break;
      }
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - t))));
    }
  }
}

/** A follower under measure: where it stands, and how it ends (its copy compared). */
export interface Follower {
  label: string;
  seq(): Promise<number>;
  /** Stops it; "yes" when its copy equals `state`, else what differs. */
  finish(state: Map<string, string>): Promise<string>;
  /** Its process (for memory), if it has one. */
  pid?: number;
  /** Its follow state at the end, if it is rankcrawl. */
  follow?: () => Promise<FollowState | null>;
}

/** A task as a child process whose output is collected. */
function spawnOut(script: string, args: string[], env: Record<string, string> = {}) {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", script, ...args],
    env: { NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const o = { child, out: "", drained: Promise.resolve() as Promise<unknown> };
  o.drained = Promise.all([child.stdout, child.stderr].map(async (st) => {
    for await (const t of st.pipeThrough(new TextDecoderStream())) o.out += t;
  }));
  return o;
}

/** Waits until `ok()`, or throws after `ms`. */
export async function until(ok: () => boolean | Promise<boolean>, ms: number, what: string) {
  const deadline = Date.now() + ms;
  while (!await ok()) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Reading a rankcrawl KV file another process writes: its crawl's sequence and follow state. */
async function kvReader(path: string, id?: string) {
  const kv = await Deno.openKv(path);
  const crawlId = id ?? (await listCrawls(kv))[0].id;
  return {
    kv,
    seq: async () => Number((await getFeed(kv, crawlId)).value?.seq ?? 0),
    follow: async () => (await getFollow(kv, crawlId)).value,
  };
}

/** `deno task crawl --follow --docs` on its own KV file, started and done. */
export async function cliFollower(
  reg: { url: string; docsUrl?: string },
  dir: string,
): Promise<Follower> {
  const kvPath = `${dir}/cli.kv`;
  const p = spawnOut("tasks/crawl.ts", [
    ...["--source", reg.url, "--kv", kvPath, "--shards", "8", "--docs", "--docs-url"],
    ...[reg.docsUrl!, "--follow", "--verify-every", "1m"],
  ]);
  await until(
    () => {
      if (p.out.includes("error:")) throw new Error(p.out);
      return p.out.includes("following the registry's changes");
    },
    300_000,
    "CLI follower",
  );
  return await rankcrawlFollower("rankcrawl `crawl --follow --docs`", p, {
    kvPath,
    stopWith: "SIGINT",
  });
}

/**
 * A rankcrawl process following into `kvPath` (its crawl `id`, or the only one): read from its KV
 * file, and stopped with `stopWith` before its copy is exported and compared.
 */
async function rankcrawlFollower(
  label: string,
  p: ReturnType<typeof spawnOut>,
  o: { kvPath: string; id?: string; stopWith: Deno.Signal },
): Promise<Follower> {
  const r = await kvReader(o.kvPath, o.id);
  return {
    label,
    pid: p.child.pid,
    seq: r.seq,
    follow: r.follow,
    finish: async (state) => {
      r.kv.close();
      p.child.kill(o.stopWith);
      await p.child.status;
      await p.drained;
      const args = ["--kv", o.kvPath, ...(o.id ? ["--crawl-id", o.id] : [])];
      return compareExport((await timeTask("tasks/export.ts", args)).stdout, state);
    },
  };
}

/** `deno task serve` with `POST /crawls {"follow": true}`, the crawl done. */
export async function serveFollower(
  reg: { url: string; docsUrl?: string },
  dir: string,
): Promise<Follower> {
  const kvPath = `${dir}/serve.kv`;
  const token = crypto.randomUUID();
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  const p = spawnOut("main.ts", [], {
    CRAWL_TOKEN: token,
    KV_PATH: kvPath,
    PORT: String(port),
    ALLOWED_SOURCES: `${reg.url},${reg.docsUrl}`,
    VERIFY_EVERY_MS: "60000",
  });
  const base = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Bearer ${token}` };
  await until(
    () => fetch(`${base}/healthz`).then((r) => (r.body?.cancel(), r.ok), () => false),
    30_000,
    "server",
  );
  const { id } = await (await fetch(`${base}/crawls`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      source: reg.url,
      shards: 8,
      docs: true,
      docsUrl: reg.docsUrl,
      follow: true,
    }),
  })).json();
  await until(
    async () => {
      const st = await (await fetch(`${base}/crawls/${id}`, { headers })).json();
      if (st.status === "failed") throw new Error(st.error);
      return st.status === "done";
    },
    300_000,
    "served crawl done",
  );
  return await rankcrawlFollower('rankcrawl `serve`, `{"follow": true}`', p, {
    kvPath,
    id,
    stopWith: "SIGTERM",
  });
}

/** "yes", or what differs, for an NDJSON export against `state`. */
function compareExport(ndjson: string, state: Map<string, string>): string {
  const seen = new Map<string, string>();
  let twice = 0;
  let badDoc = 0;
  for (const line of ndjson.split("\n")) {
    if (line === "") continue;
    const it = JSON.parse(line);
    if (seen.has(it.id)) twice++;
    seen.set(it.id, it.rev);
    if (!it.doc || it.doc._rev !== it.rev) badDoc++;
  }
  return diff(seen, state, { twice, badDoc });
}

/** "yes", or what differs between a copy and the registry's state. */
export function diff(
  got: Map<string, string>,
  state: Map<string, string>,
  more: { twice?: number; badDoc?: number },
): string {
  const missing = [...state.keys()].filter((id) => !got.has(id)).length;
  const extra = [...got.keys()].filter((id) => !state.has(id)).length;
  const stale = [...state].filter(([id, rev]) => got.has(id) && got.get(id) !== rev).length;
  const bad = { missing, extra, stale, ...more };
  const off = Object.entries(bad).filter(([, n]) => (n ?? 0) > 0);
  return off.length === 0 ? "yes" : off.map(([k, n]) => `${n} ${k}`).join(", ");
}
