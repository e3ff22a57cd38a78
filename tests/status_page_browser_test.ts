/**
 * The status page in a real headless browser (Debian's chromium driven by playwright-core): it
 * loads, shows a running crawl's shards, and updates live. CI installs chromium (.ci/run); on a
 * machine without it the test is skipped locally, never in CI.
 */
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { spawnRegistry, spawnServer, waitHealthy } from "./helpers.ts";

const CHROMIUM = Deno.env.get("CHROMIUM_PATH") ?? "/usr/bin/chromium";
const haveChromium = (() => {
  try {
    return Deno.statSync(CHROMIUM).isFile;
  } catch {
    return false;
  }
})();
if (!haveChromium && Deno.env.get("CI")) throw new Error(`CI needs ${CHROMIUM} (see .ci/run)`);

Deno.test({
  name: "status page: loads, shows a running crawl's shards, and updates (headless chromium)",
  ignore: !haveChromium,
  fn: async () => {
    const reg = await spawnRegistry(["--synthetic", "20000", "--latency-ms", "60"]);
    const dir = await Deno.makeTempDir();
    const token = "browser-token-456";
    const server = spawnServer({
      CRAWL_TOKEN: token,
      KV_PATH: `${dir}/b.kv`,
      ALLOWED_SOURCES: reg.url,
    });
    const base = server.base;
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
    try {
      await waitHealthy(`${base}/healthz`);
      const created = await fetch(`${base}/crawls`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify({ source: reg.url, shards: 4, maxPage: 50, rebalance: false }),
      });
      assert.equal(created.status, 202);
      const { id } = await created.json();
      const page = await browser.newPage();
      await page.goto(base);
      assert.equal(await page.title(), "rankcrawl status");
      await page.fill("#token", token);
      await page.click("#auth button");
      const crawl = page.locator(`.crawl[data-crawl="${id}"]`);
      await crawl.waitFor({ timeout: 15_000 });
      await page.locator(`.crawl[data-crawl="${id}"][data-status="running"]`).waitFor({
        timeout: 15_000,
      });
      assert.equal(await crawl.locator(".shard").count(), 4, "one bar per shard");
      const first = Number(await crawl.getAttribute("data-items"));
      let later = first;
      for (let i = 0; i < 150 && later <= first; i++) {
        await new Promise((r) => setTimeout(r, 100));
        later = Number(await crawl.getAttribute("data-items"));
      }
      assert.ok(later > first, `the page updated by itself (${first} -> ${later} items)`);
      await page.locator(`.crawl[data-crawl="${id}"][data-status="done"]`).waitFor({
        timeout: 60_000,
      });
      assert.equal(Number(await crawl.getAttribute("data-items")), 20000);
      const html = await page.content();
      assert.ok(!html.includes(token), "the token is not written into the page");
    } finally {
      await browser.close();
      await server.stop();
      await reg.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
