/**
 * The KV file of the command line, and what its failures mean for a user, in one line each:
 * opening it (a lock held a moment waited out; a path Deno will not let a task write said so), one
 * that must already hold crawls (export, the crawl list: a missing path is not a new empty file; a
 * KV Connect URL needs its token), and a file that cannot be written or read (full, damaged, or
 * either).
 *
 * @module
 */
import { errorLine, FatalError, StorageError, UsageError } from "../base/errors.ts";
import { kvFailureKind, kvOp, storageCause } from "../engine/mod.ts";

/** Opens the KV file, or says in one line why it cannot be opened. */
export async function openKvFile(path: string): Promise<Deno.Kv> {
  try {
    // Another process on the same file may hold its lock for a moment: waited out, bounded.
    return await kvOp(() => Deno.openKv(path));
  } catch (err) {
    if (err instanceof StorageError) throw new StorageError(storageLine(err, path), { cause: err });
    // Deno's own advice (run again with --allow-all) is not one a `deno task` user can follow:
    // system paths (/proc, /dev, /sys) need every permission, which the tasks never ask for.
    const refused = err instanceof Deno.errors.NotCapable ||
      err instanceof Deno.errors.PermissionDenied;
    const why = refused
      ? "Deno lets no task write there (a system path); give --kv a file in an ordinary folder"
      : errorLine(err);
    throw new FatalError(`cannot open KV at ${path}: ${why}`, { cause: err });
  }
}

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

/**
 * Runs `read` on the stored KV at `path` ({@linkcode openStoredKv}) and closes it: a file that
 * cannot be read fails as one line ({@linkcode storageLine}), other errors as they are.
 */
export async function readStoredKv<T>(path: string, read: (kv: Deno.Kv) => Promise<T>): Promise<T> {
  const kv = await openStoredKv(path);
  try {
    return await read(kv);
  } catch (err) {
    if (kvFailureKind(err) !== "storage") throw err;
    throw new StorageError(storageLine(err as Error, path, { reading: true }), { cause: err });
  } finally {
    kv.close();
  }
}

/**
 * What a KV file that cannot be written or read means for the user, in one line: a full disk
 * loses nothing written; a damaged file may have lost anything; an I/O error may be either (a disk
 * that filled says so too), so it promises only what holds for both.
 */
export function storageLine(
  err: Error,
  kvPath: string,
  options: { reading?: boolean } = {},
): string {
  const what = options.reading ? "read" : "write";
  switch (storageCause(err)) {
    case "full":
      return `cannot ${what} ${kvPath}: the disk is full (${err.message}); nothing stored is ` +
        "lost: free some space and run the same command again to resume";
    case "damaged":
      return `${kvPath} is damaged (${err.message}): what it held may not all be readable; ` +
        "copy it aside if you need what can be read, and delete it to crawl again";
    default:
      return `cannot ${what} ${kvPath}: the disk is full or failing, or the file damaged ` +
        `(${err.message}): if the disk is full, nothing stored is lost: free some space and ` +
        "run the same command again to resume; if the file was damaged, what it held may " +
        "not all be readable: copy it aside first, and delete it to crawl again if the same " +
        "command fails";
  }
}
