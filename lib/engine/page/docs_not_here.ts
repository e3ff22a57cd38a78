/**
 * The one line a user reads when a crawl asks for documents where they are not: said by the check
 * before a crawl is made (`crawl/docs_check.ts`) and by a page that finds it later
 * (`page_docs.ts`).
 *
 * @module
 */

/**
 * What to say when documents are not where a crawl asks for them (every one asked answered 404):
 * where it looked, and what to give instead. Shared by the check before a crawl is made and the
 * page that finds it later.
 */
export function docsNotHereLine(
  where: string,
  o: { docsUrlGiven: boolean; asked: number; ids: readonly string[] },
): string {
  return `documents are not at ${where}/<id>: ${o.asked} ids listed ` +
    `(${o.ids.slice(0, 3).map((id) => JSON.stringify(id)).join(", ")}${
      o.asked > 3 ? ", …" : ""
    }) each answered 404. ` +
    (o.docsUrlGiven
      ? "Give --docs-url (docsUrl) the base documents are served under"
      : "This registry serves them elsewhere: give --docs-url (docsUrl) their base; " +
        "for npm's replica, --docs-url https://registry.npmjs.org");
}
