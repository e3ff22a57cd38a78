/**
 * Before a crawl with documents is made: are the documents where it will look for them? npm's
 * replica lists names but serves no documents (they are on registry.npmjs.org), and a crawl
 * pointed at it without a documents URL ran for hours, every document a 404, and ended "exact".
 * The first few ids listed are asked for; when every one answers 404, the crawl is not made, and
 * the error says what to give.
 *
 * @module
 */
import { PermanentError } from "../../base/errors.ts";
import { redactUrl } from "../../base/redact.ts";
import type { CrawlSpec } from "../../base/spec.ts";
import type { CrawlContext } from "./context.ts";
import { docsNotHereLine } from "../page/mod.ts";

/** Ids the check asks for, by default: the first ones listed. */
export const DOCS_CHECK_SAMPLE = 3;

/**
 * Resolves when the documents of `spec` may be where the crawl will ask for them: a crawl without
 * documents, an empty registry, any answer but 404 for one of the first `sample` ids, or no answer
 * within `timeoutMs` (the crawl's own retries and errors take it from there).
 * @throws PermanentError naming where documents were looked for and what to give instead, when
 * every id asked answered 404.
 */
export async function checkDocsHere(
  ctx: Pick<CrawlContext, "source" | "clock">,
  spec: CrawlSpec,
  options: {
    /** Ids asked for: the first ones listed. @default DOCS_CHECK_SAMPLE (3) */
    sample?: number;
    /** Longest the check waits for its answers, in milliseconds. @default 10000 */
    timeoutMs?: number;
  } = {},
): Promise<void> {
  if (!spec.docs) return;
  const { source, clock } = ctx;
  const sample = options.sample ?? DOCS_CHECK_SAMPLE;
  const done = new AbortController();
  const late = clock.sleep(options.timeoutMs ?? 10_000, done.signal).then(() => null);
  const asked = (async () => {
    const rows = (await source.list({ limit: sample })).rows;
    const answers = await Promise.all(rows.map((r) => source.doc(r.id)));
    return { ids: rows.map((r) => r.id), answers };
  })().catch(() => null); // a listing or a document that fails otherwise is not this check's
  try {
    const got = await Promise.race([asked, late]);
    if (!got || got.ids.length === 0) return;
    if (!got.answers.every((a) => a.kind === "error" && a.status === 404)) return;
    throw new PermanentError(docsNotHereLine(redactUrl(spec.docsUrl ?? spec.source), {
      docsUrlGiven: spec.docsUrl !== null,
      asked: got.ids.length,
      ids: got.ids,
    }));
  } finally {
    done.abort();
  }
}
