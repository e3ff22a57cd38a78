/**
 * Lease owners that say which process they are, so that a lease left by a process that died on
 * this very machine (a killed `deno task crawl`) can be taken over at once instead of after its
 * expiry. An owner names the machine's boot, the process id and the process's start time; a lease
 * whose owner is from this boot and whose process is gone (or is another process with the same id)
 * is dead. Anywhere this cannot be told (another machine, no `/proc`), leases simply expire.
 *
 * @module
 */

let cached: { boot: string; pid: number; start: string } | null | undefined;

function readProc(path: string): string | null {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return null;
  }
}

/** The start time of process `pid` in clock ticks since boot, or null. */
function startOf(pid: number): string | null {
  const stat = readProc(`/proc/${pid}/stat`);
  if (stat === null) return null;
  // Field 22, counted after the command name (which may hold spaces) in parentheses.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19] ?? null;
}

function self(): { boot: string; pid: number; start: string } | null {
  if (cached !== undefined) return cached;
  const boot = readProc("/proc/sys/kernel/random/boot_id")?.trim();
  const start = startOf(Deno.pid);
  cached = boot && start ? { boot, pid: Deno.pid, start } : null;
  return cached;
}

/** A lease owner name for a worker of this process: `<label>@<boot>/<pid>/<start>/<random>`. */
export function ownerName(label: string): string {
  const me = self();
  const where = me ? `${me.boot}/${me.pid}/${me.start}` : "unknown";
  return `${label}@${where}/${crypto.randomUUID().slice(0, 8)}`;
}

/**
 * True when `owner` is a worker of a process of this machine's current boot that no longer runs.
 * False when that cannot be told (another machine, another boot, no `/proc`, a foreign name).
 */
export function ownerIsDead(owner: string): boolean {
  const me = self();
  const m = /@([0-9a-f-]+)\/(\d+)\/(\d+)\/[0-9a-f]+$/.exec(owner);
  if (!me || !m || m[1] !== me.boot) return false;
  const pid = Number(m[2]);
  if (pid === me.pid) return m[3] !== me.start;
  return startOf(pid) !== m[3];
}
