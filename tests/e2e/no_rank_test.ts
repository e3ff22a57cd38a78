/**
 * A registry without a rank oracle: `offset` absent from its listings (a replica that stopped
 * serving it) or always 0 (pouchdb-server, some proxies), with `skip` and without it (npm's
 * replica refuses it). The crawl is planned without ranks (by skip; without skip, cut at once where
 * a prior of npm's names falls, no row listed first), never fails for it, and its copy is whole:
 * every id at its revision.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { runTask } from "../helpers.ts";
import { realNames } from "../registry_timeline.ts";

Deno.test("no rank oracle: offset absent or always 0, with and without skip: planned without ranks, exact", async () => {
  const data = new RegistryData(await realNames(4_000));
  const cases = [
    { offsetMode: "absent" as const, profile: {}, method: /skipping rows/ },
    { offsetMode: "zero" as const, profile: {}, method: /skipping rows/ },
    {
      offsetMode: "absent" as const,
      profile: npmReplicaProfile(),
      method: /cut where npm's names fall in equal shares, no row listed first/,
    },
  ];
  const dir = await Deno.makeTempDir();
  try {
    for (const [i, c] of cases.entries()) {
      const reg = await startRegistry(data, { ...c.profile, offsetMode: c.offsetMode });
      try {
        const kv = `${dir}/c${i}.kv`;
        const run = await runTask("crawl", ["--source", reg.url, "--kv", kv, "--shards", "8"]);
        const what = `${c.offsetMode}${c.profile === cases[2].profile ? " (npm replica)" : ""}`;
        assert.equal(run.code, 0, `${what}: ${run.stderr.slice(-1500)}`);
        assert.match(run.stderr, /planned 4,000 items into 8 shards/, what);
        if (i === 2) assert.doesNotMatch(run.stderr, /of equal count/, "a prior's shares are not");
        assert.match(run.stderr, c.method, what);
        assert.match(run.stdout, /checked: total: 4000 items/, what);
        if (i === 2) {
          assert.match(run.stdout, /its 8 shards were cut by a prior and each listed to its end/);
          // A few requests learn the registry gives no rank; then no pass over every row first.
          const requests = Number(/with (\d+) listing requests/.exec(run.stderr)?.[1]);
          assert.ok(requests <= 20, run.stderr);
        }
        const exported = await runTask("export", ["--kv", kv]);
        assert.equal(exported.code, 0, exported.stderr);
        const items = exported.stdout.trim().split("\n").map((l) => JSON.parse(l));
        assert.deepEqual(items.map((it) => it.id), data.keys, what);
        assert.ok(items.every((it) => it.rev === data.rev(it.id)), what);
      } finally {
        await reg.close();
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
