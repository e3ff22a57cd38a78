/**
 * What rankcrawl says about itself and what a user adds to its requests: every request carries
 * `User-Agent: rankcrawl/<version>` (a registry can tell who asks, as npm asks of followers), and
 * `--header 'Name: value'` adds a header to every request of the crawl, or with
 * `--header 'HOST=Name: value'` only to requests for that host (a token for the document host that
 * the registry must not see). A header given for every host goes only to the origins the crawl was
 * given (its registry, its document host: the origin each request was first made to), never to
 * another origin a redirect leads to, whatever its name (an `X-Api-Key` is as secret as an
 * `Authorization`); one meant to follow a redirect there must name that host. Header values are
 * never logged, stored with a crawl, or echoed in an error.
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

/** A header name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Parses `Name: value` or `HOST=Name: value`. The error names what is wrong and never repeats the
 * value (it may be a token). @throws UsageError
 *
 * @example
 * ```ts
 * parseHeader("Authorization: Bearer abc"); // every host
 * parseHeader("registry.example.com=Authorization: Bearer abc"); // that host's requests only
 * ```
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
  if (name.toLowerCase() === "accept-encoding") {
    throw new UsageError(
      "--header Accept-Encoding: rankcrawl asks for bodies as they are and inflates a compressed " +
        "one itself, within its bounds; it cannot be changed",
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
 * to before redirects: headers for every host go only there.
 */
export function headersFor(
  url: URL,
  user: readonly RequestHeader[],
  o: { body: boolean; firstOrigin: string; ifNoneMatch?: string },
): Headers {
  // Bodies come as sent (`identity`): a compressed one is inflated here, within the answer's cap
  // (`body_read.ts`), where fetch would inflate it whole ahead of any reader (a gzip bomb).
  const h = new Headers({
    accept: "application/json",
    "accept-encoding": "identity",
    "user-agent": USER_AGENT,
  });
  if (o.body) h.set("content-type", "application/json");
  if (o.ifNoneMatch !== undefined) h.set("if-none-match", o.ifNoneMatch);
  for (const u of user) {
    if (u.host !== null && u.host !== url.host) continue;
    if (u.host === null && url.origin !== o.firstOrigin) continue;
    h.set(u.name, u.value);
  }
  return h;
}
