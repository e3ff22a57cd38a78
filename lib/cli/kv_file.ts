/**
 * Opening a KV file that must already hold crawls (export, the crawl list): a path that is not
 * there is one line, not a new empty file; a KV Connect URL needs its token.
 *
 * @module
 */
import { UsageError } from "../base/errors.ts";
import { openKvFile } from "./local_crawl.ts";

/**
 * Opens `path` (a KV file or a KV Connect URL) for reading what it holds.
 * @throws UsageError when the file is not there, or a URL is given without `DENO_KV_ACCESS_TOKEN`.
 */
export async function openStoredKv(path: string): Promise<Deno.Kv> {
  if (/^https?:\/\//i.test(path)) {
    if (!Deno.env.get("DENO_KV_ACCESS_TOKEN")) {
      throw new UsageError(`a KV Connect URL needs its token in DENO_KV_ACCESS_TOKEN`);
    }
  } else {
    try {
      await Deno.stat(path);
    } catch {
      throw new UsageError(`no KV file at ${path}`);
    }
  }
  return await openKvFile(path);
}
