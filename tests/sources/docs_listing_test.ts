import assert from "node:assert/strict";
import { ListedDoc, parseDocsListing } from "../../lib/sources/answers/docs_listing.ts";

/** The answer as JSON.parse reads it, each ListedDoc turned back into the value its text holds. */
function unlisted(v: unknown): unknown {
  if (v instanceof ListedDoc) {
    assert.ok(!/[\r\n]/.test(v.json), "a document's text is one line");
    const doc = JSON.parse(v.json);
    assert.equal(v.id, typeof doc._id === "string" ? doc._id : undefined);
    assert.equal(v.rev, typeof doc._rev === "string" ? doc._rev : undefined);
    return doc;
  }
  if (Array.isArray(v)) return v.map(unlisted);
  if (typeof v === "object" && v !== null) {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unlisted(x)]));
  }
  return v;
}

/** Asserts the scan reads `text` as JSON.parse does, with `docs` rows' documents cut. */
function same(text: string, docs: number) {
  const got = parseDocsListing(text);
  assert.notEqual(got, null, text.slice(0, 200));
  assert.deepEqual(unlisted(got), JSON.parse(text));
  const rows = (got as { rows?: { doc?: unknown }[] }).rows ?? [];
  assert.equal(rows.filter((r) => r?.doc instanceof ListedDoc).length, docs, text.slice(0, 200));
}

Deno.test("docs listing: answers as CouchDB, pouchdb-server and pretty-printers write them", () => {
  const doc = (id: string) => ({ _id: id, _rev: "1-a", name: id, v: { doc: { _id: "inner" } } });
  const rows = ["a", 'b"q', "c\\"].map((id) => ({
    id,
    key: id,
    value: { rev: "1-a" },
    doc: doc(id),
  }));
  const body = { total_rows: 3, offset: 0, rows };
  same(JSON.stringify(body), 3);
  same(JSON.stringify(body, null, 2), 3);
  same(JSON.stringify(body) + "\n", 3);
  // CouchDB: one row a line, separated by ",\r\n".
  same(
    `{"total_rows":3,"offset":0,"rows":[\r\n` +
      rows.map((r) => JSON.stringify(r)).join(",\r\n") + `\r\n]}\n`,
    3,
  );
  // Members in another order, update_seq, rows first.
  same(
    JSON.stringify({
      rows: rows.map((r) => ({ doc: r.doc, value: r.value, key: r.key, id: r.id })),
      update_seq: "5-g1AAAA",
      offset: 0,
      total_rows: 3,
    }),
    3,
  );
  same(JSON.stringify({ total_rows: 0, offset: 0, rows: [] }), 0);
  same(JSON.stringify({ total_rows: 5, offset: 5, rows: [] }) + "  ", 0);
});

Deno.test("docs listing: strings that look like structure, escapes, and what is not a document", () => {
  const tricky = {
    _id: 'x"}]{[,\\',
    _rev: "2-\u00e9\u{1f600}",
    s: '"doc":{"_id":"no"}',
    back: "\\\\\\",
    nl: "line\nbreak\r\n",
    arr: [{ doc: { _id: "deeper" } }, [], {}, null, true, 1.5e-7],
  };
  const rows = [
    { id: tricky._id, key: tricky._id, value: { rev: tricky._rev }, doc: tricky },
    { id: "gone", key: "gone", value: { rev: "3-z", deleted: true }, doc: null },
    { id: "nodoc", key: "nodoc", value: { rev: "1-n" } },
    { id: "num", key: "num", value: { rev: "1-n" }, doc: 5 },
    { id: "arr", key: "arr", value: { rev: "1-n" }, doc: [1, { _id: "a" }] },
    { id: "noid", key: "noid", value: { rev: "1-n" }, doc: { _id: 7, _rev: null, x: {} } },
    null,
    { id: "last", key: "last", value: { rev: "1-l" }, doc: {} },
  ];
  same(JSON.stringify({ total_rows: 9, offset: 1, rows }), 3);
  // Escaped names are names too.
  same(
    `{"total_rows":1,"offset":0,"rows":[{"id":"e","key":"e","value":{},"d\\u006fc":{"\\u005fid":"e","_rev":"1-\\"r"}}]}`,
    1,
  );
  // A later `doc` member wins, as in JSON.parse, whichever of the two is an object.
  same(
    `{"rows":[{"id":"a","doc":{"_id":"a"},"doc":null},{"id":"b","doc":1,"doc":{"_id":"b"}}]}`,
    1,
  );
  same(`{"rows":[{"id":"a","doc":{"_id":"1"},"doc":{"_id":"2"}}]}`, 1);
  // A row that is not an object holds no document, whatever the row before it named last.
  same(`{"rows":[{"id":"a","doc":{"_id":"a"}},["x",{"_id":"b"}],{"id":"c","doc":{}}]}`, 2);
  // `doc` outside the rows is never cut.
  same(`{"doc":{"_id":"top"},"rows":[{"doc":{"_id":"r"}}],"other":[{"doc":{"_id":"o"}}]}`, 1);
  // Pretty-printed documents lose only the line breaks between tokens.
  const pretty = `{"rows":[{"id":"p","doc":{\n  "_id": "p",\r\n  "s": "a\\nb"\n}}]}`;
  same(pretty, 1);
  const p = parseDocsListing(pretty) as { rows: { doc: ListedDoc }[] };
  assert.equal(p.rows[0].doc.json, `{  "_id": "p",  "s": "a\\nb"}`);
});

Deno.test("docs listing: anything cut short, unbalanced or not an answer object is left to JSON.parse", () => {
  const text = JSON.stringify({
    total_rows: 2,
    offset: 0,
    rows: [
      { id: "a", key: "a", value: { rev: "1-a" }, doc: { _id: "a", s: '}]\\"' } },
      { id: "b", key: "b", value: { rev: "1-b" }, doc: { _id: "b", n: [1, { x: 2 }] } },
    ],
  });
  for (let cut = 0; cut < text.length; cut++) {
    assert.equal(parseDocsListing(text.slice(0, cut)), null, `cut at ${cut}`);
  }
  for (
    const bad of [
      "",
      "[]",
      "<html>{}</html>",
      `{"rows":[}`,
      `{"rows":[{"doc":{"_id":"a"]}]}`,
      `{"rows":[]} x`,
      `{"rows":[]}{}`,
      `{"rows":[],"rows":[{"doc":{}}]}`,
      `{"rows":[{"doc":{"a":tru}}],}`,
    ]
  ) {
    assert.equal(parseDocsListing(bad), null, bad);
  }
});

Deno.test("docs listing: random documents read as JSON.parse reads them", () => {
  let seed = 7;
  const rnd = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
  const chars = ['"', "\\", "{", "}", "[", "]", ",", ":", "a", "é", "\u{1f600}", "\n", " ", "/"];
  const str = () => Array.from({ length: rnd(8) }, () => chars[rnd(chars.length)]).join("");
  const value = (depth: number): unknown => {
    switch (depth > 3 ? rnd(4) : rnd(7)) {
      case 0:
        return str();
      case 1:
        return rnd(1000) - 500;
      case 2:
        return [null, true, false][rnd(3)];
      case 3:
        return rnd(2) ? "_id" : "doc";
      case 4:
        return Array.from({ length: rnd(4) }, () => value(depth + 1));
      default:
        return Object.fromEntries(
          Array.from({ length: rnd(5) }, () => [rnd(3) ? str() : "_rev", value(depth + 1)]),
        );
    }
  };
  for (let n = 0; n < 300; n++) {
    const rows = Array.from({ length: rnd(6) }, (_, i) => {
      const doc = rnd(5) ? { _id: str(), _rev: rnd(3) ? str() : 3, body: value(0) } : value(0);
      return { id: `r${i}`, key: `r${i}`, value: { rev: str() }, doc };
    });
    const body = { total_rows: rows.length, offset: 0, rows };
    const objects = rows.filter((r) =>
      typeof r.doc === "object" && r.doc !== null && !Array.isArray(r.doc)
    ).length;
    same(JSON.stringify(body, null, rnd(2) ? 0 : 1), objects);
  }
});
