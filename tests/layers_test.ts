/**
 * The house's import rules, checked on every file: layers import only the layers below them
 * (base → plan → sources → engine → sinks → mirror → http/cli → tasks), the simulator and the bench stand to the
 * side, the engine's rooms stand on one another (store ← items ← page ← crawl ← verify ←
 * dispatch) and reach each other only through their `mod.ts`, so do the sub-rooms of the other
 * layers (`lib/sources/http/`, `lib/plan/search/`, …: through their `mod.ts` from outside, and
 * without a circle between them), a file named `_x.ts` is imported only
 * from its own folder, only the verify room decides a count, only the store opens an atomic op,
 * "followable", "replaced" and a document's revision check each have one decider, and HTTP and CLI
 * reach the engine only through `lib/engine/mod.ts`.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../", import.meta.url);

/** Every project file (lib, tasks, main.ts, mod.ts) with the project files it imports. */
async function importGraph(): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(new URL(dir, ROOT))) {
      const path = `${dir}${e.name}`;
      if (e.isDirectory) await walk(`${path}/`);
      else if (e.name.endsWith(".ts")) graph.set(path, []);
    }
  };
  await walk("lib/");
  await walk("tasks/");
  graph.set("main.ts", []);
  graph.set("mod.ts", []);
  for (const file of graph.keys()) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)];
    const targets = specs.map((m) =>
      new URL(m[1], new URL(file, ROOT)).href.slice(ROOT.href.length)
    );
    // A file naming itself does so in a doc example, not an import.
    graph.set(file, targets.filter((t) => t !== file));
  }
  return graph;
}

/** The layer a file belongs to. */
function layer(file: string): string {
  const m = /^lib\/(engine\/[a-z]+\/|[a-z]+\/)/.exec(file);
  if (m) return m[1].replace(/\/$/, "");
  if (file === "lib/engine/mod.ts") return "engine";
  return file.startsWith("tasks/") ? "tasks" : file;
}

const ROOMS = ["store", "items", "sinks", "page", "crawl", "verify", "dispatch"];

/** May a file of layer `from` import a file of layer `to`? */
function allowed(from: string, to: string, target: string): boolean {
  if (from === to) return true;
  const below: Record<string, string[]> = {
    "base": [],
    "plan": ["base"],
    "sources": ["base", "plan"],
    "sim": ["base", "plan"],
    "engine": ["base", "plan", "sources", ...ROOMS.map((r) => `engine/${r}`)],
    "sinks": ["base", "plan", "sources", "engine"],
    "mirror": ["base", "plan", "sources", "engine", "sinks"],
    "http": ["base", "plan", "sources", "engine", "sinks", "mirror"],
    "cli": ["base", "plan", "sources", "engine", "sinks", "mirror"],
    "bench": ["base", "plan", "sources", "sim", "engine", "cli"],
    "tasks": [
      "base",
      "plan",
      "sources",
      "sim",
      "engine",
      "sinks",
      "mirror",
      "cli",
      "bench",
      "http",
    ],
    "main.ts": ["base", "http"],
    "mod.ts": ["base", "plan", "sources"],
  };
  if (from.startsWith("engine/")) {
    const room = from.slice("engine/".length);
    const lower = ROOMS.slice(0, ROOMS.indexOf(room)).map((r) => `engine/${r}`);
    // Another room only through its face.
    if (to.startsWith("engine/")) return lower.includes(to) && target.endsWith("/mod.ts");
    return ["base", "plan", "sources"].includes(to);
  }
  // The engine's face hands on its rooms' faces; outside the engine, only that face
  // (tasks and the bench may reach in).
  if (from === "engine") return to.startsWith("engine/") && target.endsWith("/mod.ts");
  if (to.startsWith("engine/") && !["tasks", "bench"].includes(from)) return false;
  const to2 = to.startsWith("engine/") ? "engine" : to;
  return (below[from] ?? []).includes(to2);
}

Deno.test("layers: every import runs down the house, and between rooms only through a face", async () => {
  const graph = await importGraph();
  const wrong: string[] = [];
  for (const [file, targets] of graph) {
    for (const target of targets) {
      if (!graph.has(target)) continue; // not a project module (a fixture, a data file)
      if (!allowed(layer(file), layer(target), target)) wrong.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(wrong, []);
});

/**
 * The sub-rooms: folders below a layer with a `mod.ts` face of their own, and folders below an
 * engine room (`lib/engine/crawl/feed/`).
 */
function subRooms(graph: Map<string, string[]>): string[] {
  const rooms = new Set<string>();
  for (const file of graph.keys()) {
    const m = /^(lib\/engine\/[a-z]+\/[a-z]+|lib\/(?!engine\/)[a-z]+\/[a-z]+)\/mod\.ts$/.exec(file);
    if (m) rooms.add(m[1]);
  }
  return [...rooms];
}

Deno.test("layers: a sub-room is entered from outside only through its face, and sub-rooms make no circle", async () => {
  const graph = await importGraph();
  const rooms = subRooms(graph);
  assert.ok(rooms.includes("lib/sources/http") && rooms.includes("lib/plan/search"));
  assert.ok(rooms.includes("lib/engine/crawl/feed") && rooms.includes("lib/engine/crawl/reads"));
  const roomOf = (file: string) => rooms.find((r) => file.startsWith(`${r}/`));
  const wrong: string[] = [];
  const arrows = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    for (const t of targets) {
      const [from, to] = [roomOf(file), roomOf(t)];
      if (!to || from === to) continue;
      if (!t.endsWith("/mod.ts")) wrong.push(`${file} -> ${t}`);
      if (from) arrows.set(from, (arrows.get(from) ?? new Set()).add(to));
    }
  }
  assert.deepEqual(wrong, []);
  // Between the sub-rooms of one layer, arrows run one way.
  const circles: string[] = [];
  const reach = (from: string, seen: string[]) => {
    for (const to of arrows.get(from) ?? []) {
      if (to === seen[0]) circles.push([...seen, to].join(" -> "));
      else if (!seen.includes(to)) reach(to, [...seen, to]);
    }
  };
  for (const room of rooms) reach(room, [room]);
  assert.deepEqual(circles, []);
});

Deno.test("layers: no circles", async () => {
  const graph = await importGraph();
  const state = new Map<string, "open" | "done">();
  const circles: string[] = [];
  const visit = (file: string, path: string[]) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "open") {
      circles.push([...path.slice(path.indexOf(file)), file].join(" -> "));
      return;
    }
    state.set(file, "open");
    for (const t of graph.get(file) ?? []) if (graph.has(t)) visit(t, [...path, file]);
    state.set(file, "done");
  };
  for (const file of graph.keys()) visit(file, []);
  assert.deepEqual(circles, []);
});

Deno.test("layers: a room's _ files are imported only from their own folder", async () => {
  const graph = await importGraph();
  const wrong: string[] = [];
  for (const [file, targets] of graph) {
    for (const t of targets) {
      const name = t.slice(t.lastIndexOf("/") + 1);
      const dir = t.slice(0, t.lastIndexOf("/") + 1);
      if (name.startsWith("_") && !file.startsWith(dir)) wrong.push(`${file} -> ${t}`);
    }
  }
  assert.deepEqual(wrong, []);
});

Deno.test("layers: only the verify room decides whether a count proves a range", async () => {
  const graph = await importGraph();
  const callers: string[] = [];
  for (const file of graph.keys()) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    if (/\b(countVerdict|checkRanges|checkShardEnd|checkTotal|plannedCountVerdicts)\(/.test(text)) {
      callers.push(file);
    }
  }
  // The shard runner hands the verify room's end check to the page; nothing else calls one.
  const outside = callers.filter((f) =>
    !f.startsWith("lib/engine/verify/") && f !== "lib/engine/dispatch/_shard_runner.ts"
  );
  assert.deepEqual(outside, []);
});

Deno.test("layers: only the store opens an atomic operation", async () => {
  const graph = await importGraph();
  const outside: string[] = [];
  for (const file of graph.keys()) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    if (/\.atomic\(\)/.test(text) && !file.startsWith("lib/engine/store/")) outside.push(file);
  }
  // Every multi-key write is the store's, with its checks and its `{ ok: false }` handled.
  assert.deepEqual(outside, []);
});

Deno.test("layers: below the engine's environment, no room picks a clock of its own or waits on a raw timer", async () => {
  const graph = await importGraph();
  const wrong: string[] = [];
  for (const file of graph.keys()) {
    if (!file.startsWith("lib/engine/") || file === "lib/engine/dispatch/env.ts") continue;
    const text = await Deno.readTextFile(new URL(file, ROOT));
    const code = text.split("\n").filter((l) => !/^\s*(\*|\/\/|\/\*\*)/.test(l)).join("\n");
    for (const bad of ["?? SYSTEM_CLOCK", "= SYSTEM_CLOCK", "Date.now()", "setTimeout("]) {
      if (code.includes(bad)) wrong.push(`${file}: ${bad}`);
    }
  }
  assert.deepEqual(wrong, [], "the clock comes from env.ts (engineEnv, envClock)");
});

Deno.test("layers: below the engine's environment, no room names a lease's owner of its own", async () => {
  const graph = await importGraph();
  const wrong: string[] = [];
  for (const file of graph.keys()) {
    if (!file.startsWith("lib/engine/") || file === "lib/engine/dispatch/env.ts") continue;
    // The process's own id, which every owner of the process carries (`ProcessBeat`).
    if (file === "lib/engine/store/leases.ts") continue;
    const text = await Deno.readTextFile(new URL(file, ROOT));
    const code = text.split("\n").filter((l) => !/^\s*(\*|\/\/|\/\*\*)/.test(l)).join("\n");
    if (code.includes("randomUUID(")) wrong.push(file);
    if (/\bowner\?: string/.test(code) && !file.startsWith("lib/engine/dispatch/")) {
      wrong.push(`${file}: an optional owner`);
    }
  }
  // An owner picked below would be no process's: its leases would only expire, never end with it.
  assert.deepEqual(wrong, [], "owners come from the environment (Env.ownerName)");
});

Deno.test("layers: one decider each for whether a crawl is followable and whether its registry was replaced", async () => {
  const graph = await importGraph();
  const deciders: Record<string, string[]> = { followable: [], replaced: [], docRevisions: [] };
  for (const file of graph.keys()) {
    const text = await Deno.readTextFile(new URL(file, ROOT));
    const code = text.split("\n").filter((l) => !/^\s*(\*|\/\/|\/\*\*)/.test(l)).join("\n");
    // Whether a crawl is followed: done, with a feed position (records.ts); nobody re-derives it.
    if (/export function followable\(|status === "done" && feedUsable\(/.test(code)) {
      deciders.followable.push(file);
    }
    // Whether the registry behind a crawl's URL was replaced: the sample held against it.
    if (/new RegistryReplacedError\(/.test(code)) deciders.replaced.push(file);
    // Whether a document can be held against its revision: `_rev`, or another check (abbreviated).
    if (/export function (againstListing|againstStored)[<(]/.test(code)) {
      deciders.docRevisions.push(file);
    }
  }
  for (const files of Object.values(deciders)) files.sort();
  assert.deepEqual(deciders, {
    followable: ["lib/engine/store/records.ts"],
    replaced: ["lib/engine/crawl/feed/catch_up.ts"],
    docRevisions: ["lib/engine/page/against_stored.ts", "lib/engine/page/page_docs.ts"],
  });
});
