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
  /** Ids to sample documents of (spread over the key space: the plan's cuts). */
  sampleIds: readonly string[];
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

/** The bytes of one document as it arrived. */
function docBytes(d: DocResult): number | null {
  if (d.kind === "doc") return d.json.length;
  if (d.kind === "raw") return d.bytes.length;
  if (d.kind === "stored" || d.kind === "tooLarge") return d.bytes;
  return null;
}

/**
 * An estimate of the crawl `input` describes, asking `source` for the documents of a few sampled
 * ids (through the same pacer as the crawl). Documents that fail are left out of the sample.
 */
export async function estimateCrawl(source: Source, input: EstimateInput): Promise<Estimate> {
  const { spec, total } = input;
  const ids = input.sampleIds.slice(0, ESTIMATE_SAMPLE);
  const sampled = spec.docs
    ? await Promise.all(ids.map(async (id) => {
      const started = performance.now();
      const d = await source.doc(id).catch(() => null);
      const bytes = d ? docBytes(d) : null;
      return bytes === null ? null : { bytes, ms: performance.now() - started };
    }))
    : [];
  const got = sampled.filter((s) => s !== null);
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
