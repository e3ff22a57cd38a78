/**
 * Human-readable rendering of a plan (`deno task plan` without `--json`).
 *
 * @module
 */
import type { Plan } from "./planner.ts";
import { decodeViewRow } from "./view/mod.ts";

/**
 * A key as a plan table shows it: JSON, or for a view's encoded row, `key · docid`, and ` #n` for
 * the n-th repeat of that pair (a document emitting one key several times).
 */
export function keyLabel(key: string, options: { view?: boolean } = {}): string {
  if (!options.view) return JSON.stringify(key);
  const row = decodeViewRow(key);
  const dup = row.dup ? ` #${row.dup}` : "";
  return `${JSON.stringify(row.key)} · ${JSON.stringify(row.docid)}${dup}`;
}

/** A table: shard, start, end, items, share (`view`: keys are encoded view rows). */
export function formatPlanTable(plan: Plan, options: { view?: boolean } = {}): string {
  const show = (key: string | null, width: number) => {
    const s = key === null ? "(open)" : keyLabel(key, options);
    return s.length > width ? s.slice(0, width - 1) + "…" : s;
  };
  const lines = [
    `${"shard".padStart(5)}  ${"start".padEnd(32)}  ${"end".padEnd(32)}  ${
      "items".padStart(9)
    }  share`,
  ];
  plan.shards.forEach((s, i) => {
    const share = ((s.items / plan.total) * 100).toFixed(2) + "%";
    lines.push(
      `${String(i).padStart(5)}  ${show(s.start, 32).padEnd(32)}  ${show(s.end, 32).padEnd(32)}  ` +
        `${String(s.items).padStart(9)}  ${share}`,
    );
  });
  return lines.join("\n");
}
