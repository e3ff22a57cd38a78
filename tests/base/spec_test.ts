import assert from "node:assert/strict";
import { InputError } from "../../lib/base/errors.ts";
import { buildSpec, crawlIdFor, normalizeSourceUrl } from "../../lib/base/spec.ts";
import { urlFlag } from "../../lib/cli/flags.ts";
import { normalizeSource } from "../../lib/http/crawl_routes.ts";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";

Deno.test("spec: one registry written differently is one crawl, from the CLI, the API and a source", async () => {
  const ways = [
    "http://127.0.0.1:5984/registry",
    "HTTP://127.0.0.1:5984/registry/",
    " http://127.0.0.1:5984/registry ",
    "http://127.0.0.1:5984/x/../registry//",
  ];
  const ids = new Set<string>();
  for (const raw of ways) {
    ids.add(await crawlIdFor(buildSpec({ source: raw, shards: 8 })));
    ids.add(await crawlIdFor(buildSpec({ source: urlFlag("source", raw), shards: 8 })));
    ids.add(await crawlIdFor(buildSpec({ source: normalizeSource(raw, "source"), shards: 8 })));
    assert.equal(new CouchSource(raw).description, "http://127.0.0.1:5984/registry");
  }
  assert.equal(ids.size, 1);
  assert.equal(normalizeSourceUrl("HTTPS://Example.COM:443/db", "s"), "https://example.com/db");
});

Deno.test("spec: what cannot be a database URL is refused in one line, naming the field", () => {
  const refused: [string, RegExp][] = [
    ["not a url", /source is not a URL/],
    ["ftp://x/db", /http\(s\)/],
    ["http://x/db?x=1", /without \? or #/],
    ["http://x/db#f", /without \? or #/],
    ["http://x/db?", /without \? or #/],
    ["http://x/registry/..%2f_users", /encoded/],
    ["http://x/registry/%2e%2e/_users", /encoded/],
    ["http://x/registry%5c..", /encoded/],
    ["http://u:p@x/db", /credentials/],
  ];
  for (const [raw, why] of refused) {
    assert.throws(() => normalizeSourceUrl(raw, "source"), (e: Error) => {
      assert.ok(e instanceof InputError, raw);
      assert.match(e.message, why, raw);
      return true;
    });
  }
  // The CLI keeps credentials (the user's own KV file; shown redacted) and says which flag.
  assert.equal(urlFlag("source", "http://u:p@x/db/"), "http://u:p@x/db");
  assert.throws(() => urlFlag("source", "http://u:p@x/db?x"), (e: Error) => {
    assert.match(
      e.message,
      /^--source must be a database URL, without \? or #: "http:\/\/x\/db\?x"$/,
    );
    assert.ok(!e.message.includes("u:p"), "credentials never shown");
    return true;
  });
});
