/**
 * What a crawl will cost, said before its first progress line: requests (listing pages and
 * documents), the time they take at the pace allowed (the `--rate` cap, or what the documents
 * sampled took with the requests the crawl keeps in flight), and the bytes to store (the plan's
 * count times a sample of document sizes). An estimate from a sample, said as one.
 *
 * @module
 */
import type { CrawlSpec } from "../base/spec.ts";
import type { DocResult, Source } from "../plan/source.ts";
import { duration, n } from "./progress.ts";

/** Bytes a stored item takes beside its document (its key, revision and record), about. */
const ITEM_BYTES = 120;

/** Documents sampled at most. */
export const ESTIMATE_SAMPLE = 16;

/** What an estimate is made from. */
export interface EstimateInput {
  /** The crawl's spec (documents or not, page size, shards, concurrency). */
  spec: CrawlSpec;
  /** Items the plan counted. */
  total: number;
  /** The cap on requests a second (`--rate`), or null. */
  ratePerSecond: number | null;
  /** Requests the crawl keeps in flight at once (workers × document concurrency). */
  inFlight: number;
  /** Rows a listing page of the crawl takes (`rowsPerPage`). */
  rowsPerPage: number;
}

/** An estimate (see the module comment). */
export interface Estimate {
  /** Items the plan counted. */
  items: number;
  /** Listing requests, about. */
  listingRequests: number;
  /** Document requests (one each), or 0 without documents. */
  docRequests: number;
  /** Documents sampled, their mean size in bytes (null: none sampled) and mean time in ms. */
  sample: { count: number; meanBytes: number | null; meanMs: number | null };
  /** Requests a second assumed, and why. */
  perSecond: number | null;
  /** `--rate` or `sampled`. */
  paceFrom: "rate" | "sampled" | "unknown";
  /** Seconds the requests take at that pace, or null. */
  seconds: number | null;
  /** Bytes to store, about. */
  bytes: number;
}

/** One sampled document: what came (null: the request failed) and how long it took. */
export interface DocSample {
  /** The id asked for. */
  id: string;
  /** What came, or null when the request failed. */
  doc: DocResult | null;
  /** Time it took, in milliseconds. */
  ms: number;
}

/**
 * The documents of `ids` (at most {@linkcode ESTIMATE_SAMPLE}), asked at once through `source`
 * (its pacer and breaker): what an estimate and a check of `--doc-fields` read.
 */
export function sampleDocs(source: Source, ids: readonly string[]): Promise<DocSample[]> {
  return Promise.all(
    ids.slice(0, ESTIMATE_SAMPLE).map(async (id) => {
      const started = performance.now();
      const doc = await source.doc(id).catch(() => null);
      return { id, doc, ms: performance.now() - started };
    }),
  );
}

/**
 * The fields of `fields` that none of the sampled documents has (after the crawl's cut: a field a
 * document has is kept), or none when fewer than 5 documents came to tell: a misspelt
 * `--doc-fields` name keeps nothing of every document.
 */
export function fieldsNoneHas(samples: readonly DocSample[], fields: readonly string[]): string[] {
  const docs = samples.flatMap((s) => {
    if (s.doc?.kind !== "doc") return [];
    try {
      const parsed = JSON.parse(s.doc.json);
      return parsed && typeof parsed === "object" ? [parsed as Record<string, unknown>] : [];
    } catch {
      return [];
    }
  });
  if (docs.length < 5) return [];
  return fields.filter((f) => docs.every((d) => !Object.hasOwn(d, f)));
}

/** The bytes of one document as it arrived. */
function docBytes(d: DocResult): number | null {
  if (d.kind === "doc") return d.json.length;
  if (d.kind === "raw") return d.bytes.length;
  if (d.kind === "stored" || d.kind === "tooLarge") return d.bytes;
  return null;
}

/**
 * An estimate of the crawl `input` describes, from `samples` of its documents
 * ({@linkcode sampleDocs}); documents that failed are left out.
 */
export function estimateCrawl(input: EstimateInput, samples: readonly DocSample[]): Estimate {
  const { spec, total } = input;
  const got = (spec.docs ? samples : []).flatMap((s) => {
    const bytes = s.doc ? docBytes(s.doc) : null;
    return bytes === null ? [] : [{ bytes, ms: s.ms }];
  });
  const mean = (xs: number[]) => xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
  const meanBytes = mean(got.map((s) => s.bytes));
  const meanMs = mean(got.map((s) => s.ms));
  const listingRequests = Math.ceil(total / Math.max(1, input.rowsPerPage)) + spec.shards;
  const docRequests = spec.docs ? total : 0;
  const requests = listingRequests + docRequests;
  const fromSample = meanMs !== null && meanMs > 0 ? input.inFlight / (meanMs / 1000) : null;
  // Under a cap the sample's times include its waits in the pacer's queue: the cap is the pace
  // (at most: a slower host is slower still).
  const useRate = input.ratePerSecond !== null;
  const perSecond = useRate ? input.ratePerSecond : fromSample;
  return {
    items: total,
    listingRequests,
    docRequests,
    sample: { count: got.length, meanBytes, meanMs },
    perSecond,
    paceFrom: useRate ? "rate" : fromSample !== null ? "sampled" : "unknown",
    seconds: perSecond ? requests / perSecond : null,
    bytes: total * ITEM_BYTES + (spec.docs ? total * (meanBytes ?? 0) : 0),
  };
}

/** Bytes as a person reads them: `776 GiB`, `12.5 MiB`. */
export function bytesText(b: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) (b /= 1024, i++);
  return `${i === 0 ? Math.round(b) : b < 10 ? b.toFixed(1) : Math.round(b)} ${units[i]}`;
}

/**
 * The estimate in one line: `estimate: 4,521,000 items: 453 listing and 4,521,000 document
 * requests; about 7h51m at about 160 requests/s (64 in flight, 400 ms each as sampled); documents
 * about 180 KiB each (16 sampled): about 776 GiB to store`.
 */
export function estimateLine(e: Estimate, o: { inFlight: number }): string {
  const requests = e.docRequests > 0
    ? `${n(e.listingRequests)} listing and ${n(e.docRequests)} document requests`
    : `${n(e.listingRequests)} listing requests`;
  const pace = e.perSecond === null
    ? e.docRequests > 0 ? "; time unknown (no document of the sample answered)" : ""
    : `; about ${duration(e.seconds)} at about ${n(e.perSecond)} requests/s (` +
      (e.paceFrom === "rate"
        ? "--rate; at most: a slower host takes longer"
        : `${o.inFlight} in flight, ${n(e.sample.meanMs ?? 0)} ms each as sampled`) +
      ")";
  const docs = e.docRequests === 0
    ? ""
    : e.sample.meanBytes === null
    ? "; document sizes unknown (none of the sample answered)"
    : `; documents about ${bytesText(e.sample.meanBytes)} each (${e.sample.count} sampled)`;
  return `estimate: ${n(e.items)} items: ${requests}${pace}${docs}: about ` +
    `${bytesText(e.bytes)} to store`;
}
