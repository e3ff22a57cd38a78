/**
 * The status page served at `GET /`: plain HTML and a script, no build step. It asks for the API
 * token once (kept in the browser's sessionStorage, never in the URL or the page), follows
 * `/events` (server-sent events read with `fetch`, so the token stays in a header) and falls back
 * to polling when the stream breaks. Per crawl: source, state, start and finish, items, rate and
 * ETA while running, how long it took and how fast once finished, splits, page retries, document
 * errors (a table of them, page by page, from `/crawls/:id/errors`) and dead letters, how the end
 * was verified, pause/resume/cancel/delete buttons, the plan picture, and per shard its key range,
 * progress, rate and state (a paused or cancelled crawl's shards say so). A form starts a crawl.
 *
 * @module
 */

const STYLE = `
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1d2733; background: #f5f7fa; }
  header { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; padding: .8rem 1.5rem; background: #1d2733; color: #fff; }
  header h1 { font-size: 1.2rem; margin: 0 1rem 0 0; }
  header input { width: 16rem; max-width: 60vw; }
  #conn { margin-left: auto; font-size: .85rem; opacity: .85; }
  main { padding: 1rem 1.5rem; }
  .crawl { background: #fff; border: 1px solid #d5dce5; border-radius: 8px; padding: 1rem; margin: 0 0 1rem; }
  .head { display: flex; gap: .8rem; align-items: baseline; flex-wrap: wrap; }
  .head h2 { font-size: 1.1rem; margin: 0; }
  .state { padding: .1rem .5rem; border-radius: 99px; font-size: .8rem; font-weight: 600; background: #e3e8ef; }
  .state.running { background: #d8f3e3; color: #17643a; } .state.done { background: #dbe9fb; color: #1f4f8f; }
  .state.failed { background: #fbdada; color: #8f1f1f; } .state.paused { background: #fff1cc; color: #7a5a00; }
  .state.planning { background: #ece3fb; color: #4f2f8f; } .state.cancelled { background: #eee; color: #555; }
  .source { color: #5a6675; word-break: break-all; }
  .facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(11rem, 1fr)); gap: .3rem 1rem; margin: .7rem 0; }
  .facts div { font-size: .85rem; } .facts b { display: block; font-size: 1rem; }
  .actions button { margin-right: .4rem; }
  .errors { margin: .5rem 0; padding: .5rem .7rem; background: #fff5f5; border-left: 3px solid #c0392b; }
  .errors li { font-family: ui-monospace, monospace; font-size: .8rem; }
  .retried { margin: .5rem 0; padding: .5rem .7rem; background: #fffaf0; border-left: 3px solid #d4a017; }
  .retried li { font-family: ui-monospace, monospace; font-size: .8rem; } .retried li.what { font-family: inherit; color: #666; }
  .shards { width: 100%; border-collapse: collapse; margin-top: .6rem; font-size: .8rem; }
  .shards td, .shards th { padding: .15rem .4rem; border-bottom: 1px solid #eef1f5; text-align: left; }
  .range { font-family: ui-monospace, monospace; max-width: 28rem; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
  .bar { width: 12rem; background: #e8edf3; height: .6rem; border-radius: 3px; overflow: hidden; }
  .fill { background: #2e9e5b; height: 100%; } tr.done .fill { background: #3a78c3; }
  tr.retrying .fill { background: #d98e04; }
  .plan svg { max-width: 100%; height: auto; }
  .tbl, .docerrs { overflow-x: auto; }
  .docerrs table { border-collapse: collapse; font-size: .8rem; margin: .4rem 0; }
  .docerrs td, .docerrs th { padding: .15rem .4rem; border-bottom: 1px solid #eef1f5; text-align: left; }
  .docerrs td.id { font-family: ui-monospace, monospace; word-break: break-all; }
  #new { margin: 0 0 1rem; } #new form, #more { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; margin: .5rem 0; } #more { flex-basis: 100%; } #more summary { flex-basis: 100%; }
  #new input[name=source] { width: 24rem; max-width: 90vw; }
  .msg { color: #8f1f1f; }
  @media (max-width: 600px) { main, header { padding: .6rem; } .range { max-width: 10rem; } .bar { width: 5rem; } }
`;

const SCRIPT = `
const $ = (s, el = document) => el.querySelector(s);
const fmt = (n) => Math.round(n).toLocaleString("en-US");
// HTML escaped, and what could reorder or hide text (controls, bidirectional overrides) shown as
// its escape: a registry's text reads as it is.
const esc = (s) => String(s ?? "")
  .replace(/[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069\\u2028\\u2029]/g, (c) => "\\\\u{" + c.codePointAt(0).toString(16) + "}")
  .replace(/[&<>"']/g, (c) => "&#" + c.charCodeAt(0) + ";");
const dur = (s) => s == null ? "?" : s >= 3600 ? (s / 3600).toFixed(1) + " h" : s >= 60 ? (s / 60).toFixed(1) + " min" : Math.round(s) + " s";
const time = (iso) => iso ? new Date(iso).toLocaleString() : "–";
const key = (k) => k === null ? "(open)" : JSON.stringify(k);
const plural = (n, one, many) => fmt(n) + " " + (n === 1 ? one : many || one + "s");
// A server started with --insecure-local asks for no token (it listens on 127.0.0.1 only).
const OPEN = document.querySelector('meta[name="rankcrawl-auth"]')?.content === "none";
let token = sessionStorage.getItem("crawlToken") || "";
const crawls = new Map();
const pictures = new Map();
const auth = () => OPEN ? {} : { authorization: "Bearer " + token };
if (OPEN) $("#auth").hidden = true;

async function api(method, path) {
  const res = await fetch(path, { method, headers: auth() });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || res.statusText);
  return body;
}

function actions(c) {
  const b = (act, label, on) => '<button data-act="' + act + '"' + (on ? "" : " disabled") + ">" + label + "</button>";
  return b("pause", "Pause", c.status === "running") + b("resume", "Resume", c.status === "paused" || c.status === "failed") +
    b("cancel", "Cancel", !["done", "cancelled", "deleting"].includes(c.status)) +
    b("delete", "Delete", ["done", "failed", "cancelled", "deleting"].includes(c.status));
}

// The pace of a crawl's requests, as GET /crawls/:id last said it (event updates do not carry it).
const paces = {};
function paceText(p) {
  const caps = [p.crawlRatePerSecond, p.ratePerSecond].filter((r) => r !== null);
  const slowed = p.hosts.filter((h) => h.limitPerSecond !== null || h.heldUntil !== null || h.pausedAt);
  const parts = slowed.map((h) => esc(h.host) + " " + (h.pausedAt ? "answers nothing (" + esc(h.pauseReason || "") + "): paused" :
    (h.limitPerSecond !== null ? fmt(h.limitPerSecond) + "/s (" + esc(h.reason || "") + ")" : "") +
    (h.heldUntil !== null ? " held by Retry-After" : "")));
  if (caps.length) parts.unshift("cap " + fmt(Math.min(...caps)) + "/s");
  return parts.length ? parts.join("; ") : "not slowed";
}

function facts(c) {
  if (c.pace) paces[c.id] = c.pace;
  const pace = paces[c.id];
  const pct = c.total ? (100 * c.itemsStored / c.total).toFixed(1) + "%" : "";
  const running = c.status === "running";
  const f = (label, value, cls, title) => '<div class="' + (cls || "") + '"' + (title ? ' title="' + esc(title) + '"' : "") + ">" + label + "<b>" + value + "</b></div>";
  // A finished crawl: how long it took and how fast, start to finish.
  const took = c.finishedAt && c.startedAt ? (Date.parse(c.finishedAt) - Date.parse(c.startedAt)) / 1000 : null;
  return f("items", fmt(c.itemsStored) + " / " + fmt(c.total) + " " + pct, "items") +
    (running ? f("rate", fmt(c.rate) + " items/s", "rate") + f("ETA", dur(c.etaSeconds), "eta") : "") +
    (took !== null ? f("took", dur(took), "took") + f("throughput", fmt(c.itemsStored / Math.max(took, 0.001)) + " items/s", "throughput") : "") +
    f("started", time(c.startedAt || c.createdAt)) + f("finished", time(c.finishedAt)) +
    f("shards", c.shardsDone + " / " + plural(c.shardCount, "shard") + " done", "shard-count") + f("splits", c.splits.length, "splits") +
    f("page retries", fmt(c.retries), "retries", "pages of shards tried again; HTTP retries inside a page are in /metrics") +
    f("document errors", fmt(c.docErrors), "doc-errors") +
    (c.pendingDocs && (c.pendingDocs.pending || c.pendingDocs.landed || c.pendingDocs.expired) ? f("documents pending", fmt(c.pendingDocs.pending), "docs-pending", "behind their revision on the document host, asked again: " + fmt(c.pendingDocs.landed) + " landed later, " + fmt(c.pendingDocs.expired) + " given up on; " + fmt(c.pendingDocs.asked) + " asked again, " + fmt(c.pendingDocs.notModified) + " answered 304") : "") +
    f("dead letters", c.deadLetters, "dead") + (c.docs ? f("documents", fmt(c.documents) + " (" + esc(c.docMode || "") + ")") : "") +
    (c.docRevisions === "unverified" ? f("document revisions", "not checked", "doc-revisions", "npm's abbreviated metadata carries no _rev: a cache behind the registry cannot be told from the current document") : "") +
    (c.verification ? f("verified", esc(c.verification.status), "verified") : "") +
    (c.sinks || []).map((s) => f("sink", s.behindNotes ? fmt(s.behindNotes) + " notes behind" : "level", "sink", s.sink)).join("") +
    (pace && running ? f("pace", paceText(pace), "pace", pace.hosts.map((h) => h.host + ": " + h.pushbacks + " pushed back of " + h.requests + " requests").join("; ")) : "") +
    (c.follow ? (c.follow.failing ? f("registry", "not answering since " + time(c.follow.failing.since) + ": " + esc(c.follow.failing.reason), "follow-failing") : "") +
      (c.follow.rows && c.follow.rows.forced ? f("comparing rows", fmt(c.follow.rows.compared) + " compared, " + fmt(c.follow.rows.repaired) + " repaired", "follow-resync", c.follow.rows.forced) : "") +
      f("following", (c.follow.changesBehind === null ? "?" : fmt(c.follow.changesBehind)) + " behind, lag " + c.follow.lagSeconds.toFixed(1) + " s", "follow",
      fmt(c.follow.applied) + " changes applied; seq " + esc(c.follow.head || "?")) +
      f("counts proven", time(c.follow.verifiedAt), "verified-at", fmt(c.follow.repaired) + " ranges repaired while following") +
      f("rows compared", c.follow.rows && c.follow.rows.comparedAt ? time(c.follow.rows.comparedAt) + " (" + (c.follow.rows.lastRepaired ? fmt(c.follow.rows.lastRepaired) + " repaired" : "all equal") + ")" : "not yet", "rows-compared") : "");
}

// What ended the crawl (red) apart from pages that failed and were asked again (amber): a crawl
// with 0 document errors showed its retried pages in the red box, as if they were errors.
function errors(c) {
  const fatal = [];
  if (c.error) fatal.push("crawl: " + c.error);
  if (c.driftError) fatal.push(c.driftError);
  const retried = c.recentErrors.map((e) => "shard " + e.shard + ": " + e.error);
  const list = (cls, head, lines) => lines.length
    ? '<ul class="' + cls + '">' + (head ? '<li class="what">' + esc(head) + "</li>" : "") +
      lines.map((l) => "<li>" + esc(l) + "</li>").join("") + "</ul>"
    : "";
  return list("errors", "", fatal) +
    list("retried", "latest page failures, each page asked again (document errors count only documents kept as errors)", retried);
}

// What a shard is doing: only a running crawl's shards run, wait or retry.
function shardState(c, s) {
  if (s.done) return "done";
  if (c.status !== "running") return c.status === "failed" ? "stopped" : c.status;
  return s.retryAt ? "retrying" : s.leased ? "running" : "waiting";
}

// Shards in key order: a split's child sits right after its parent's range, not at the end.
const byStart = (a, b) => a.start === null ? -1 : b.start === null ? 1 : a.start < b.start ? -1 : a.start > b.start ? 1 : 0;

function shards(c) {
  const rows = [...c.shards].sort(byStart).map((s) => {
    const f = s.done ? 1 : s.expected ? Math.min(1, s.items / s.expected) : 0;
    const state = shardState(c, s);
    return '<tr class="shard ' + state + '" data-shard="' + s.id + '"><td>#' + s.id + (s.parent !== null ? " ⤷" + s.parent : "") +
      '</td><td class="range" title="' + esc(key(s.start) + " → " + key(s.end)) + '">' + esc(key(s.start)) + " → " + esc(key(s.end)) +
      '</td><td><div class="bar"><div class="fill" style="width:' + (100 * f).toFixed(1) + '%"></div></div></td><td>' +
      fmt(s.items) + " / " + fmt(s.expected) + "</td><td>" + (state === "running" || state === "waiting" || state === "retrying" ? fmt(s.rate) + "/s" : "") +
      "</td><td>" + state + (s.docErrors ? " · " + plural(s.docErrors, "doc error") : "") + "</td></tr>";
  }).join("");
  return '<table class="shards"><thead><tr><th>shard</th><th>keys</th><th></th><th>items</th><th>rate</th><th>state</th></tr></thead><tbody>' + rows + "</tbody></table>";
}

function render(c) {
  let el = document.querySelector('.crawl[data-crawl="' + CSS.escape(c.id) + '"]');
  if (!el) {
    el = document.createElement("section");
    el.className = "crawl";
    el.dataset.crawl = c.id;
    el.innerHTML = '<div class="head"></div><div class="facts"></div><div class="actions"></div><div class="errs"></div>' +
      '<details class="docerrs" hidden><summary></summary><table><thead><tr><th>document</th><th>status</th><th>reason</th></tr></thead><tbody></tbody></table>' +
      '<button data-act="more-errors" hidden>more</button></details>' +
      '<details class="plan"><summary>plan: items before each key, even split vs balanced cuts</summary><div class="svg"></div></details><div class="tbl"></div>';
    el.addEventListener("click", (e) => act(c.id, e.target.dataset && e.target.dataset.act));
    $(".plan", el).addEventListener("toggle", () => picture(c.id, true));
    $(".docerrs", el).addEventListener("toggle", (e) => e.target.open && !docErrors.has(c.id) && moreErrors(c.id));
    $("#crawls").prepend(el);
  }
  el.dataset.status = c.status;
  el.dataset.items = c.itemsStored;
  $(".head", el).innerHTML = "<h2>" + esc(c.id) + '</h2><span class="state ' + c.status + '">' + c.status + '</span><span class="source">' + esc(c.source) + "</span>";
  $(".facts", el).innerHTML = facts(c);
  $(".actions", el).innerHTML = actions(c);
  $(".errs", el).innerHTML = errors(c);
  const de = $(".docerrs", el);
  de.hidden = !c.docErrors;
  $("summary", de).textContent = "document errors: " + plural(c.docErrors, "document") + " could not be had";
  $(".tbl", el).innerHTML = shards(c);
  // No plan (planning, or failed before one was made): no picture to draw.
  $(".plan", el).hidden = !c.shardCount;
  if (c.shardCount && pictures.get(c.id) !== c.shardCount) picture(c.id, false);
  $("#empty").hidden = true;
}

async function picture(id, force) {
  const el = document.querySelector('.crawl[data-crawl="' + CSS.escape(id) + '"] .plan');
  const c = crawls.get(id);
  if (!el || !c || c.status === "planning" || (!el.open && !force && pictures.has(id))) return;
  pictures.set(id, c.shardCount);
  const res = await fetch("/crawls/" + encodeURIComponent(id) + "/plan.svg", { headers: auth() });
  if (res.ok) $(".svg", el).innerHTML = await res.text();
}

// Document errors, a page at a time (GET /crawls/:id/errors), appended as "more" is pressed.
const docErrors = new Map();
async function moreErrors(id) {
  const el = document.querySelector('.crawl[data-crawl="' + CSS.escape(id) + '"] .docerrs');
  const cursor = docErrors.get(id);
  const page = await api("GET", "/crawls/" + encodeURIComponent(id) + "/errors?limit=50" + (cursor ? "&cursor=" + encodeURIComponent(cursor) : ""));
  docErrors.set(id, page.cursor);
  $("tbody", el).insertAdjacentHTML("beforeend", page.errors.map((e) =>
    '<tr class="docerr"><td class="id">' + esc(e.key !== undefined ? JSON.stringify(e.key) + " · " + e.id : e.id) + "</td><td>" + e.status + "</td><td>" + esc(e.reason) + "</td></tr>").join(""));
  $("button", el).hidden = !page.cursor;
}

async function act(id, action) {
  if (!action) return;
  if (action === "more-errors") return moreErrors(id).catch((err) => $("#msg").textContent = err.message);
  try {
    if (action === "delete") {
      if (!confirm("Delete crawl " + id + " and everything it stored?")) return;
      await api("DELETE", "/crawls/" + encodeURIComponent(id));
      document.querySelector('.crawl[data-crawl="' + CSS.escape(id) + '"]')?.remove();
      crawls.delete(id);
    } else {
      await api("POST", "/crawls/" + encodeURIComponent(id) + "/" + action);
      update(await api("GET", "/crawls/" + encodeURIComponent(id)));
    }
    $("#msg").textContent = "";
  } catch (err) {
    $("#msg").textContent = action + " " + id + ": " + err.message;
  }
}

function update(c) {
  crawls.set(c.id, c);
  render(c);
}

async function poll() {
  const list = await api("GET", "/crawls");
  for (const s of list.crawls) update(await api("GET", "/crawls/" + encodeURIComponent(s.id)));
}

let polling = null;
async function follow() {
  if (!token && !OPEN) { $("#conn").textContent = "enter the API token"; return; }
  try {
    const res = await fetch("/events", { headers: auth() });
    if (!res.ok) throw new Error((await res.json().catch(() => ({}))).error || res.statusText);
    clearInterval(polling);
    polling = null;
    $("#conn").textContent = "live";
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\\n\\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = block.split("\\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\\n");
        if (event === "crawl") update(JSON.parse(data));
        if (event === "gone") document.querySelector('.crawl[data-crawl="' + CSS.escape(JSON.parse(data).id) + '"]')?.remove();
      }
    }
    throw new Error("stream ended");
  } catch (err) {
    $("#conn").textContent = "polling (" + err.message + ")";
    if (!polling) polling = setInterval(() => poll().catch((e) => $("#conn").textContent = e.message), 2000);
    setTimeout(follow, 10000);
  }
}

$("#start").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = new FormData(e.target);
  // Everything POST /crawls takes; what is left empty is left to the server's defaults.
  const body = { source: f.get("source"), shards: Number(f.get("shards")), docs: f.get("docs") === "on" };
  for (const name of ["view", "docsUrl", "id"]) if (f.get(name)) body[name] = f.get(name).trim();
  if (f.get("docFields")) body.docFields = f.get("docFields").split(",").map((x) => x.trim()).filter(Boolean);
  for (const name of ["concurrency", "maxPage", "rate"]) if (f.get(name)) body[name] = Number(f.get(name));
  if (f.get("abbreviated") === "on") body.abbreviated = true;
  if (f.get("follow") === "on") body.follow = true;
  if (f.get("rebalance") !== "on") body.rebalance = false;
  try {
    const res = await fetch("/crawls", { method: "POST", headers: { ...auth(), "content-type": "application/json" }, body: JSON.stringify(body) });
    const out = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(out.error || res.statusText);
    $("#started").textContent = (out.created ? "started " : "already there: ") + out.id;
    update(await api("GET", "/crawls/" + encodeURIComponent(out.id)));
  } catch (err) {
    $("#started").textContent = "not started: " + err.message;
  }
});

$("#auth").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("#token").value;
  sessionStorage.setItem("crawlToken", token);
  follow();
});
follow();
`;

/**
 * The page. `tokenRequired: false` (a server started with `--insecure-local`) hides the token
 * form: the page calls the API without one.
 */
export function statusPage(options: { tokenRequired: boolean }): string {
  return STATUS_PAGE.replace(
    '<meta name="rankcrawl-auth" content="token">',
    `<meta name="rankcrawl-auth" content="${options.tokenRequired ? "token" : "none"}">`,
  );
}

const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="rankcrawl-auth" content="token">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rankcrawl status</title>
<link rel="icon" href="/favicon.ico">
<style>${STYLE}</style>
</head>
<body>
<header><h1>rankcrawl</h1>
<form id="auth"><label>API token <input id="token" type="password" autocomplete="off"></label>
<button>Use</button></form><span id="msg" class="msg"></span><span id="conn"></span></header>
<main><details id="new"><summary>Start a crawl</summary>
<form id="start"><label>source <input name="source" type="url" required placeholder="http://127.0.0.1:5984/registry"></label>
<label>shards <input name="shards" type="number" min="1" value="16" required></label>
<label><input name="docs" type="checkbox"> documents</label>
<label><input name="follow" type="checkbox"> follow (keep it current)</label>
<details id="more"><summary>more options</summary>
<label>documents from <input name="docsUrl" type="url" placeholder="https://registry.npmjs.org (optional)"></label>
<label>keep fields <input name="docFields" placeholder="name,versions (optional)"></label>
<label><input name="abbreviated" type="checkbox"> abbreviated metadata</label>
<label>view <input name="view" placeholder="ddoc/view (optional)"></label>
<label>document fetches a shard <input name="concurrency" type="number" min="1"></label>
<label>rows a request <input name="maxPage" type="number" min="2"></label>
<label>requests a second at most <input name="rate" type="number" min="0" step="any"></label>
<label><input name="rebalance" type="checkbox" checked> split slow shards</label>
<label>id <input name="id" placeholder="derived (optional)"></label>
</details>
<button>Start</button> <span id="started"></span></form></details>
<p id="empty">No crawls yet, or no token: start one above, or with <code>POST /crawls</code>.</p>
<div id="crawls"></div></main>
<script>${SCRIPT}</script>
</body>
</html>
`;

/** The page's icon (SVG): four bars of equal height, the idea of the tool. */
export const FAVICON =
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d2733"/>` +
  `<g fill="#2e9e5b"><rect x="2" y="4" width="2.5" height="8"/><rect x="5.2" y="4" width="2.5" height="8"/>` +
  `<rect x="8.4" y="4" width="2.5" height="8"/><rect x="11.6" y="4" width="2.5" height="8"/></g></svg>`;
