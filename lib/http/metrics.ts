/**
 * `GET /metrics` in Prometheus' text format: crawls by state; per crawl the items stored, the
 * documents fetched, document errors, retries, splits, shards by state; and the latency of the
 * registry requests this process made, by route, as a histogram. The registry figures come from
 * the HTTP client's `onExchange` hook; everything else is read from the store at scrape time.
 *
 * @module
 */
import type { Clock } from "../base/clock.ts";
import { crawlStatus, listCrawlSummaries } from "../engine/mod.ts";
import type { PaceState } from "../sources/http/mod.ts";

/** Upper bounds of the latency buckets, in seconds. */
const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** What this process saw of the registries it talked to. */
export class Metrics {
  #series = new Map<string, { buckets: number[]; sum: number; count: number }>();
  #outcomes = new Map<string, number>();
  #pace: (() => PaceState) | null;

  /** Metrics of a process whose requests `pace` paces (its rate in force, per host). */
  constructor(options: { pace?: () => PaceState } = {}) {
    this.#pace = options.pace ?? null;
  }

  /** Records one registry exchange (see `HttpOptions.onExchange`). */
  observe(info: { route: string; status: number; ms: number }): void {
    let s = this.#series.get(info.route);
    if (!s) this.#series.set(info.route, s = { buckets: BUCKETS.map(() => 0), sum: 0, count: 0 });
    const seconds = info.ms / 1000;
    BUCKETS.forEach((b, i) => seconds <= b && s!.buckets[i]++);
    s.sum += seconds;
    s.count++;
    const cls = info.status === 0 ? "network" : `${Math.floor(info.status / 100)}xx`;
    const key = `${info.route}\u0000${cls}`;
    this.#outcomes.set(key, (this.#outcomes.get(key) ?? 0) + 1);
  }

  /** The registry part of the exposition. */
  lines(): string[] {
    const out = [
      "# HELP rankcrawl_registry_request_seconds Latency of requests to registries, by route.",
      "# TYPE rankcrawl_registry_request_seconds histogram",
    ];
    for (const [route, s] of this.#series) {
      BUCKETS.forEach((b, i) =>
        out.push(
          `rankcrawl_registry_request_seconds_bucket{route="${route}",le="${b}"} ${s.buckets[i]}`,
        )
      );
      out.push(`rankcrawl_registry_request_seconds_bucket{route="${route}",le="+Inf"} ${s.count}`);
      out.push(`rankcrawl_registry_request_seconds_sum{route="${route}"} ${s.sum.toFixed(6)}`);
      out.push(`rankcrawl_registry_request_seconds_count{route="${route}"} ${s.count}`);
    }
    out.push(
      "# HELP rankcrawl_registry_responses_total Requests to registries by route and outcome.",
      "# TYPE rankcrawl_registry_responses_total counter",
    );
    for (const [key, n] of this.#outcomes) {
      const [route, cls] = key.split("\u0000");
      out.push(`rankcrawl_registry_responses_total{route="${route}",class="${cls}"} ${n}`);
    }
    if (this.#pace) out.push(...paceLines(this.#pace()));
    return out;
  }
}

/** The rate in force: the process's cap, and each host's learned pace and pushback. */
function paceLines(pace: PaceState): string[] {
  const out = [
    "# HELP rankcrawl_rate_limit_per_second The process's cap on requests a second (0: none).",
    "# TYPE rankcrawl_rate_limit_per_second gauge",
    `rankcrawl_rate_limit_per_second ${pace.ratePerSecond ?? 0}`,
  ];
  const per: Family<PaceState["hosts"][0]>[] = [
    [
      "rankcrawl_host_rate_per_second",
      "gauge",
      "The rate a host was slowed to after pushing back (0: never slowed).",
      (h) => h.limitPerSecond ?? 0,
    ],
    ["rankcrawl_host_sent_per_second", "gauge", "Requests sent to a host over the last second.", (
      h,
    ) => h.sentPerSecond],
    ["rankcrawl_host_requests_total", "counter", "Requests sent to a host.", (h) => h.requests],
    [
      "rankcrawl_host_pushbacks_total",
      "counter",
      "Answers of a host that pushed back (429, 503, 504).",
      (h) => h.pushbacks,
    ],
    [
      "rankcrawl_host_held_until_timestamp_seconds",
      "gauge",
      "Until when a host's Retry-After holds its requests (Unix seconds; 0: not held).",
      (h) => h.heldUntil === null ? 0 : h.heldUntil / 1000,
    ],
    [
      "rankcrawl_host_paused",
      "gauge",
      "1 while a host is paused: every attempt at it failed for a minute (tried every few seconds).",
      (h) => h.pausedAt === null ? 0 : 1,
    ],
  ];
  return [...out, ...families(per, pace.hosts.map((h) => [h.host, h]), "host")];
}

/** One metric family: its name, type and help, and its value for one labelled thing. */
type Family<T> = [name: string, type: "gauge" | "counter", help: string, value: (t: T) => number];

/** The exposition of `defs`, a line per `[label, thing]` of `items`, labelled `labelName`. */
function families<T>(defs: Family<T>[], items: [string, T][], labelName: string): string[] {
  const out: string[] = [];
  for (const [name, type, help, f] of defs) {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [l, t] of items) out.push(`${name}{${labelName}="${label(l)}"} ${f(t)}`);
  }
  return out;
}

function label(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** An ISO time as Unix seconds; 0 for none. */
function seconds(iso: string | null): number {
  return iso === null ? 0 : Date.parse(iso) / 1000;
}

/** The whole exposition: the store's figures per crawl, then `metrics`' own. */
export async function renderMetrics(
  kv: Deno.Kv,
  metrics: Metrics,
  o: { clock: Clock },
): Promise<string> {
  const crawls = await listCrawlSummaries(kv);
  const byState = new Map<string, number>();
  for (const c of crawls) byState.set(c.status, (byState.get(c.status) ?? 0) + 1);
  const out = ["# HELP rankcrawl_crawls Crawls by state.", "# TYPE rankcrawl_crawls gauge"];
  for (
    const state of ["planning", "running", "paused", "done", "failed", "cancelled", "deleting"]
  ) {
    out.push(`rankcrawl_crawls{state="${state}"} ${byState.get(state) ?? 0}`);
  }
  const per: Family<Awaited<ReturnType<typeof crawlStatus>>>[] = [
    ["rankcrawl_items_stored", "gauge", "Items stored.", (r) => r.itemsStored],
    ["rankcrawl_items_total", "gauge", "Items in the registry when planned.", (r) => r.total],
    ["rankcrawl_documents_fetched_total", "counter", "Documents fetched.", (r) => r.documents],
    [
      "rankcrawl_document_errors_total",
      "counter",
      "Documents recorded with an error.",
      (r) => r.docErrors,
    ],
    [
      "rankcrawl_documents_pending",
      "gauge",
      "Documents behind their revision on the document host, asked again.",
      (r) => r.pendingDocs?.pending ?? 0,
    ],
    [
      "rankcrawl_documents_landed_late_total",
      "counter",
      "Pending documents that landed at their revision later.",
      (r) => r.pendingDocs?.landed ?? 0,
    ],
    [
      "rankcrawl_documents_asked_again_total",
      "counter",
      "Pending documents asked again.",
      (r) => r.pendingDocs?.asked ?? 0,
    ],
    [
      "rankcrawl_documents_not_modified_total",
      "counter",
      "Asks again answered 304 (If-None-Match: no body sent).",
      (r) => r.pendingDocs?.notModified ?? 0,
    ],
    [
      "rankcrawl_documents_too_large_total",
      "counter",
      "Documents over the size limit.",
      (r) => r.tooLarge,
    ],
    ["rankcrawl_retries_total", "counter", "Failed shard attempts, retried.", (r) => r.retries],
    ["rankcrawl_splits_total", "counter", "Straggler splits.", (r) => r.splits.length],
    ["rankcrawl_dead_letters", "gauge", "Queue messages given up on.", (r) => r.deadLetters],
  ];
  const reports = await Promise.all(crawls.map((c) => crawlStatus(kv, c.id, o)));
  out.push(...families(per, reports.map((r) => [r.id, r]), "crawl"));
  // Followed crawls: how far behind the registry, as their last follow tick saw it.
  const followed = reports.filter((r) => r.follow !== null);
  const follow: Family<NonNullable<(typeof reports)[0]["follow"]>>[] = [
    [
      "rankcrawl_follow_lag_seconds",
      "gauge",
      "Seconds a followed crawl is behind the registry (or its last catch-up took).",
      (f) => f.lagSeconds,
    ],
    [
      "rankcrawl_follow_changes_behind",
      "gauge",
      "Changes a followed crawl is behind the registry (-1: unknown).",
      (f) => f.changesBehind ?? -1,
    ],
    [
      "rankcrawl_follow_changes_applied_total",
      "counter",
      "Changes applied by following.",
      (f) => f.applied,
    ],
    [
      "rankcrawl_follow_up",
      "gauge",
      "1 while a followed crawl's looks at its registry get answers, 0 while they fail.",
      (f) => f.failing ? 0 : 1,
    ],
    [
      "rankcrawl_follow_last_success_timestamp_seconds",
      "gauge",
      "When a look at a followed crawl's registry last got its answers (Unix seconds).",
      (f) => seconds(f.lastGoodAt),
    ],
    [
      "rankcrawl_follow_verified_timestamp_seconds",
      "gauge",
      "When every range's count of a followed crawl was last proven (Unix seconds; 0: never).",
      (f) => seconds(f.verifiedAt),
    ],
    [
      "rankcrawl_follow_rows_compared_timestamp_seconds",
      "gauge",
      "When a sweep last compared every row of a followed crawl (Unix seconds; 0: never).",
      (f) => seconds(f.rows?.comparedAt ?? null),
    ],
    [
      "rankcrawl_follow_rows_proven_timestamp_seconds",
      "gauge",
      "When a sweep last found every row of a followed crawl equal (Unix seconds; 0: never).",
      (f) => seconds(f.rows?.provenAt ?? null),
    ],
    [
      "rankcrawl_follow_rows_repaired",
      "gauge",
      "Rows the last whole sweep found wrong and repaired.",
      (f) => f.rows?.lastRepaired ?? 0,
    ],
    [
      "rankcrawl_follow_late_changes_total",
      "counter",
      "Changes that reached the feed late, under a sequence already passed, applied so.",
      (f) => f.lateApplied,
    ],
    [
      "rankcrawl_follow_ranges_repaired_total",
      "counter",
      "Ranges of a followed crawl found wrong while following and listed again.",
      (f) => f.repaired,
    ],
  ];
  out.push(...families(follow, followed.map((r) => [r.id, r.follow!]), "crawl"));
  out.push(
    "# HELP rankcrawl_sink_behind_notes Notes of a crawl's ledger a sink was not given yet " +
      "(0: it holds what the store holds).",
    "# TYPE rankcrawl_sink_behind_notes gauge",
  );
  for (const r of reports) {
    for (const s of r.sinks) {
      out.push(
        `rankcrawl_sink_behind_notes{crawl="${label(r.id)}",sink="${label(s.sink)}"} ` +
          `${s.behindNotes}`,
      );
    }
  }
  out.push("# HELP rankcrawl_shards Shards by state.", "# TYPE rankcrawl_shards gauge");
  for (const r of reports) {
    const done = r.shards.filter((s) => s.done).length;
    const active = r.shards.filter((s) => !s.done && s.leased).length;
    const waiting = r.shards.length - done - active;
    for (const [state, v] of [["done", done], ["active", active], ["waiting", waiting]] as const) {
      out.push(`rankcrawl_shards{crawl="${label(r.id)}",state="${state}"} ${v}`);
    }
  }
  return [...out, ...metrics.lines(), ""].join("\n");
}
