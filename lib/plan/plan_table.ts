/**
 * Human-readable rendering of a plan (`deno task plan` without `--json`).
 *
 * @module
 */
import type { Plan } from "./planner.ts";

function show(key: string | null, width: number): string {
  const s = key === null ? "(open)" : JSON.stringify(key);
  return s.length > width ? s.slice(0, width - 1) + "…" : s;
}

/** A table: shard, start, end, items, share. */
export function formatPlanTable(plan: Plan): string {
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
