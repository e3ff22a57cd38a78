/**
 * Starts a project task (the registry) as a child process and waits for its `listening on <URL>`.
 *
 * @module
 */

/** A running child task. */
export interface SpawnedTask {
  /** The URL the task printed. */
  url: string;
  /** Its process id (for its memory). */
  pid: number;
  /** The document host's URL, when the task printed one before it (`documents on <URL>`). */
  docsUrl?: string;
  /** Stops the task (SIGTERM) and waits for it. */
  close(): Promise<void>;
}

/**
 * Spawns `deno <run> <args>` (`run` is `run`, the permission flags and the script, as deno.json's
 * task has them) and resolves with the URL it prints: `listening on <URL>`, or the first group of
 * `o.ready` (`/mirror on (\S+)/`).
 */
export async function spawnTask(
  run: string[],
  args: string[],
  o: { ready?: RegExp; env?: Record<string, string> } = {},
): Promise<SpawnedTask> {
  const script = run.at(-1);
  const child = new Deno.Command(Deno.execPath(), {
    args: [...run, ...args],
    stdout: "piped",
    stderr: "inherit",
    env: { NO_COLOR: "1", ...o.env },
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${script} exited before listening`);
    buf += value;
    const m = buf.match(o.ready ?? /listening on (\S+)/);
    if (m) {
      (async () => {
        while (!(await reader.read()).done) { /* keep the pipe drained */ }
      })().catch(() => {});
      const docs = buf.match(/documents on (\S+)/);
      return {
        url: m[1],
        pid: child.pid,
        ...(docs ? { docsUrl: docs[1] } : {}),
        close: async () => {
          try {
            child.kill("SIGTERM");
          } catch {
            // Already gone: nothing to stop.
          }
          await child.status;
        },
      };
    }
  }
}
