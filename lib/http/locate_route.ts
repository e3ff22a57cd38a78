/**
 * `GET /locate?source=URL&percentile=P[,P...]` (or `rank=`, or `key=`): the rank oracle over HTTP,
 * as `deno task locate` answers it. Same token and allowlist rules as `POST /crawls`: the source is
 * normalized, must sit under ALLOWED_SOURCES, and is never followed outside it.
 *
 * @module
 */
import type { Hono } from "hono";
import { InputError } from "../base/errors.ts";
import { redactUrl } from "../base/redact.ts";
import { locateKeys, locateRanks, parseRankQuery } from "../plan/locate.ts";
import type { Source } from "../plan/source.ts";
import { isAllowedSource } from "./auth.ts";
import { normalizeSource } from "./crawl_routes.ts";

/** What the route needs. */
export interface LocateRouteDeps {
  /** URL prefixes a source may sit under. */
  allowedSources: readonly string[];
  /** Opens a source at an allowed, normalized URL. */
  openSource: (url: string) => Source;
}

/** Adds `GET /locate` to `app` (authentication is the caller's middleware). */
export function addLocateRoute(app: Hono, deps: LocateRouteDeps): void {
  app.get("/locate", async (c) => {
    const q = (k: string) => c.req.query(k);
    const raw = q("source");
    if (raw === undefined) throw new InputError("source is required");
    const given = ["rank", "percentile", "key"].filter((k) => q(k) !== undefined);
    if (given.length !== 1) throw new InputError("give exactly one of rank, percentile or key");
    const url = normalizeSource(raw, "source");
    if (!isAllowedSource(url, deps.allowedSources)) {
      return c.json(
        { error: `source not allowed: ${redactUrl(url)} is outside ALLOWED_SOURCES` },
        403,
      );
    }
    const source = deps.openSource(url);
    const key = q("key");
    if (key !== undefined) {
      if (key.length > 4000) throw new InputError("key is longer than 4000 characters");
      const [place] = await locateKeys(source, [key]);
      return c.json({ ...place, requests: source.requests });
    }
    const kind = q("rank") !== undefined ? "rank" : "percentile";
    const query = parseRankQuery(kind, q(kind)!, { maxValues: 100 });
    return c.json(await locateRanks(source, query));
  });
}
