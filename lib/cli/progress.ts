/**
 * Terminal progress: per-shard bars with items/s and ETA redrawn in place on a TTY (at most a few
 * times a second), one plain line every few seconds otherwise, and the end-of-crawl summary.
 *
 * On a TTY the drawing is fitted to the terminal each time: no line wider than it (a wrapped line
 * is a row the next redraw does not go back over, which leaves stale lines), no more lines than its
 * height (the cursor cannot go back above the top row), the shards that do not fit summed up in
 * one line. Log lines go through {@linkcode Progress.log}, which prints them above the drawing, and
 * {@linkcode Progress.end} leaves the last drawing in place for what is printed after it.
 *
 * @module
 */
import { shownText } from "../base/shown_text.ts";
import { type Clock, SYSTEM_CLOCK } from "../base/clock.ts";
import type { CrawlStatusReport } from "../engine/mod.ts";
import type { PaceState } from "../sources/http/mod.ts";

/** Options of {@linkcode Progress}. */
export interface ProgressOptions {
  /** Draw bars in place (stdout is a terminal). */
  tty: boolean;
  /** Where output goes. */
  write: (text: string) => void;
  /** What rates and redraw intervals are timed by. @default SYSTEM_CLOCK */
  clock?: Clock;
  /** Least time between TTY redraws, in milliseconds. @default 250 */
  ttyIntervalMs?: number;
  /** Least time between plain lines, in milliseconds. @default 5000 */
  plainIntervalMs?: number;
  /** The pace of the crawl's requests (`Pacer.state`), shown when a host was slowed. @default none */
  pace?: () => PaceState;
  /** Most shards drawn as bars. @default 32 */
  maxBars?: number;
  /**
   * The run follows the crawl once it is done (`--follow`): a done crawl's line then says where
   * following stands. Otherwise a done crawl (a refresh) is drawn as done. @default false
   */
  following?: boolean;
  /**
   * The terminal's size now (`Deno.consoleSize`), or null when unknown; read at each redraw, so a
   * resized terminal is drawn to its new size. @default 80 columns, 24 rows
   */
  size?: () => { columns: number; rows: number } | null;
}

/**
 * Writes every byte of `bytes` to `to`: one `writeSync` may write only some (a terminal takes a
 * few KiB at a time), and a drawing cut short leaves the cursor where the next one does not expect.
 */
export function writeAll(to: { writeSync(p: Uint8Array): number }, bytes: Uint8Array): void {
  for (let at = 0; at < bytes.length;) at += to.writeSync(bytes.subarray(at));
}

/** A host's slowdown is shown this long after its last cut, in milliseconds (or while it holds). */
const SLOWDOWN_SHOWN_MS = 30_000;

/** How fast the ETA shown follows the one seen, in seconds (see `Progress`). */
export const ETA_SMOOTHING_S = 20;

/**
 * Items stored of those planned: `1,000/2,000 items (50.0%)`; past the plan (items published since
 * it was made), `2,003 items (the plan's 2,000, +3 since)` rather than 100.2%.
 */
function itemsPart(r: CrawlStatusReport): string {
  if (r.itemsStored > r.total) {
    return `${n(r.itemsStored)} items (the plan's ${n(r.total)}, +${
      n(r.itemsStored - r.total)
    } since)`;
  }
  const pct = r.total > 0 ? (100 * r.itemsStored) / r.total : 0;
  return `${n(r.itemsStored)}/${n(r.total)} items (${pct.toFixed(1)}%)`;
}

/** Shards done of all: `shards 42/57 (19 planned, 38 split off)` when slow ones were split. */
function shardsPart(r: CrawlStatusReport): string {
  const split = r.splits.length;
  return `shards ${r.shardsDone}/${r.shardCount}` +
    (split > 0 ? ` (${n(r.shardCount - split)} planned, ${n(split)} split off)` : "");
}

/**
 * The crawl's sinks: `sinks: sqlite:1a2b3c4d:* level, postgres:5e6f7a8b:pkgs 120 notes behind`;
 * with `behindOnly`, only those behind (empty when none is).
 */
export function sinksLine(r: CrawlStatusReport, o: { behindOnly?: boolean } = {}): string {
  const shown = r.sinks.filter((s) => !o.behindOnly || s.behindNotes > 0);
  if (shown.length === 0) return "";
  return `sinks: ${
    shown.map((s) =>
      `${s.sink} ${s.behindNotes === 0 ? "level" : `${n(s.behindNotes)} notes behind`}`
    ).join(", ")
  }`;
}

/** A terminal's size when it does not say. */
const DEFAULT_SIZE = { columns: 80, rows: 24 };

/** `line` cut to `columns` characters (code points), with `…` where it was cut. */
export function fitted(line: string, columns: number): string {
  const chars = [...line];
  return chars.length <= columns ? line : chars.slice(0, Math.max(0, columns - 1)).join("") + "…";
}

/**
 * Formats an integer with thousands separators (`1,234,567`), as `en-US` does; by hand, because
 * the first `Intl.NumberFormat` of a process costs about 10 ms of loading locale data.
 */
export const n = (x: number): string => {
  const digits = String(Math.abs(Math.round(x)));
  return (x <= -0.5 ? "-" : "") + digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
};

/** Formats seconds as `1h02m`, `3m05s` or `42s`. */
export function duration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "?";
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) {
    return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
  }
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${s}s`;
}

function bar(fraction: number, width: number): string {
  const f = Math.min(1, Math.max(0, fraction));
  const full = Math.floor(f * width);
  return "█".repeat(full) + "░".repeat(width - full);
}

/** Renders status reports as they come, rate-limited. */
export class Progress {
  #o: Required<Omit<ProgressOptions, "pace" | "size">> & Pick<ProgressOptions, "pace" | "size">;
  #lastDraw = -Infinity;
  #lines = 0;
  #drawn: string[] = [];
  #ended = false;
  #samples: { t: number; items: number }[] = [];
  #eta: { t: number; s: number } | null = null;
  #shardPrev = new Map<number, { t: number; items: number; rate: number }>();

  /** A renderer writing through `options.write`. */
  constructor(options: ProgressOptions) {
    this.#o = {
      clock: SYSTEM_CLOCK,
      following: false,
      ttyIntervalMs: 250,
      plainIntervalMs: 5000,
      maxBars: 32,
      ...options,
    };
  }

  /** Items per second over the last ~10 s of samples. */
  #recentRate(t: number, items: number): number {
    this.#samples.push({ t, items });
    while (this.#samples.length > 2 && t - this.#samples[0].t > 10_000) this.#samples.shift();
    const first = this.#samples[0];
    const dt = (t - first.t) / 1000;
    return dt > 0 ? (items - first.items) / dt : 0;
  }

  /**
   * The ETA shown: the one seen now, blended with the last one shown less the time since (a
   * time constant of {@linkcode ETA_SMOOTHING_S}), so that one slow page does not throw it from 2
   * to 20 minutes and back. Null while none can be had.
   */
  #smoothEta(t: number, seen: number | null): number | null {
    const last = this.#eta;
    this.#eta = seen === null ? null : { t, s: seen };
    if (seen === null || last === null) return seen;
    const dt = Math.max(0, (t - last.t) / 1000);
    const w = 1 - Math.exp(-dt / ETA_SMOOTHING_S);
    const s = w * seen + (1 - w) * Math.max(0, last.s - dt);
    this.#eta = { t, s };
    return s;
  }

  /**
   * Prints `line` (one line, already shown as text): on a TTY above the drawing, which is drawn
   * again below it; otherwise through `write` as it is.
   */
  log(line: string): void {
    if (!this.#o.tty || this.#ended) return this.#o.write(`${line}\n`);
    this.#paint(this.#drawn, line);
  }

  /**
   * Stops drawing: the last drawing stays where it is, and what is printed next (the summary, why
   * the run stopped) comes below it, never drawn over. Later updates draw nothing.
   */
  end(): void {
    this.#ended = true;
  }

  /** Takes a fresh report; draws when the interval has passed (or `force`). */
  update(r: CrawlStatusReport, force = false): void {
    if (this.#ended) return;
    const t = this.#o.clock.now();
    const rate = this.#recentRate(t, r.itemsStored);
    const interval = this.#o.tty ? this.#o.ttyIntervalMs : this.#o.plainIntervalMs;
    if (!force && t - this.#lastDraw < interval) return;
    this.#lastDraw = t;
    const left = Math.max(0, r.total - r.itemsStored);
    // Never below the report's own ETA, which waits for the slowest shard.
    const eta = this.#smoothEta(t, rate > 0 ? Math.max(left / rate, r.etaSeconds ?? 0) : null);
    // An ETA only while there is something left to wait for: never on a finished line.
    const ending = r.status === "running" || r.status === "planning" ? ` ETA ${duration(eta)}` : "";
    const pending = r.pendingDocs?.pending ? `, ${n(r.pendingDocs.pending)} documents pending` : "";
    const head = r.status === "done" && r.follow && this.#o.following
      ? `${r.id} ${followLine(r.follow, t)}${pending}`
      : `${r.id} ${r.status}: ${itemsPart(r)} ${n(rate)} items/s${ending} ${shardsPart(r)}` +
        (r.deadLetters ? `, ${r.deadLetters} shards given up on (dead letters)` : "") +
        pending +
        (sinksLine(r, { behindOnly: true }) ? `, ${sinksLine(r, { behindOnly: true })}` : "");
    const pace = this.#o.pace ? paceLine(this.#o.pace(), t) : null;
    if (!this.#o.tty) {
      this.#o.write(
        `progress: ${shownText(head)}\n` + (pace ? `progress: ${shownText(pace)}\n` : ""),
      );
      return;
    }
    const size = this.#o.size?.() ?? DEFAULT_SIZE;
    // Rows for bars: the terminal's, less the head, the pace, a summary line and the cursor's.
    const room = Math.max(0, size.rows - (pace ? 2 : 1) - 2);
    const lines = pace ? [head, `  ${pace}`] : [head];
    // Unfinished shards first: they are what is worth watching when not all fit.
    const order = [...r.shards.filter((s) => !s.done), ...r.shards.filter((s) => s.done)];
    const shards = order.slice(0, Math.min(this.#o.maxBars, room));
    // The bar gives way on a narrow terminal (the numbers beside it take about 40 columns).
    const barWidth = Math.max(5, Math.min(24, size.columns - 45));
    for (const s of shards.sort((a, b) => a.id - b.id)) {
      const prev = this.#shardPrev.get(s.id);
      let srate = prev?.rate ?? 0;
      if (prev && t > prev.t) {
        srate = 0.7 * srate + 0.3 * ((s.items - prev.items) * 1000) / (t - prev.t);
      }
      this.#shardPrev.set(s.id, { t, items: s.items, rate: srate });
      const frac = s.done ? 1 : s.expected > 0 ? s.items / s.expected : 0;
      lines.push(
        `  ${String(s.id).padStart(3)} ${bar(frac, barWidth)} ${n(s.items).padStart(9)}/${
          n(s.expected).padEnd(9)
        } ${s.done ? "done" : `${n(srate)}/s`.padStart(8)}`,
      );
    }
    if (r.shards.length > shards.length) {
      const rest = r.shards.filter((s) => !shards.includes(s));
      const done = rest.filter((s) => s.done).length;
      lines.push(
        `  … ${n(rest.length)} more shards: ${n(done)} done, ${n(rest.length - done)} to go`,
      );
    }
    // What the registry said is shown as text; the only control sequences are our own.
    this.#paint(lines.map((l) => fitted(shownText(l), size.columns - 1)));
  }

  /**
   * Draws `lines` (each fitted to the terminal: one row each) over the last drawing, after `log`
   * (which stays, above it, however many rows it wraps to). Each row is cleared as it is written
   * (`ESC[2K`), never the screen from the cursor down (`ESC[J`), which tmux takes for a clear
   * screen and saves into its history: every drawing would stay in the scrollback.
   */
  #paint(lines: string[], log?: string): void {
    let out = this.#lines > 0 ? `\x1b[${this.#lines}A` : "";
    let rows = 0;
    if (log !== undefined) {
      const columns = Math.max(1, (this.#o.size?.() ?? DEFAULT_SIZE).columns);
      // The rows the line wraps to are cleared first (the first one alone would leave the old
      // drawing's text beside its tail).
      const k = Math.max(1, Math.ceil([...log].length / columns));
      out += "\x1b[2K\n".repeat(k) + `\x1b[${k}A` + log + "\n";
      rows += k;
    }
    out += lines.map((l) => `\x1b[2K${l}\n`).join("");
    rows += lines.length;
    // A drawing shorter than the last one: its leftover rows are cleared, and the cursor comes back.
    const extra = this.#lines - rows;
    if (extra > 0) out += "\x1b[2K\n".repeat(extra) + `\x1b[${extra}A`;
    this.#o.write(out);
    this.#lines = lines.length;
    this.#drawn = lines;
  }
}

/**
 * The pace of a crawl's requests in one line, or null when nothing slowed them: the cap in force
 * (`--rate`), each host paused by its breaker (every attempt failed for a minute) and how it
 * failed, and each host that pushed back: the rate it was slowed to and why, its pushbacks of its
 * requests, and a `Retry-After` holding it.
 */
export function paceLine(pace: PaceState, nowMs: number): string | null {
  const parts = pace.ratePerSecond === null ? [] : [`rate cap ${n(pace.ratePerSecond)}/s`];
  for (const h of pace.hosts) {
    // A paused host comes first: nothing is asked of it but a try every few seconds.
    if (h.pausedAt !== null) {
      const since = duration(Math.max(0, (nowMs - h.pausedAt) / 1000));
      parts.push(
        `${h.host} answers nothing (${h.pauseReason}): paused ${since} ago, tried again every few s`,
      );
      continue;
    }
    if (h.pushbacks === 0 && h.limitPerSecond === null && h.heldUntil === null) continue;
    const ago = h.cutAt === null ? "" : ` ${duration(Math.max(0, (nowMs - h.cutAt) / 1000))} ago`;
    // A host that has pushed back every request it was sent is said to, at once: a crawl that
    // will fail on it should not look like one that is merely slowed.
    const refusing = h.requests >= 5 && h.pushbacks >= 0.9 * h.requests;
    // A slowdown is shown while it holds: requests near its pace, or a cut in the last half
    // minute. Once the pace has grown past what is asked, the host is not slowed any more.
    const holding = h.limitPerSecond !== null &&
      (h.sentPerSecond >= 0.9 * h.limitPerSecond ||
        (h.cutAt !== null && nowMs - h.cutAt < SLOWDOWN_SHOWN_MS));
    const held = h.heldUntil !== null && h.heldUntil > nowMs;
    if (!refusing && !holding && !held) continue;
    parts.push(
      `${h.host} ` + (refusing ? "refuses nearly every request (429/503/504), " : "") +
        (!holding ? "" : `slowed to ${n(h.limitPerSecond!)}/s (${h.reason}${ago}), `) +
        `${n(h.pushbacks)} pushed back of ${n(h.requests)} requests` +
        (!held
          ? ""
          : `, held by Retry-After for ${duration(Math.ceil((h.heldUntil! - nowMs) / 1000))}`),
    );
  }
  return parts.length === 0 ? null : `pace: ${parts.join("; ")}`;
}

/**
 * A followed crawl in one line: where it stands, how far behind (changes, seconds), what following
 * applied, and what was last proven of the copy and when: counts (every range against the
 * registry's ranks) and rows (every row compared with the registry's). While looks fail, or every
 * row is being compared again, that comes first, and how far behind it is is not known.
 */
export function followLine(f: NonNullable<CrawlStatusReport["follow"]>, nowMs: number): string {
  const ago = (at: string) => `${duration(Math.max(0, nowMs - Date.parse(at)) / 1000)} ago`;
  const state = f.failing
    ? `the registry has failed to answer for ${
      duration(Math.max(0, nowMs - Date.parse(f.failing.since)) / 1000)
    } (${shownText(f.failing.reason)}), `
    : f.rows?.forced
    ? `comparing every row again (${shownText(f.rows.forced)}): ${n(f.rows.compared)} ` +
      `compared, ${n(f.rows.repaired)} repaired, `
    : "";
  const counts = f.verifiedAt === null
    ? "counts not proven yet"
    : `counts proven ${ago(f.verifiedAt)}`;
  const rows = !f.rows?.comparedAt
    ? "rows not compared yet"
    : `rows compared ${ago(f.rows.comparedAt)} (` +
      (f.rows.lastRepaired > 0 ? `${n(f.rows.lastRepaired)} repaired)` : "all equal)");
  return `following: seq ${f.head === null ? "?" : shownText(f.head, { maxChars: 80 })}, ${state}` +
    `${f.changesBehind === null ? "? changes" : `${n(f.changesBehind)} changes`} behind, ` +
    `lag ${f.lagSeconds.toFixed(1)} s, ${n(f.applied)} changes applied, ${counts}, ${rows}` +
    (f.repaired > 0 ? `, ${n(f.repaired)} ranges repaired` : "");
}

/**
 * What the summary and the progress line say of documents behind their revision on the document
 * host (null when there never were any): how many wait, how many landed later, how many were given
 * up on, and how the host answered the asks.
 */
export function pendingLine(r: CrawlStatusReport): string | null {
  const p = r.pendingDocs;
  if (!p || (p.pending === 0 && p.landed === 0 && p.expired === 0)) return null;
  return `documents behind the document host: ${n(p.pending)} pending, ${n(p.landed)} landed ` +
    `later, ${n(p.expired)} given up on (errors); ${n(p.asked)} asked again, ` +
    `${n(p.notModified)} answered 304`;
}

/** The end-of-crawl summary lines. */
export function summary(
  r: CrawlStatusReport,
  extra: { elapsedMs: number; retries: number; itemsThisRun?: number; pace?: PaceState },
): string {
  const pace = extra.pace ? paceLine(extra.pace, Date.now()) : null;
  const items = r.shards.map((s) => s.items);
  const max = Math.max(0, ...items);
  const mean = items.length ? items.reduce((a, b) => a + b, 0) / items.length : 0;
  const secs = extra.elapsedMs / 1000;
  const done = extra.itemsThisRun ?? r.itemsStored;
  return [
    `crawl ${r.id} ${r.status}: ${n(r.itemsStored)} items of ${
      n(r.total)
    } in ${r.shardCount} shards`,
    `  pages ${n(r.pages)}, documents ${n(r.documents)}, document errors ${n(r.docErrors)}, ` +
    `too large ${n(r.tooLarge)}, retries ${n(extra.retries)}, dead letters ${r.deadLetters}, ` +
    `splits ${r.splits.length}`,
    `  this run: elapsed ${duration(secs)} (${secs.toFixed(1)} s), ` +
    // A run that resumed or followed: what the count moved by, the registry's deletions included
    // (a negative rate of items means nothing).
    (done === r.itemsStored
      ? `${n(done / Math.max(secs, 0.001))} items/s`
      : done >= 0
      ? `${n(done / Math.max(secs, 0.001))} items/s (${n(done)} items stored by this run)`
      : `the count moved by ${n(done)} with the registry's deletions`) +
    `, shard items max ${n(max)} / mean ${n(mean)}`,
    ...(r.drift
      ? [
        `  registry drift applied from _changes: ${n(r.drift.inserted)} inserted, ` +
        `${n(r.drift.updated)} updated, ${n(r.drift.deleted)} deleted (seq ${
          shownText(r.drift.seq, { maxChars: 80 })
        })`,
      ]
      : []),
    ...(r.driftError ? [`  no drift catch-up: ${shownText(r.driftError)}`] : []),
    ...(r.verification
      ? [
        `  checked: ${r.verification.status}: ${
          shownText(r.verification.detail, { maxChars: 2000 })
        }`,
      ]
      : []),
    ...(pendingLine(r) ? [`  ${pendingLine(r)}`] : []),
    ...(r.docRevisions === "unverified"
      ? [
        `  documents: not checked against their listed revisions (npm's abbreviated metadata ` +
        `carries no _rev: a cache behind the registry cannot be told from the current document)`,
      ]
      : []),
    ...(r.registry ? [`  ${shownText(r.registry)}`] : []),
    ...(r.follow ? [`  ${followLine(r.follow, Date.now())}`] : []),
    ...(r.sinks.length > 0 ? [`  ${sinksLine(r)}`] : []),
    ...(pace ? [`  ${pace}`] : []),
  ].join("\n");
}
