/**
 * What the mirror answers for one document: the stored JSON text as CouchDB would give it (with
 * `_id` and `_rev`; `_revisions` when asked), or why there is none. Items the crawl recorded with an
 * error or over the size cap have no body: they are answered 404 with the reason, never as a
 * document a replicator would store as the content (a stub would overwrite the real one); so are
 * pending ones (their host behind their revision), until their document lands.
 *
 * @module
 */
import type { ExportedItem } from "../engine/mod.ts";

/** A document as the mirror serves it, or why not. */
export type Served =
  | { ok: true; json: string }
  | { ok: false; status: 404; error: string; reason: string };

/** The body of `it` as JSON text: its stored document, or `{_id, _rev}` for a keys-only crawl. */
export function servedDoc(
  it: ExportedItem,
  o: { docs: boolean; revs?: boolean },
): Served {
  if (it.error || it.tooLarge) {
    return {
      ok: false,
      status: 404,
      error: "not_found",
      reason: it.tooLarge
        ? "the mirror holds no body for this document: it was over the crawl's size cap"
        : it.pending
        ? "the mirror holds no body for this revision yet: its document host still serves an " +
          `older one (${it.error!.reason}); it is asked again and served once it lands`
        : `the mirror holds no body for this document: its host answered ${it.error!.status} ` +
          `(${it.error!.reason})`,
    };
  }
  let json = o.docs && it.doc !== undefined
    ? it.doc
    : `{"_id":${JSON.stringify(it.id)},"_rev":${JSON.stringify(it.rev)}}`;
  if (!/"_rev"\s*:/.test(json.slice(0, 4096)) && json.startsWith("{")) {
    // Documents stored without their revision (abbreviated ones): the listing's is theirs.
    json = `{"_rev":${JSON.stringify(it.rev)},${json.slice(1)}`;
  }
  if (o.revs) {
    const [n, hash] = it.rev.split("-", 2);
    const revisions = `"_revisions":{"start":${Number(n) || 1},"ids":[${
      JSON.stringify(hash ?? it.rev)
    }]}`;
    json = json.trimEnd().endsWith("}") && json.trim() !== "{}"
      ? `${json.trimEnd().slice(0, -1)},${revisions}}`
      : `{${revisions}}`;
  }
  return { ok: true, json };
}

/**
 * A deletion's tombstone as CouchDB gives it: `{_id, _rev, _deleted: true}`, with `_revisions`
 * (the tombstone, then the revision it deleted) when asked.
 */
export function tombstoneDoc(
  id: string,
  rev: string,
  o: { from?: string; revs?: boolean },
): string {
  let json = `{"_id":${JSON.stringify(id)},"_rev":${JSON.stringify(rev)},"_deleted":true`;
  if (o.revs) {
    const [n, hash] = rev.split("-", 2);
    const ids = [hash, ...(o.from ? [o.from.split("-", 2)[1] ?? o.from] : [])];
    json += `,"_revisions":{"start":${Number(n) || 1},"ids":${JSON.stringify(ids)}}`;
  }
  return json + "}";
}
