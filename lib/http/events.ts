/**
 * `GET /events`: server-sent events for the status page. Every `everyMs` the status of every
 * crawl that changed since the last event is sent (`event: crawl`, the status report as JSON), and
 * crawls that vanished are announced (`event: gone`). The page reads the stream with `fetch` (so
 * the bearer token stays in a header), and falls back to polling when the stream breaks.
 *
 * @module
 */
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { crawlStatus, listCrawlSummaries } from "../engine/mod.ts";

/** Adds `GET /events` to `app`. */
export function addEventRoutes(
  app: Hono,
  deps: { kv: Deno.Kv; now: () => number; everyMs?: number },
): void {
  app.get("/events", (c) =>
    streamSSE(c, async (stream) => {
      const last = new Map<string, string>();
      let id = 0;
      while (!stream.aborted && !stream.closed) {
        const summaries = await listCrawlSummaries(deps.kv);
        const seen = new Set<string>();
        for (const s of summaries) {
          seen.add(s.id);
          const report = await crawlStatus(deps.kv, s.id, { now: deps.now }).catch(() => null);
          if (!report) continue;
          const text = JSON.stringify(report);
          if (last.get(s.id) === text) continue;
          last.set(s.id, text);
          await stream.writeSSE({ event: "crawl", data: text, id: String(id++) });
        }
        for (const gone of [...last.keys()].filter((k) => !seen.has(k))) {
          last.delete(gone);
          await stream.writeSSE({ event: "gone", data: JSON.stringify({ id: gone }) });
        }
        await stream.sleep(deps.everyMs ?? 1000);
      }
    }));
}
