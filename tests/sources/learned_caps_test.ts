/**
 * A source learns what its registry serves at the first refusal and asks again in a form it takes:
 * `update_seq` on listings (refused or ignored), POST (revisions by GET keys, then by listings),
 * `pending`; each refusal is paid once, and the crawl's line says what was found.
 */
import assert from "node:assert/strict";
import { RegistryData } from "../../lib/sim/registry/registry_data.ts";
import { type RegistryOptions, startRegistry } from "../../lib/sim/registry/registry_server.ts";
import { npmReplicaProfile } from "../../lib/sim/registry/registry_profile.ts";
import { CouchSource } from "../../lib/sources/couch/couch_source.ts";
import { capabilityLine, learnedFrom } from "../../lib/sources/couch/learned_caps.ts";
import { bundledNames, syntheticNames } from "../../lib/sim/names.ts";

async function withRegistry(
  options: RegistryOptions,
  run: (url: string, data: RegistryData, stats: { allDocs: number }) => Promise<void>,
) {
  const data = new RegistryData(syntheticNames(await bundledNames(), 3_000, { seed: 5 }));
  const reg = await startRegistry(data, options);
  try {
    await run(reg.url, data, reg.stats);
  } finally {
    await reg.close();
  }
}

Deno.test("learned: a refused update_seq is asked once, then listings go without it", async () => {
  await withRegistry(npmReplicaProfile(), async (url, data, stats) => {
    const source = new CouchSource(url);
    const first = await source.list({ start: "m", limit: 1, updateSeq: true });
    assert.equal(first.seq, undefined);
    assert.equal(first.offset, data.rank("m"));
    assert.equal(source.learned.listingSeq, "refused");
    assert.equal(stats.allDocs, 2, "the refused request and the one without update_seq");
    await source.list({ start: "n", limit: 1, updateSeq: true });
    assert.equal(stats.allDocs, 3, "asked without it from then on");
    // Another 400 is not blamed on update_seq: it is thrown as it is.
    await assert.rejects(() => source.list({ start: "n", limit: 1, skip: 3 }), /skip/);
  });
  await withRegistry(npmReplicaProfile("ignore"), async (url) => {
    const source = new CouchSource(url);
    assert.equal((await source.list({ limit: 1, updateSeq: true })).seq, undefined);
    assert.equal(source.learned.listingSeq, "ignored");
  });
  await withRegistry({}, async (url, data) => {
    const source = new CouchSource(url);
    assert.equal((await source.list({ limit: 1, updateSeq: true })).seq, String(data.updateSeq));
    assert.equal(source.learned.listingSeq, "served");
  });
});

Deno.test("learned: revisions by POST, else GET keys, else one listing each; exact either way", async () => {
  const cases: [RegistryOptions, string, string][] = [
    [{}, "yes", "unknown"],
    [{ getOnly: true }, "no", "yes"],
    [{ getOnly: true, refuseKeys: true }, "no", "no"],
  ];
  for (const [options, post, getKeys] of cases) {
    await withRegistry(options, async (url, data) => {
      const source = new CouchSource(url);
      // Enough ids for several GET chunks, and ids that are not there.
      const ids = [...data.keys.slice(0, 250), "zzz-not-there", "@nope/none"];
      const revs = await source.revs!(ids);
      assert.deepEqual(revs, ids.map((id) => data.rev(id) ?? null), JSON.stringify(options));
      assert.equal(source.learned.post, post);
      assert.equal(source.learned.getKeys, getKeys);
      // Learned: the next lookup goes straight to the form that works.
      assert.deepEqual(await source.revs!([data.keys[7]]), [data.rev(data.keys[7])]);
    });
  }
});

Deno.test("learned: `pending` on _changes, the document mode, and the one line", async () => {
  await withRegistry({ ...npmReplicaProfile(), docsElsewhere: true }, async (url, data) => {
    const source = new CouchSource(url, { docsUrl: "http://127.0.0.1:9/" });
    const feed = await source.changes("0", 5);
    assert.equal(feed.pending, undefined);
    assert.equal(feed.lastSeq, "5");
    assert.equal(source.learned.pending, "no");
    assert.equal(await source.docMode(), "get");
    assert.equal(source.learned.docs, "get");
    await source.list({ limit: 1, updateSeq: true });
    await source.revs!([data.keys[0]]);
    assert.equal(
      capabilityLine(source.learned, { maxPage: 10_000, docsUrl: source.docsUrl }),
      "registry: no seq on listings (refused); GET only (revisions by ?keys=); feed without " +
        "pending; documents one GET each from http://127.0.0.1:9; pages of up to 10000 rows",
    );
  });
  await withRegistry({}, async (url) => {
    const source = new CouchSource(url);
    assert.equal((await source.changes("0", 5)).pending, 3_000 - 5);
    assert.equal(source.learned.pending, "yes");
    assert.equal(await source.docMode(), "include_docs");
  });
  await withRegistry({ getOnly: true, includeDocs: false }, async (url) => {
    const source = new CouchSource(url);
    assert.equal(await source.docMode(), "get", "no _bulk_get without POST");
  });
});

Deno.test("learned: a source opened with what a crawl remembered asks in those forms at once", async () => {
  await withRegistry(npmReplicaProfile(), async (url, _data, stats) => {
    const source = new CouchSource(url, {
      learned: learnedFrom({ listingSeq: "refused", post: "no", getKeys: "yes" }),
    });
    await source.list({ limit: 1, updateSeq: true });
    assert.equal(stats.allDocs, 1, "no refused request first");
  });
});
