/**
 * Reading a baked plan (`deno task plan --out FILE`) back, checked: a plan file that does not
 * partition the key space would make a crawl miss or double items, so it is refused.
 *
 * @module
 */
import { InputError } from "../base/errors.ts";
import { compareKeys } from "./keys.ts";
import { redactUrl } from "../base/redact.ts";
import type { Plan, ShardSpec } from "./planner.ts";
import { type IdOrder, keyOfId } from "./id_order.ts";

/** Validates a parsed plan: contiguous shards, open ends, ordered boundaries, counts. */
export function checkPlan(v: unknown, what = "plan"): Plan {
  const bad = (why: string) => new InputError(`${what} is not a valid plan: ${why}`);
  if (typeof v !== "object" || v === null) throw bad("not a JSON object");
  const p = v as Record<string, unknown>;
  if (!Number.isSafeInteger(p.total) || (p.total as number) < 1) throw bad("total is not a count");
  if (!Array.isArray(p.shards) || p.shards.length === 0) throw bad("no shards");
  if (p.idOrder !== undefined && p.idOrder !== "codepoint" && p.idOrder !== "utf16") {
    throw bad("idOrder is neither codepoint nor utf16");
  }
  // Bounds are written as the registry's ids; a registry ordering ids by UTF-16 unit carries them
  // as keys made from them (`id_order.ts`).
  const key = (k: string | null) =>
    k === null ? null : keyOfId(k, p.idOrder as IdOrder | undefined);
  const shards: ShardSpec[] = p.shards.map((s: unknown, i: number) => {
    const r = s as Record<string, unknown>;
    const okKey = (k: unknown) => k === null || typeof k === "string";
    if (typeof s !== "object" || s === null || !okKey(r.start) || !okKey(r.end)) {
      throw bad(`shard ${i} needs start and end (string or null)`);
    }
    if (!Number.isSafeInteger(r.items) || (r.items as number) < 0) throw bad(`shard ${i} items`);
    return {
      start: key(r.start as string | null),
      end: key(r.end as string | null),
      items: r.items as number,
    };
  });
  if (shards[0].start !== null || shards.at(-1)!.end !== null) {
    throw bad("the first start and the last end must be null (open)");
  }
  for (let i = 1; i < shards.length; i++) {
    if (shards[i].start !== shards[i - 1].end) {
      throw bad(`shard ${i} does not start where ${i - 1} ends`);
    }
    if (
      shards[i].start === null ||
      (i > 1 && compareKeys(shards[i - 1].start!, shards[i].start!) >= 0)
    ) {
      throw bad(`boundaries are not strictly increasing at shard ${i}`);
    }
  }
  return {
    total: p.total as number,
    shards,
    requests: Number(p.requests ?? 0),
    method: (p.method as Plan["method"]) ?? "rank",
    maxPage: Number(p.maxPage ?? 1000),
  };
}

/** What a plan file says it was made for (`deno task plan --out` writes both). */
export interface PlanOrigin {
  /** The database URL, normalized; absent in files of earlier versions. */
  sourceUrl?: string;
  /** The view, when the plan cuts a view's rows. */
  view?: string;
}

/**
 * Checks that a plan made for `origin` fits a crawl of `sourceUrl` (normalized) and `view`: a
 * plan of another registry would cut this one's keys wrong and call it done at the other's count.
 * @throws InputError naming both.
 */
export function checkPlanOrigin(
  origin: PlanOrigin,
  crawl: { sourceUrl: string; view?: string },
  what = "the plan file",
): void {
  if (origin.sourceUrl !== undefined && origin.sourceUrl !== crawl.sourceUrl) {
    throw new InputError(
      `${what} was made for ${redactUrl(origin.sourceUrl)}, not ${redactUrl(crawl.sourceUrl)}`,
    );
  }
  if ((origin.view ?? null) !== (crawl.view ?? null)) {
    throw new InputError(
      `${what} was made for ${origin.view ? `view ${origin.view}` : "_all_docs"}, not ` +
        `${crawl.view ? `view ${crawl.view}` : "_all_docs"}`,
    );
  }
}

/**
 * Checks a plan's total against what the registry lists now (`listed`): more than 1% apart, the
 * same URL holds other data (a restore, another database behind it), and the plan's cuts and
 * counts would mislead. Within 1%, a registry that changes as it is crawled is fine.
 * @throws InputError naming both counts.
 */
export function checkPlanTotal(planned: number, listed: number, what = "the plan file"): void {
  if (Math.abs(listed - planned) > Math.max(1, planned * 0.01)) {
    const n = (x: number) => x.toLocaleString("en-US");
    throw new InputError(
      `${what} was made for ${n(planned)} items; the registry lists ${n(listed)} now (more ` +
        `than 1% apart): plan again (deno task plan --out), or crawl without --plan`,
    );
  }
}

/** What a parsed plan file says it was made for. */
export function planOrigin(v: unknown): PlanOrigin {
  const p = (typeof v === "object" && v !== null ? v : {}) as Record<string, unknown>;
  return {
    ...(typeof p.sourceUrl === "string" ? { sourceUrl: p.sourceUrl } : {}),
    ...(typeof p.view === "string" ? { view: p.view } : {}),
  };
}

/** Reads and validates a plan file; its origin is in `origin`. */
export async function readPlanFile(path: string): Promise<Plan & { origin: PlanOrigin }> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    throw new InputError(`cannot read plan file ${path}: ${(err as Error).message}`);
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new InputError(`plan file ${path} is not JSON`);
  }
  return { ...checkPlan(v, `plan file ${path}`), origin: planOrigin(v) };
}
