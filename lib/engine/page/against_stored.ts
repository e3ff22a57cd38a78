/**
 * A document that carries no revision (npm's abbreviated metadata: no `_rev`) held against the one
 * it replaces: a change's document whose `modified` is no later than the stored document's, for an
 * item whose revision changed, is a cache behind the registry (registry.npmjs.org serves the
 * previous packument for a while after `_changes` reports a new one), not the change's document.
 * Without this, a stale document would be stored as the new revision's, with nothing to show it.
 *
 * @module
 */
import type { DocResult } from "../../plan/source.ts";
import type { Attempt, Failed } from "./page_docs.ts";

const dec = new TextDecoder();

/** The `modified` time of a document's JSON text, in ms, or null when it has none. */
function modifiedOf(text: string | undefined): number | null {
  if (text === undefined) return null;
  try {
    const m = JSON.parse(text) as { modified?: unknown; time?: { modified?: unknown } };
    const raw = typeof m.modified === "string" ? m.modified : m.time?.modified;
    const ms = typeof raw === "string" ? Date.parse(raw) : NaN;
    return Number.isFinite(ms) ? ms : null;
  } catch {
    return null;
  }
}

/** The JSON text of a document result, when it holds one in memory. */
function textOf(r: DocResult): string | undefined {
  if (r.kind === "doc") return r.json;
  if (r.kind === "raw") return dec.decode(r.bytes);
  return undefined;
}

/** The stored modified time a behind error's reason carries (see {@linkcode againstStored}). */
function modifiedInReason(reason: string | undefined): number | null {
  const m = reason === undefined ? null : /stored \(modified ([^)]+)\)/.exec(reason);
  const ms = m ? Date.parse(m[1]) : NaN;
  return Number.isFinite(ms) ? ms : null;
}

/**
 * `r` (the document served for a change to `row.rev`) held against `stored` (what the item holds
 * now): a failed attempt marked `behind` when the document served is older, by `modified`, than
 * the stored one, or no newer when the item's revision changed. An item already recorded behind
 * has no document: its reason keeps the stored `modified` it was held against, so the same change
 * given again (a trail of late changes, a repair) is held against it too. `r` as it is when either
 * side has no `modified`, or nothing is stored.
 */
export function againstStored(
  row: { id: string; rev: string },
  r: Attempt,
  stored: { rev: string; doc?: string; error?: { reason: string } } | undefined,
): Attempt | Failed {
  if (!stored || (r.kind !== "doc" && r.kind !== "raw")) return r;
  const was = stored.doc !== undefined
    ? modifiedOf(stored.doc)
    : modifiedInReason(stored.error?.reason);
  const now = modifiedOf(textOf(r));
  if (was === null || now === null) return r;
  const changed = stored.rev !== row.rev || stored.doc === undefined;
  if (changed ? now > was : now >= was) return r;
  return {
    kind: "failed",
    status: 0,
    reason: `the document served was modified ${new Date(now).toISOString()}, no later than ` +
      `the one stored (modified ${new Date(was).toISOString()}) for an earlier revision: a ` +
      `cache behind the registry`,
    behind: true,
  };
}
