/**
 * Documents of a page, the best way the source allows: already in the listing (`include_docs`), in
 * a few `_bulk_get` requests, or one GET per id at a concurrency that adapts to the registry (it
 * grows while answers stay fast and shrinks when they slow down or fail).
 *
 * Every document gets an outcome; one bad document never stops the crawl. A document behind its
 * row's revision on its host (an older one, or a 404 for a package just published) is stored
 * **pending** with the item at its listed revision, and asked again later without holding the page
 * (`crawl/pending_ask.ts`). A document whose
 * requests keep failing transiently fails the page, which is retried later; once the page failed
 * twice, such a document gets a second round of attempts and, failing again, is recorded as an
 * error (the registry is up; that document is bad). The page also fails when every document
 * failed (the registry is down). A page whose documents are nearly all refused (401/403: the
 * document host wants credentials) fails the crawl at once with one line, instead of recording
 * millions of errors. Rows at or past the shard's current end are never started: a split gave them
 * to another shard.
 *
 * @module
 */
import { DOCUMENT_RETRY } from "../../base/retry_policy.ts";
import { errorLine, FatalError, TransientError } from "../../base/errors.ts";
import type { AdaptiveLimit } from "../../base/adaptive_limit.ts";
import { mapPool } from "../../base/pool.ts";
import { compareKeys } from "../../plan/keys.ts";
import {
  type DocMode,
  type DocResult,
  heldDocBytes,
  type Row,
  rowsDocBytes,
  type Source,
} from "../../plan/source.ts";
import { INLINE_DOC_BYTES, type ItemInput } from "../items/mod.ts";
import { type DocBudget, PageCharges } from "./doc_memory.ts";
import type { DocSlots } from "./doc_slots.ts";
import { docsNotHereLine } from "./docs_not_here.ts";

/** What fetching a page's documents needs. */
export interface DocFetch {
  /** How the source serves documents. */
  mode: DocMode;
  /** Concurrency of GETs (shared by the shard's pages). */
  limit: AdaptiveLimit;
  /**
   * The crawl's slots in this process: beyond `limit`, GETs borrow the ones other shards leave
   * idle (`doc_slots.ts`). @default the shard's own concurrency only
   */
  slots?: DocSlots;
  /** `_bulk_get` ids per request. @default 100 */
  bulkSize?: number;
  /** The shard's current end (a split may shrink it while documents are fetched). */
  currentEnd: () => string | null;
  /** Called as rows are started: the first unstarted row's key and how many are started. */
  progress?: (nextKey: string | null, started: number) => void;
  /**
   * Earlier attempts of this page that failed. A document that keeps failing transiently fails
   * the page (retried later, with backoff) until the page has failed this many times; then it is
   * recorded on its item and the crawl goes on. @default 2
   */
  pageFailures?: number;
  /** Page attempts after which a document that keeps failing is recorded. @default 2 */
  recordAfter?: number;
  /**
   * The process's budget of document bytes in memory: each document is charged when it arrives,
   * and new requests wait while it is spent. @default no budget
   */
  memory?: DocBudget;
  /**
   * Takes a document out of memory at once when it is large (writes its chunks: `spillDocument`),
   * so that the page does not hold it. @default documents stay with the page
   */
  spill?: (id: string, doc: DocResult) => Promise<DocResult>;
}

/**
 * A document that arrived: held against its listed revision, charged to the budget, and taken out
 * of memory at once when large (refunded then). What stays with the page is refunded when the
 * page is written (`rowsDocBytes`).
 */
async function arrived(row: Row, r: Attempt, o: DocFetch): Promise<Attempt> {
  const checked = againstListing(row, r);
  const bytes = attemptBytes(checked);
  if (bytes === 0) return checked;
  o.memory?.charge(bytes);
  if (!o.spill || (checked.kind !== "doc" && checked.kind !== "raw")) return checked;
  const kept = await o.spill(row.id, checked);
  if (kept.kind !== "doc" && kept.kind !== "raw") o.memory?.refund(bytes);
  return kept;
}

/** The bytes an outcome holds in memory: a document's text or bytes, else 0. */
function attemptBytes(r: Attempt | undefined): number {
  return r?.kind === "failed" ? 0 : heldDocBytes(r);
}

/**
 * A document request that kept failing transiently (its own error, or the page's). `behind`: the
 * answer was older than the listing (a document host behind the registry), which a pause mends.
 */
export type Failed = {
  kind: "failed";
  status: number;
  reason: string;
  behind?: true;
  /** A behind answer's `ETag` (what to ask with next time). */
  etag?: string;
};

/** What became of one document request. */
export type Attempt = DocResult | Failed;

/** The attempt a transient failure of one document's request leaves (its first line). */
function failedAttempt(err: TransientError): Attempt {
  return { kind: "failed", status: err.status ?? 0, reason: errorLine(err) };
}

/**
 * The page's rows with their documents' outcomes, cut before the first row at or past the current
 * end. What it charged to `memory` and does not hand back in the items (documents behind their
 * listing, rows after the cut, every document when it throws) is refunded before it returns;
 * nothing it started runs on after it. @throws TransientError when every document failed
 * transiently; FatalError when nearly all were refused.
 */
export async function fetchDocs(source: Source, rows: Row[], o: DocFetch): Promise<ItemInput[]> {
  const charges = o.memory && new PageCharges(o.memory);
  try {
    const items = await outcomes(source, rows, { ...o, memory: charges });
    charges?.keepOnly(rowsDocBytes(items));
    return items;
  } catch (err) {
    charges?.keepOnly(0);
    throw err;
  }
}

async function outcomes(source: Source, rows: Row[], o: DocFetch): Promise<ItemInput[]> {
  let results: Attempt[];
  if (o.mode === "include_docs") {
    results = [];
    for (const row of rows) results.push(row.doc ? await arrived(row, row.doc, o) : undefined!);
    // Rows the listing could not carry (its answer would have been too large) are fetched by id.
    const missing = rows.flatMap((r, i) => r.doc === undefined ? [i] : []);
    if (missing.length > 0) {
      const fetched = await fetchEach(source, missing.map((i) => rows[i]), o);
      missing.forEach((i, j) => results[i] = fetched[j]);
    }
  } else if (o.mode === "bulk_get" && source.bulkDocs) {
    results = await fetchBulk(source, rows, o);
  } else {
    results = await fetchEach(source, rows, o);
  }
  const cut = results.findIndex((r) => r === undefined);
  const kept = cut < 0 ? results : results.slice(0, cut);
  const record = (o.pageFailures ?? 0) >= (o.recordAfter ?? DOCUMENT_RETRY.recordAfterPageFailures);
  if (record) await secondRound(source, rows, kept, o);
  judge(kept, rows, source, record);
  return kept.map((r, i) => ({
    id: rows[i].id,
    rev: (r.kind === "doc" || r.kind === "raw") && r.docRev && r.docRev !== rows[i].rev &&
        newer(r.docRev, rows[i].rev)
      ? r.docRev
      : rows[i].rev,
    doc: r.kind === "failed" ? failedDoc(r) : r,
  }));
}

/**
 * What an item holds for a document that was not had: one behind its listing is pending (asked
 * again later: `pending_ask.ts`, with the ETag it was served with), any other an error for good.
 */
export function failedDoc(r: Failed): DocResult {
  return r.behind
    ? {
      kind: "error",
      status: r.status,
      reason: r.reason,
      later: true,
      ...(r.etag !== undefined ? { etag: r.etag } : {}),
    }
    : { kind: "error", status: r.status, reason: `gave up: ${r.reason}` };
}

/** The generation of a CouchDB revision (`3-abc…` → 3), or null for anything else. */
function generation(rev: string): number | null {
  const m = /^(\d+)-/.exec(rev);
  return m ? Number(m[1]) : null;
}

/** True when revision `a` is of a later generation than `b`. */
function newer(a: string, b: string): boolean {
  const [ga, gb] = [generation(a), generation(b)];
  return ga !== null && gb !== null && ga > gb;
}

/**
 * A document held against the revision its row was listed with. A later revision is taken (the
 * document changed since it was listed; the item gets that revision). An older one, or another one
 * of the same generation, is not the document listed (a cache or replica behind): a failed
 * attempt, asked again with the page, and recorded as the item's error if it keeps coming. So is
 * an answer the source says may change soon (`later`: a lagging document host's 404).
 */
export function againstListing<T extends Attempt>(
  row: { id: string; rev: string },
  r: T,
): T | Failed {
  // What was served behind is asked again with its ETag (a 304 then costs no body).
  const etag = r && "etag" in r && r.etag !== undefined ? { etag: r.etag } : {};
  if (r?.kind === "error" && r.later) {
    return { kind: "failed", status: r.status, reason: r.reason, behind: true, ...etag };
  }
  const served = r?.kind === "doc" || r?.kind === "raw" || r?.kind === "stored" ? r.docRev : null;
  if (!served || served === row.rev) return r;
  if (generation(row.rev) === null || newer(served, row.rev)) return r;
  return {
    kind: "failed",
    status: 0,
    reason: `the document served is revision ${served.slice(0, 40)}, not the listed ` +
      row.rev.slice(0, 40),
    behind: true,
    ...etag,
  };
}

/**
 * On the attempt that would record them, documents that failed transiently while others were
 * served get a second round of attempts (one GET each): on a registry dropping a fifth of its
 * answers, four failures in a row hit some document of a page by chance, eight practically never,
 * and the document recorded must be one that keeps failing, not an unlucky one. (One behind its
 * listing is pending, not failed: it is asked again later, `pending_ask.ts`.) Where every document
 * failed, the registry is down and the page fails instead.
 */
async function secondRound(source: Source, rows: Row[], results: Attempt[], o: DocFetch) {
  const again = results.flatMap((r, i) => r.kind === "failed" && !r.behind ? [i] : []);
  if (again.length === 0 || again.length === results.length) return;
  await mapPool(again, async (i) => {
    try {
      results[i] = await arrived(rows[i], await source.doc(rows[i].id), o);
    } catch (err) {
      if (!(err instanceof TransientError)) throw err;
      results[i] = failedAttempt(err);
    }
  }, { concurrency: Math.max(1, o.limit.value) });
}

/** A page this large whose every document answered 404 says the documents are elsewhere. */
const ALL_MISSING_ROWS = 50;

/**
 * Fails the page or the crawl when the outcomes say the registry, not a document, is wrong: every
 * document failed (the registry is down), or a few keep failing and the page has not been retried
 * enough to call them bad (`record` false), or nearly all were refused.
 */
function judge(results: Attempt[], rows: Row[], source: Source, record: boolean): void {
  // A document behind its listing is pending (its host answered), not failed.
  const failed = results.flatMap((r, i) =>
    r.kind === "failed" && !r.behind ? [{ ...r, id: rows[i].id }] : []
  );
  if (results.length > 0 && failed.length === results.length) {
    throw new TransientError(`every document of the page failed (${failed[0].reason})`);
  }
  if (failed.length > 0 && !record) {
    throw new TransientError(
      `${failed.length} document(s) kept failing, e.g. ${JSON.stringify(failed[0].id)}: ` +
        failed[0].reason,
    );
  }
  // Listed ids whose documents are all missing: the crawl asks the wrong host (a registry whose
  // listing is on one host and documents on another), not a page of deleted documents.
  const missing =
    results.filter((r) => (r.kind === "error" || r.kind === "failed") && r.status === 404).length;
  if (missing >= ALL_MISSING_ROWS && missing === results.length) {
    throw new FatalError(docsNotHereLine(source.docsUrl ?? source.description, {
      docsUrlGiven: Boolean(source.docsUrl),
      asked: missing,
      ids: rows.map((r) => r.id),
    }));
  }
  const refused = results.filter((r) =>
    r.kind === "error" && (r.status === 401 || r.status === 403)
  );
  if (refused.length >= 20 && refused.length >= 0.9 * results.length) {
    const status = (refused[0] as { status: number }).status;
    throw new FatalError(
      `the document host of ${source.description} refuses access (HTTP ${status} for ` +
        `${refused.length} of ${results.length} documents); give it credentials or another --docs-url`,
    );
  }
}

/**
 * One GET per row, in row order, at the adaptive concurrency; rows past the end unstarted. After
 * an error that is not transient no request starts, and the ones in flight are waited for before
 * it is thrown (their documents are charged to the budget: the caller refunds them).
 */
async function fetchEach(source: Source, rows: Row[], o: DocFetch): Promise<Attempt[]> {
  const out = new Array<Attempt>(rows.length);
  let next = 0;
  let inFlight = 0;
  let stopped = false;
  let waiting = false;
  let failure: { err: unknown } | null = null;
  await new Promise<void>((resolve, reject) => {
    // Within the shard's own concurrency, or in a slot the crawl's other shards leave idle.
    const slot = () =>
      inFlight < o.limit.value ? (o.slots?.own(), true) : (o.slots?.borrow() ?? false);
    const pump = () => {
      while (!stopped && next < rows.length) {
        if (o.memory?.full) {
          // The process holds its budget of documents: the next request waits for room.
          if (!waiting) {
            waiting = true;
            o.memory.room().then(() => (waiting = false, pump()));
          }
          break;
        }
        const end = o.currentEnd();
        if (end !== null && compareKeys(rows[next].id, end) >= 0) {
          stopped = true; // this row and the rest belong to a split-off shard now
          break;
        }
        if (!slot()) break;
        const i = next++;
        inFlight++;
        o.progress?.(rows[next]?.id ?? null, next);
        const retries = source.retries ?? 0;
        // A large document is stored while the source still holds its answer's permit.
        const keep = o.spill ? (_: string, d: DocResult) => o.spill!(rows[i].id, d) : undefined;
        // What will be written to chunks anyway is read as bytes: never text and objects too.
        const rawOverBytes = o.spill ? INLINE_DOC_BYTES : undefined;
        source.doc(rows[i].id, { keep, rawOverBytes }).then(async (r) => {
          // Retries on the way (429s, 503s) mean the registry pushes back, even if it then served.
          if ((source.retries ?? 0) > retries) o.limit.failure();
          else o.limit.success();
          out[i] = await arrived(rows[i], r, o);
        }, (err) => {
          if (!(err instanceof TransientError)) throw err;
          // Network failures (timeouts, 5xx, refused) past their attempts make it a suspect.
          o.limit.failure();
          out[i] = failedAttempt(err);
        }).catch((err) => {
          failure ??= { err };
          stopped = true;
        }).then(() => {
          inFlight--;
          o.slots?.done();
          pump();
        });
      }
      if (inFlight > 0 || (!stopped && (waiting || next < rows.length))) return;
      if (failure) reject(failure.err);
      else resolve();
    };
    pump();
  });
  return out;
}

/** `_bulk_get` in groups of `bulkSize` ids, a few groups at once. */
async function fetchBulk(source: Source, rows: Row[], o: DocFetch): Promise<Attempt[]> {
  const size = o.bulkSize ?? 100;
  const out = new Array<Attempt>(rows.length);
  const groups: number[] = [];
  for (let i = 0; i < rows.length; i += size) groups.push(i);
  // Groups in flight are waited for after an error (mapPool), as in fetchEach.
  await mapPool(groups, async (from) => {
    const end = o.currentEnd();
    const ids = rows.slice(from, from + size).map((r) => r.id)
      .filter((id) => end === null || compareKeys(id, end) < 0);
    if (ids.length === 0) return;
    o.progress?.(rows[from + ids.length]?.id ?? null, from + ids.length);
    try {
      const docs = await source.bulkDocs!(ids);
      for (let j = 0; j < docs.length; j++) {
        out[from + j] = await arrived(rows[from + j], docs[j], o);
      }
    } catch (err) {
      if (!(err instanceof TransientError)) throw err;
      const failed = { kind: "failed" as const, status: err.status ?? 0, reason: err.message };
      ids.forEach((_, j) => out[from + j] = failed);
    }
  }, { concurrency: Math.max(1, Math.min(4, o.limit.value)) });
  return out;
}
