/**
 * Access control for the HTTP API: bearer tokens compared in constant time, and the source
 * allowlist that keeps crawls from being pointed at metadata services or private hosts (SSRF).
 *
 * @module
 */

export { safeEqual } from "../base/safe_equal.ts";

/** Parses `ALLOWED_SOURCES`: comma-separated http(s) URL prefixes; invalid entries throw. */
export function parseAllowedSources(raw: string | undefined): string[] {
  if (!raw) return [];
  return raw.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const u = new URL(s); // throws on garbage: a misconfigured allowlist must not start
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new Error(`ALLOWED_SOURCES entry is not http(s): ${s}`);
    }
    return u.href;
  });
}

/**
 * True when `url` is an http(s) URL under one of the `allowed` prefixes: same scheme, host and
 * port, and a path equal to the prefix's path or below it at a `/` boundary. Credentials in the URL
 * and any other host (including look-alikes such as `allowed.com.evil.com`) are refused.
 */
export function isAllowedSource(url: string, allowed: readonly string[]): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  if ((u.protocol !== "http:" && u.protocol !== "https:") || u.username || u.password) return false;
  return allowed.some((prefix) => {
    const p = new URL(prefix);
    if (p.protocol !== u.protocol || p.host !== u.host) return false;
    const base = p.pathname.replace(/\/+$/, "");
    const path = u.pathname.replace(/\/+$/, "");
    return path === base || path.startsWith(base + "/");
  });
}
