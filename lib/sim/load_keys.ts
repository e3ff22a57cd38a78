/**
 * Loads a registry's key set from flags shared by `deno task registry`, `deno task crawl` (demo mode)
 * and the benchmarks: `--names FILE`, `--synthetic N`, or the bundled npm names.
 *
 * @module
 */
import { UsageError } from "../base/errors.ts";
import { bundledNames, readNames, syntheticNames } from "./names.ts";

/**
 * Returns sorted distinct keys from a names file, a synthetic generator over the bundled names, or
 * the bundled names themselves when neither is given.
 */
export async function loadKeys(
  options: { names?: string; synthetic?: number; seed?: number },
): Promise<string[]> {
  if (options.names !== undefined && options.synthetic !== undefined) {
    throw new UsageError("give --names or --synthetic, not both");
  }
  if (options.names !== undefined) return await readNames(options.names);
  const base = await bundledNames();
  if (options.synthetic !== undefined) {
    return syntheticNames(base, options.synthetic, { seed: options.seed });
  }
  return base;
}
