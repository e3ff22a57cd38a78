/**
 * The npm registry's metadata answers from a mirrored packument: the whole document
 * (`application/json`), or the abbreviated form `npm install` asks for (`Accept:
 * application/vnd.npm.install-v1+json`), derived from it as the registry derives it: `name`,
 * `modified`, `dist-tags` and, for each version, the fields installing needs. An `ETag` from the
 * revision (and the form), so that `If-None-Match` answers 304 without a body.
 *
 * @module
 */

/** The media type of npm's abbreviated metadata. */
export const ABBREVIATED = "application/vnd.npm.install-v1+json";

/** Version fields the abbreviated form keeps (what npm's registry keeps). */
const VERSION_FIELDS = [
  "name",
  "version",
  "deprecated",
  "dependencies",
  "optionalDependencies",
  "devDependencies",
  "bundleDependencies",
  "bundledDependencies",
  "peerDependencies",
  "peerDependenciesMeta",
  "acceptDependencies",
  "bin",
  "directories",
  "dist",
  "engines",
  "cpu",
  "os",
  "libc",
  "_hasShrinkwrap",
  "hasInstallScript",
  "funding",
  "license",
];

/**
 * The abbreviated packument of `doc` (a whole one, parsed). A document that is not a packument
 * (no `versions`) gives `name`, `dist-tags` and empty `versions`.
 */
export function abbreviate(doc: Record<string, unknown>): Record<string, unknown> {
  const versions = (doc.versions ?? {}) as Record<string, Record<string, unknown>>;
  const out: Record<string, Record<string, unknown>> = {};
  for (const [v, meta] of Object.entries(versions)) {
    if (meta === null || typeof meta !== "object") continue;
    const kept: Record<string, unknown> = {};
    for (const f of VERSION_FIELDS) if (f in meta) kept[f] = meta[f];
    if (kept.hasInstallScript === undefined && hasInstallScript(meta)) kept.hasInstallScript = true;
    out[v] = kept;
  }
  const time = doc.time as Record<string, string> | undefined;
  return {
    name: doc.name ?? doc._id,
    modified: time?.modified ?? null,
    "dist-tags": doc["dist-tags"] ?? {},
    versions: out,
  };
}

function hasInstallScript(meta: Record<string, unknown>): boolean {
  const scripts = meta.scripts as Record<string, unknown> | undefined;
  return !!scripts && ["preinstall", "install", "postinstall"].some((s) => s in scripts);
}

/** The `ETag` of a document at `rev` in a form (`full` or `abbreviated`). */
export function etagOf(rev: string, form: "full" | "abbreviated"): string {
  return `"${rev}${form === "abbreviated" ? "-a" : ""}"`;
}

/** Whether an `If-None-Match` header names `etag` (or `*`). */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(",").map((t) => t.trim().replace(/^W\//, "")).some((t) =>
    t === etag || t === "*"
  );
}
