/**
 * `deno task crawl` (run as users run it, with the README's permissions) against registries that
 * serve what npm's replica serves since 2025 (GET only, unknown parameters refused or `update_seq`
 * ignored, no sequence on listings, no `pending`, documents only from a document host), a
 * read-only proxy, and a cluster's opaque, jittering sequences, while they change 1 and 20 times a
 * second: every crawl ends `done`, and its export is exactly the registry at the sequence the
 * crawl reports (every change is recorded, so that state is known). Through `serve` too, and a
 * final check that fails the same permanent way ends `failed` with the reason.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import {
  createRegistryApp,
  type RegistryOptions,
  startRegistry,
} from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile, SeqCodec } from "../../lib/sim/registry/registry_profile.ts";
import { runTask, spawnServer, waitHealthy } from "../helpers.ts";
import { assertExportWithin, realNames, reportedSeqs, Timeline } from "../registry_timeline.ts";

/** The sequences a finished crawl's check reports, read as the registry's states. */
function reported(line: string, codec: SeqCodec): { at: number; to: number | null } {
  return reportedSeqs(line, (seq) => {
    const n = codec.parse(seq, -1);
    assert.ok(typeof n === "number", `unreadable sequence ${seq}`);
    return n;
  });
}

/** Crawls a changing registry with the CLI; asserts done and the export exact at its sequence. */
async function crawlChanging(
  o: {
    names: number;
    perSecond: number;
    registry: RegistryOptions;
    docs?: boolean;
    args?: string[];
  },
): Promise<string> {
  const data = new RegistryData(await realNames(o.names));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, o.registry);
  const dir = await Deno.makeTempDir();
  const kv = `${dir}/c.kv`;
  try {
    const moving = timeline.churn(o.perSecond);
    const docs = o.docs ? ["--docs", ...(reg.docsUrl ? ["--docs-url", reg.docsUrl] : [])] : [];
    const run = await runTask("crawl", ["--source", reg.url, "--kv", kv, ...docs, ...o.args ?? []]);
    const changes = moving.stop();
    assert.equal(run.code, 0, run.stderr.slice(-2000) + run.stdout.slice(-2000));
    assert.match(run.stdout, /crawl \S+ done/);
    const checked = run.stdout.split("\n").find((l) => l.includes("checked: exact"));
    assert.ok(checked, run.stdout.slice(-2000));
    assert.ok(changes > 0, "the registry changed meanwhile");
    const seqs = reported(checked, new SeqCodec(o.registry));
    const exported = await runTask("export", ["--kv", kv]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportWithin(exported.stdout, timeline, seqs, o.docs ?? false);
    return run.stdout;
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("npm replica: 50,000 real names changing once a second, update_seq refused: done, exact", async () => {
  // 100 ms away (npm from a laptop) and pages of 1,000: the crawl spans several changes.
  const out = await crawlChanging({
    names: 50_000,
    perSecond: 1,
    registry: { ...npmReplicaProfile(), latencyMs: 100 },
    args: ["--max-page", "1000"],
  });
  assert.match(out, /registry: no seq on listings \(refused\); GET only \(revisions by \?keys=\)/);
});

Deno.test("npm replica: 50,000 real names changing 20 times a second, update_seq refused: done, exact", async () => {
  await crawlChanging({ names: 50_000, perSecond: 20, registry: npmReplicaProfile() });
});

Deno.test("npm replica: 50,000 real names changing 20 times a second, update_seq ignored: done, exact", async () => {
  const out = await crawlChanging({
    names: 50_000,
    perSecond: 20,
    registry: npmReplicaProfile("ignore"),
  });
  assert.match(out, /registry: no seq on listings \(ignored\)/);
});

Deno.test("npm replica: 5,000 names with documents from the document host: each at its listed revision", async () => {
  for (const perSecond of [1, 20]) {
    const out = await crawlChanging({
      names: 5_000,
      perSecond,
      // Documents 50 ms away: the crawl spans changes at one a second too.
      registry: { ...npmReplicaProfile(), docLatencyMs: perSecond === 1 ? 50 : 0 },
      docs: true,
      args: ["--concurrency", "4"],
    });
    assert.match(out, /documents one GET each from http:\/\/127\.0\.0\.1:\d+/);
  }
});

Deno.test("npm replica: a document host 300 ms behind the feed: every document at its listed revision", async () => {
  // Documents changed or published less than 300 ms ago are served as they were (or 404): asked
  // again after a pause, never recorded as their items' errors, never failing the crawl.
  const out = await crawlChanging({
    names: 5_000,
    perSecond: 20,
    registry: { ...npmReplicaProfile(), docLagMs: 300, docLatencyMs: 20 },
    docs: true,
    args: ["--concurrency", "4"],
  });
  assert.match(out, /checked: exact/);
});

Deno.test("read-only proxy with a cluster's jittering opaque sequences: done, exact", async () => {
  const cluster = { getOnly: true, opaqueSeq: true, seqJitter: 0.3 };
  await crawlChanging({ names: 50_000, perSecond: 20, registry: cluster });
  await crawlChanging({ names: 5_000, perSecond: 20, registry: cluster, docs: true });
  // npm's replica with opaque sequences too (npm says to treat them as opaque).
  await crawlChanging({
    names: 20_000,
    perSecond: 20,
    registry: { ...npmReplicaProfile(), opaqueSeq: true, seqJitter: 0.3 },
  });
});

/**
 * A registry that answers every listing 400 from the first revision lookup on (what only the final
 * check asks): its API changed under a crawl, and no form of the request avoids the refusal.
 */
async function refusingAtFinalCheck(names: number) {
  const data = new RegistryData(await realNames(names));
  const app = createRegistryApp(data, npmReplicaProfile());
  let refusing = false;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (req) => {
    const url = new URL(req.url);
    if (url.pathname.endsWith("/_all_docs")) {
      if (url.searchParams.has("keys")) refusing = true;
      if (refusing) {
        return Response.json({ error: "bad_request", reason: "this API is gone" }, {
          status: 400,
        });
      }
    }
    return app.fetch(req);
  });
  return {
    url: `http://127.0.0.1:${server.addr.port}/registry`,
    close: () => server.shutdown(),
  };
}

Deno.test("a final check refused the same way every time ends the crawl failed, with the reason", async () => {
  const reg = await refusingAtFinalCheck(5_000);
  const dir = await Deno.makeTempDir();
  try {
    const run = await runTask("crawl", ["--source", reg.url, "--kv", `${dir}/c.kv`]);
    assert.equal(run.code, 1, run.stdout.slice(-1000));
    const line = run.stderr.trim().split("\n").at(-1)!;
    assert.match(line, /^error: crawl \S+ failed: the final check failed 3 times: HTTP 400/);
    assert.match(line, /this API is gone/);
  } finally {
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("serve: npm replica changing 20 times a second with documents: done, exact; a refusing one: failed within a minute", async () => {
  const data = new RegistryData(await realNames(5_000));
  const timeline = new Timeline(data);
  const reg = await startRegistry(data, npmReplicaProfile());
  const refusing = await refusingAtFinalCheck(3_000);
  const dir = await Deno.makeTempDir();
  const token = "npm-replica-e2e-token-1";
  const server = spawnServer({
    CRAWL_TOKEN: token,
    KV_PATH: `${dir}/serve.kv`,
    ALLOWED_SOURCES: [reg.url, reg.docsUrl!, refusing.url].join(","),
  });
  const req = (method: string, path: string, body?: unknown) =>
    fetch(`${server.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}` },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then((r) => r.json());
  const until = async (id: string, ms: number) => {
    const deadline = Date.now() + ms;
    let st: Record<string, unknown> = {};
    while (Date.now() < deadline) {
      st = await req("GET", `/crawls/${id}`);
      if (st.status === "done" || st.status === "failed") return st;
      await new Promise((r) => setTimeout(r, 100));
    }
    return st;
  };
  let moving: { stop: () => number } | null = null;
  try {
    await waitHealthy(`${server.base}/healthz`);
    moving = timeline.churn(20);
    const { id } = await req("POST", "/crawls", {
      source: reg.url,
      shards: 8,
      docs: true,
      docsUrl: reg.docsUrl,
    });
    const st = await until(id, 120_000);
    moving.stop();
    const v = st.verification as { status: string; detail: string };
    assert.equal(st.status, "done", JSON.stringify(st).slice(0, 2000));
    assert.equal(v.status, "exact", v.detail);
    assert.match(String(st.registry), /no seq on listings \(refused\)/);
    const exported = await runTask("export", ["--kv", `${dir}/serve.kv`, "--crawl-id", id]);
    assert.equal(exported.code, 0, exported.stderr);
    assertExportWithin(exported.stdout, timeline, reported(v.detail, new SeqCodec()), true);
    // A registry that refuses the final check's every form: failed, with the reason (`until`
    // gives up after a minute).
    const bad = await req("POST", "/crawls", { source: refusing.url, shards: 4 });
    const failed = await until(bad.id, 60_000);
    assert.equal(failed.status, "failed", JSON.stringify(failed).slice(0, 1000));
    assert.match(String(failed.error), /final check failed 3 times: HTTP 400 .*this API is gone/);
  } finally {
    moving?.stop();
    const logs = await server.stop();
    assert.ok(!logs.includes(token), "the token never appears in logs");
    await reg.close();
    await refusing.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("npm replica: one range changing 200 times a second, no sequence on listings, is proven by its parts' rows", async () => {
  // Every round of rank probes sees a change: only parts listed in one answer each can decide.
  const out = await crawlChanging({
    names: 20_000,
    perSecond: 200,
    registry: { ...npmReplicaProfile(), latencyMs: 15 },
    args: ["--shards", "1", "--max-page", "500"],
  });
  assert.match(out, /checked: exact: every one of 1 ranges/);
});
