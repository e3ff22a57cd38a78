/**
 * What rankcrawl says about itself and what a user adds to its requests: every request carries
 * `User-Agent: rankcrawl/<version>` (a registry can tell who asks, as npm asks of followers), and
 * `--header 'Name: value'` adds a header to every request of the crawl, or with
 * `--header 'HOST=Name: value'` only to requests for that host (a token for the document host that
 * the registry must not see). Credentials (`Authorization`, `Cookie`, `Proxy-Authorization`) given
 * for every host are never sent to another origin a redirect leads to. Header values are never
 * logged, stored with a crawl, or echoed in an error.
 *
 * @module
 */
import { UsageError } from "../../base/errors.ts";
import { VERSION } from "../../base/version.ts";

/** The `User-Agent` of every request unless a header given by the user replaces it. */
export const USER_AGENT = `rankcrawl/${VERSION}`;

/** A header a user adds: for every host of the crawl (`host` null) or for one host. */
export interface RequestHeader {
  /** `host[:port]` as in URLs, lower case; null: every host of the crawl. */
  host: string | null;
  /** Header name, as given. */
  name: string;
  /** Header value (a secret, for some). */
  value: string;
}

/** Header names whose values are credentials: kept to the origins they were meant for. */
const CREDENTIALS = new Set(["authorization", "cookie", "proxy-authorization"]);

/** A header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Parses `Name: value` or `HOST=Name: value`. The error names what is wrong and never repeats the
 * value (it may be a token). @throws UsageError
 */
export function parseHeader(raw: string): RequestHeader {
  // `HOST=` only where what comes before the first `=` is a host[:port] (a value may hold `=`).
  const eq = raw.indexOf("=");
  const scoped = eq > 0 && /^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(raw.slice(0, eq).trim());
  const host = scoped ? raw.slice(0, eq).trim().toLowerCase() : null;
  const rest = scoped ? raw.slice(eq + 1) : raw;
  const at = rest.indexOf(":");
  const name = at < 0 ? "" : rest.slice(0, at).trim();
  const value = at < 0 ? "" : rest.slice(at + 1).trim();
  if (!TOKEN.test(name)) {
    throw new UsageError(
      `--header must be 'Name: value' or 'HOST=Name: value' (a header name is letters, digits ` +
        `and -; got ${at < 0 ? "no colon" : `the name ${JSON.stringify(name.slice(0, 40))}`})`,
    );
  }
  if (/[\r\n\0]/.test(value) || value === "") {
    throw new UsageError(
      `--header ${name}: the value is ${value === "" ? "empty" : "not one line"} ` +
        `(${value.length} characters; not shown)`,
    );
  }
  return { host, name, value };
}

/**
 * The headers of a request to `url`: `accept` (and `content-type` with a body), the user agent,
 * then the user's headers meant for that host. `firstOrigin` is the origin the request was made
 * to before redirects: credentials for every host go only there.
 */
export function headersFor(
  url: URL,
  user: readonly RequestHeader[],
  o: { body: boolean; firstOrigin: string },
): Headers {
  const h = new Headers({ accept: "application/json", "user-agent": USER_AGENT });
  if (o.body) h.set("content-type", "application/json");
  for (const u of user) {
    if (u.host !== null && u.host !== url.host) continue;
    if (u.host === null && CREDENTIALS.has(u.name.toLowerCase()) && url.origin !== o.firstOrigin) {
      continue;
    }
    h.set(u.name, u.value);
  }
  return h;
}
