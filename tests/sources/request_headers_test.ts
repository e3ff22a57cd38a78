/**
 * Headers rankcrawl sends (`request_headers.ts`): its own `User-Agent`, the user's `--header`s for
 * every host or one, credentials never following a redirect to another origin, and a token given
 * on the command line reaching the registry but never a log line, an export or the KV file.
 */
import assert from "node:assert/strict";
import { VERSION } from "../../lib/base/version.ts";
import { UsageError } from "../../lib/base/errors.ts";
import { HttpClient } from "../../lib/sources/http/http.ts";
import { headersFor, parseHeader, USER_AGENT } from "../../lib/sources/http/request_headers.ts";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { runTask } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";
import { JumpingClock } from "../fake_clock.ts";

Deno.test("headers: the version said is deno.json's", async () => {
  const config = JSON.parse(await Deno.readTextFile(new URL("../../deno.json", import.meta.url)));
  assert.equal(VERSION, config.version);
  assert.equal(USER_AGENT, `rankcrawl/${config.version}`);
});

Deno.test("headers: 'Name: value' and 'HOST=Name: value' parse; bad ones are one line that never shows the value", () => {
  assert.deepEqual(parseHeader("Authorization: Bearer abc:def"), {
    host: null,
    name: "Authorization",
    value: "Bearer abc:def",
  });
  assert.deepEqual(parseHeader("Registry.NPMjs.org=X-Team:  mirror "), {
    host: "registry.npmjs.org",
    name: "X-Team",
    value: "mirror",
  });
  assert.deepEqual(parseHeader("127.0.0.1:8080=Accept: text/plain").host, "127.0.0.1:8080");
  assert.deepEqual(parseHeader("Cookie: a=b; c=d"), {
    host: null,
    name: "Cookie",
    value: "a=b; c=d",
  });
  const secret = "sk-live-0123456789";
  for (
    const [raw, re] of [
      [`Authorization ${secret}`, /no colon/],
      [`Bad Name: ${secret}`, /the name "Bad Name"/],
      [`Authorization:`, /the value is empty/],
      [`Authorization: ${secret}\r\nX-Evil: 1`, /not one line \(\d+ characters; not shown\)/],
      [`exa mple.com=Authorization: ${secret}`, /the name "exa mple\.com=Authorization"/],
    ] as [string, RegExp][]
  ) {
    const err = (() => {
      try {
        parseHeader(raw);
      } catch (e) {
        return e as Error;
      }
    })();
    assert.ok(err instanceof UsageError, raw);
    assert.match(err.message, re);
    assert.ok(!err.message.includes(secret), `the value is not shown: ${err.message}`);
  }
});

Deno.test("headers: per host, and every header given for every host kept to the first origin, whatever its name", () => {
  const user = [
    parseHeader("Authorization: Bearer t"),
    parseHeader("X-Team: mirror"),
    parseHeader("docs.example=Authorization: Bearer d"),
  ];
  const at = (url: string, first: string) =>
    Object.fromEntries(headersFor(new URL(url), user, { body: false, firstOrigin: first }));
  assert.deepEqual(at("https://reg.example/db/_all_docs", "https://reg.example"), {
    accept: "application/json",
    "accept-encoding": "identity",
    authorization: "Bearer t",
    "user-agent": USER_AGENT,
    "x-team": "mirror",
  });
  assert.equal(at("https://docs.example/pkg", "https://docs.example").authorization, "Bearer d");
  const redirected = at("https://cdn.example/db/x", "https://reg.example");
  assert.equal(redirected.authorization, undefined, "not to another origin");
  assert.equal(redirected["x-team"], undefined, "an X-Api-Key is as secret: not there either");
  assert.equal(redirected["user-agent"], USER_AGENT);
  // A header meant to follow a redirect names that host.
  const scoped = [...user, parseHeader("cdn.example=X-Team: mirror")];
  const toCdn = headersFor(new URL("https://cdn.example/db/x"), scoped, {
    body: false,
    firstOrigin: "https://reg.example",
  });
  assert.equal(toCdn.get("x-team"), "mirror");
  assert.equal(
    headersFor(new URL("https://reg.example/db"), [], { body: true, firstOrigin: "x" })
      .get("content-type"),
    "application/json",
  );
});

Deno.test("headers: the client sends them on every attempt, and a redirect elsewhere loses every one given for every host", async () => {
  const seen: { url: string; auth: string | null; key: string | null; ua: string | null }[] = [];
  const client = new HttpClient({
    headers: [parseHeader("Authorization: Bearer t"), parseHeader("X-Api-Key: k")],
    allowRedirect: () => true,
    clock: new JumpingClock(),
    fetch: (input, init) => {
      const h = new Headers(init?.headers);
      const url = String(input);
      seen.push({
        url,
        auth: h.get("authorization"),
        key: h.get("x-api-key"),
        ua: h.get("user-agent"),
      });
      if (url.includes("/moved")) {
        return Promise.resolve(
          new Response(null, { status: 302, headers: { location: "https://other.example/x" } }),
        );
      }
      if (seen.length === 1) return Promise.resolve(new Response("busy", { status: 503 }));
      return Promise.resolve(new Response("{}", { status: 200 }));
    },
  });
  await client.request({ url: "https://reg.example/db", maxBytes: 1024 }, () => null);
  await client.request({ url: "https://reg.example/moved", maxBytes: 1024 }, () => null);
  assert.deepEqual(seen, [
    { url: "https://reg.example/db", auth: "Bearer t", key: "k", ua: USER_AGENT },
    { url: "https://reg.example/db", auth: "Bearer t", key: "k", ua: USER_AGENT },
    { url: "https://reg.example/moved", auth: "Bearer t", key: "k", ua: USER_AGENT },
    { url: "https://other.example/x", auth: null, key: null, ua: USER_AGENT },
  ]);
});

Deno.test("headers: a token on the command line reaches the registry and its document host, and is nowhere in the output, the export or the KV file", async () => {
  const data = new RegistryData(await realNames(2_000));
  const reg = await startRegistry(data, npmReplicaProfile());
  const seen: { path: string; auth: string | null; ua: string | null; team: string | null }[] = [];
  // A recording front for both hosts: what each request carried.
  const front = (target: string) =>
    Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
      const u = new URL(req.url);
      seen.push({
        path: u.pathname,
        auth: req.headers.get("authorization"),
        ua: req.headers.get("user-agent"),
        team: req.headers.get("x-team"),
      });
      const res = await fetch(target + u.pathname + u.search, {
        method: req.method,
        body: req.body,
        headers: req.headers.get("content-type") ? { "content-type": "application/json" } : {},
      });
      // fetch has decoded the body: what said how it was encoded no longer holds.
      const headers = new Headers(res.headers);
      headers.delete("content-encoding");
      headers.delete("content-length");
      return new Response(res.body, { status: res.status, headers });
    });
  const regUrl = new URL(reg.url);
  const dbFront = front(regUrl.origin);
  const docsFront = front(reg.docsUrl!);
  const dbUrl = `http://127.0.0.1:${dbFront.addr.port}${regUrl.pathname}`;
  const docsHost = `127.0.0.1:${docsFront.addr.port}`;
  const dir = await Deno.makeTempDir();
  const secret = "s3cret-token-4f9a1c";
  try {
    const run = await runTask("crawl", [
      ...["--source", dbUrl, "--kv", `${dir}/c.kv`, "--shards", "2", "--docs"],
      ...["--docs-url", `http://${docsHost}`, "--header", `Authorization: Bearer ${secret}`],
      ...["--header", `${docsHost}=X-Team: mirror`],
    ]);
    assert.equal(run.code, 0, run.stderr);
    const exported = await runTask("export", ["--kv", `${dir}/c.kv`]);
    assert.equal(exported.code, 0, exported.stderr);
    assert.ok(seen.length > 2_000, `${seen.length} requests`);
    assert.ok(seen.every((s) => s.auth === `Bearer ${secret}` && s.ua === USER_AGENT));
    const docs = seen.filter((s) => !s.path.startsWith(regUrl.pathname));
    assert.ok(
      docs.length >= 2_000 && docs.every((s) => s.team === "mirror"),
      "the docs host's own",
    );
    assert.ok(seen.filter((s) => s.path.startsWith(regUrl.pathname)).every((s) => !s.team));
    for (const text of [run.stdout, run.stderr, exported.stdout, exported.stderr]) {
      assert.ok(!text.includes(secret));
    }
    for await (const e of Deno.readDir(dir)) {
      const bytes = await Deno.readFile(`${dir}/${e.name}`);
      assert.ok(!new TextDecoder("latin1").decode(bytes).includes(secret), `${e.name} holds it`);
    }
  } finally {
    await dbFront.shutdown();
    await docsFront.shutdown();
    await reg.close();
    await Deno.remove(dir, { recursive: true });
  }
});
