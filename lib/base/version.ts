/**
 * The version of rankcrawl, as `deno.json` spells it (`version_test` holds them equal): what the
 * default `User-Agent` says to registries.
 *
 * @module
 */

/** This release. */
export const VERSION = "0.5.0";
