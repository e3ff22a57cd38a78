/**
 * What a registry was seen to serve, learned from its answers (`LearnedCaps` in the source
 * interface): which refusals teach what, and the one line a crawl says about it. A registry may
 * lack any optional feature (npm's replica since 2025 serves GET only, refuses parameters it does
 * not know and puts no sequence on listings): each is learned at its first refusal and the request
 * asked again in a form the registry takes, never retried without end and never fatal.
 *
 * @module
 */
import { PermanentError } from "../../base/errors.ts";
import { type LearnedCaps, UNKNOWN_CAPS } from "../../plan/source.ts";

/** Statuses with which a server refuses a method or a route it does not serve at all. */
const METHOD_REFUSED = new Set([400, 404, 405, 406, 415, 501]);

/**
 * True when `err` is a registry's refusal of a request's form (a 4xx that will come again), as
 * opposed to a failure worth another attempt: what makes a source ask in another form.
 */
export function isRefusal(err: unknown): err is PermanentError {
  return err instanceof PermanentError && err.status !== undefined && err.status >= 400 &&
    err.status < 500;
}

/** True when `err` refuses a POST as such (405, 501, or a 4xx a read-only front answers). */
export function isMethodRefusal(err: unknown): err is PermanentError {
  return err instanceof PermanentError && METHOD_REFUSED.has(err.status ?? 0);
}

/** A fresh record of what is learned, from what a crawl remembered. */
export function learnedFrom(remembered?: Partial<LearnedCaps> | null): LearnedCaps {
  return { ...UNKNOWN_CAPS, ...(remembered ?? {}) };
}

/**
 * The one line a crawl says about its registry: what it serves of what is optional, and what the
 * crawl does instead where it does not. `facts` are what the source knows besides (its page limit,
 * whether `skip` is used, where documents come from).
 */
export function capabilityLine(
  caps: Readonly<LearnedCaps>,
  facts: { maxPage: number; docsUrl?: string | null; view?: boolean } = { maxPage: 0 },
): string {
  const parts: string[] = [];
  // Short words, each explained in docs/glossary.md ("registry: …").
  const seq = {
    unknown: "listing seq not asked",
    served: "listings carry the feed's seq",
    ignored: "no seq on listings (ignored)",
    refused: "no seq on listings (refused)",
  }[caps.listingSeq];
  parts.push(seq);
  if (!facts.view && caps.post !== "unknown") {
    parts.push(
      caps.post === "no"
        ? caps.getKeys === "no"
          ? "GET only, no keys= (revisions one listing each)"
          : "GET only (revisions by ?keys=)"
        : "POST taken",
    );
  }
  if (caps.pending !== "unknown") {
    parts.push(caps.pending === "yes" ? "feed says what is pending" : "feed without pending");
  }
  if (caps.docs !== "unknown") {
    const how = {
      include_docs: "with the listings",
      bulk_get: "by _bulk_get",
      get: "one GET each",
    };
    parts.push(`documents ${how[caps.docs]}${facts.docsUrl ? ` from ${facts.docsUrl}` : ""}`);
  }
  if (facts.maxPage > 0) parts.push(`pages of up to ${facts.maxPage} rows`);
  return `registry: ${parts.join("; ")}`;
}
