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

const LOCATE_PARAMS = ["source", "rank", "percentile", "key"];

/** Adds `GET /locate` to `app` (authentication is the caller's middleware). */
export function addLocateRoute(app: Hono, deps: LocateRouteDeps): void {
  app.get("/locate", async (c) => {
    const q = (k: string) => c.req.query(k);
    const raw = q("source");
    if (raw === undefined) throw new InputError("source is required");
    const unknown = Object.keys(c.req.queries()).filter((k) => !LOCATE_PARAMS.includes(k));
    if (unknown.length > 0) {
      throw new InputError(
        `unknown parameter ${unknown[0]}: /locate takes source and one of rank, percentile or ` +
          `key${unknown[0] === "view" ? " (views: deno task locate --view)" : ""}`,
      );
    }
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
      // Bytes that are not UTF-8 (`%ED%A0%80`, a lone surrogate) are no id any registry holds; the
      // router would hand their percent-encoded text over as if it were the key.
      if (!key.isWellFormed() || !decodesAsUtf8(new URL(c.req.url).search, "key")) {
        throw new InputError("key is not well-formed UTF-8");
      }
      const [place] = await locateKeys(source, [key]);
      return c.json({ ...place, requests: source.requests });
    }
    const kind = q("rank") !== undefined ? "rank" : "percentile";
    const query = parseRankQuery(kind, q(kind)!, { maxValues: 100 });
    return c.json(await locateRanks(source, query));
  });
}

/** True when every `name=` value of the raw query `search` decodes as UTF-8. */
function decodesAsUtf8(search: string, name: string): boolean {
  for (const pair of search.replace(/^\?/, "").split("&")) {
    const [k, v = ""] = pair.split("=", 2);
    if (k !== name) continue;
    try {
      decodeURIComponent(v.replace(/\+/g, " "));
    } catch {
      return false;
    }
  }
  return true;
}
