/**
 * The status page served at `GET /`: plain HTML and a little script, no build step. It asks for the
 * API token once (kept in the browser's sessionStorage, never in the URL or the page), then polls
 * the API every second and draws every crawl with a progress bar per shard, items/s and ETA.
 *
 * @module
 */

/** The page. */
export const STATUS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rankcrawl status</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #222; }
  h1 { font-size: 1.3rem; }
  .crawl { border: 1px solid #ccc; border-radius: 6px; padding: .8rem; margin: .8rem 0; }
  .head { font-weight: 600; }
  .shard { display: grid; grid-template-columns: 4rem 1fr 12rem; gap: .5rem; align-items: center; }
  .bar { background: #eee; height: .7rem; border-radius: 3px; overflow: hidden; }
  .fill { background: #3a7; height: 100%; }
  .done .fill { background: #38c; }
  #auth { margin-bottom: 1rem; }
  .err { color: #b00; }
</style>
</head>
<body>
<h1>rankcrawl</h1>
<form id="auth"><label>API token <input id="token" type="password" autocomplete="off"></label>
<button>Use</button> <span id="msg"></span></form>
<div id="crawls"></div>
<script>
const $ = (s) => document.querySelector(s);
let token = sessionStorage.getItem("crawlToken") || "";
$("#auth").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("#token").value;
  sessionStorage.setItem("crawlToken", token);
  tick();
});
const fmt = (n) => Math.round(n).toLocaleString("en-US");
const eta = (s) => s == null ? "?" : s >= 3600 ? (s / 3600).toFixed(1) + " h" : s >= 60 ? (s / 60).toFixed(1) + " min" : Math.round(s) + " s";
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
async function api(path) {
  const res = await fetch(path, { headers: { authorization: "Bearer " + token } });
  if (!res.ok) throw new Error((await res.json().catch(() => ({}))).error || res.statusText);
  return res.json();
}
function render(c) {
  const shards = c.shards.map((s) => {
    const f = s.done ? 1 : s.expected ? Math.min(1, s.items / s.expected) : 0;
    return '<div class="shard' + (s.done ? " done" : "") + '" data-shard="' + s.id + '"><span>#' + s.id +
      '</span><div class="bar"><div class="fill" style="width:' + (100 * f).toFixed(1) + '%"></div></div><span>' +
      fmt(s.items) + " / " + fmt(s.expected) + (s.done ? " done" : " · " + fmt(s.rate) + "/s") + "</span></div>";
  }).join("");
  return '<div class="crawl" data-crawl="' + esc(c.id) + '" data-status="' + c.status + '" data-items="' + c.itemsStored +
    '"><div class="head">' + esc(c.id) + " · " + c.status + " · " + fmt(c.itemsStored) + " / " + fmt(c.total) +
    " items · " + fmt(c.rate) + " items/s · ETA " + eta(c.etaSeconds) + " · " + c.shardsDone + "/" + c.shardCount +
    " shards" + (c.deadLetters ? " · dead letters " + c.deadLetters : "") + (c.error ? ' · <span class="err">' + esc(c.error) + "</span>" : "") +
    "</div>" + shards + "</div>";
}
async function tick() {
  if (!token) { $("#msg").textContent = "enter the token"; return; }
  try {
    const list = await api("/crawls");
    const details = await Promise.all(list.crawls.map((c) => api("/crawls/" + encodeURIComponent(c.id))));
    $("#crawls").innerHTML = details.map(render).join("") || "<p>No crawls yet.</p>";
    $("#msg").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    $("#msg").innerHTML = '<span class="err">' + esc(err.message) + "</span>";
  }
}
setInterval(tick, 1000);
tick();
</script>
</body>
</html>
`;
