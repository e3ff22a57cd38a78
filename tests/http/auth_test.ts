import assert from "node:assert/strict";
import { isAllowedSource, parseAllowedSources, safeEqual } from "../../lib/http/auth.ts";

Deno.test("auth: constant-time token comparison gives the right answers", async () => {
  assert.equal(await safeEqual("abc", "abc"), true);
  assert.equal(await safeEqual("abc", "abd"), false);
  assert.equal(await safeEqual("abc", "abcd"), false);
  assert.equal(await safeEqual("", ""), true);
});

Deno.test("auth: source allowlist matches scheme, host, port and path boundaries", () => {
  const allowed = parseAllowedSources(
    "http://127.0.0.1:5984/registry, https://replicate.npmjs.com/",
  );
  const cases: [string, boolean][] = [
    ["http://127.0.0.1:5984/registry", true],
    ["http://127.0.0.1:5984/registry/", true],
    ["http://127.0.0.1:5984/registry/sub", true],
    ["http://127.0.0.1:5984/registry2", false],
    ["http://127.0.0.1:5985/registry", false],
    ["https://127.0.0.1:5984/registry", false],
    ["https://replicate.npmjs.com/registry", true],
    ["https://replicate.npmjs.com.evil.example/registry", false],
    ["http://169.254.169.254/latest/meta-data", false],
    ["http://user:pw@127.0.0.1:5984/registry", false],
    ["file:///etc/passwd", false],
    ["not a url", false],
  ];
  for (const [url, ok] of cases) assert.equal(isAllowedSource(url, allowed), ok, url);
  assert.deepEqual(parseAllowedSources(undefined), []);
  assert.throws(() => parseAllowedSources("ftp://x/"), /not http/);
  assert.throws(() => parseAllowedSources("garbage"));
});
