/**
 * The plan as a picture: items by key range along the key axis (as a naive even split sees it),
 * the even split's cuts at equal spacing, and the balanced cuts packed tight wherever the keys are
 * dense, with the largest even piece labelled with its share of all items. `deno task plan --svg`
 * writes it; the status page shows it for each crawl.
 *
 * @module
 */
import { evenSplitPieces } from "./baselines.ts";

/** What the picture shows. */
export interface PlanPicture {
  /** Items in the registry. */
  total: number;
  /** The even split: its cut keys with their ranks (keys before each cut), in order. */
  even: { key: string; rank: number }[];
  /** The balanced plan's cut keys (each shard's start but the first), in order. */
  cuts: string[];
  /** A title line. */
  title?: string;
}

const LOW = 0x20;
const SPAN = 0x7f - 0x20;

/**
 * Where a key sits on the naive key axis, in [0, 1): its first two characters read as a number
 * over printable ASCII (the axis an even split of the alphabet divides evenly). Characters outside
 * printable ASCII are clamped to its ends.
 */
export function keyPosition(key: string): number {
  const digit = (i: number) => {
    const c = key.codePointAt(i);
    if (c === undefined) return 0;
    return Math.min(SPAN - 1, Math.max(0, c - LOW));
  };
  return (digit(0) * SPAN + digit(1)) / (SPAN * SPAN);
}

function esc(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The SVG text of a plan picture. Bars: items between consecutive even cuts (heights relative to
 * the largest); dashed lines: even cuts; solid lines: balanced cuts.
 *
 * @example
 * ```ts
 * const svg = planSvg({ total: 100, even: [{ key: "P", rank: 90 }], cuts: ["@b", "@t", "m"] });
 * await Deno.writeTextFile("plan.svg", svg);
 * ```
 */
export function planSvg(p: PlanPicture, options: { width?: number; height?: number } = {}): string {
  const w = options.width ?? 960;
  const h = options.height ?? 320;
  const pad = { l: 48, r: 16, t: 40, b: 56 };
  const plotW = w - pad.l - pad.r;
  const plotH = h - pad.t - pad.b;
  const X = (f: number) => pad.l + f * plotW;
  const edges = [0, ...p.even.map((e) => keyPosition(e.key)), 1];
  const pieces = evenSplitPieces(p.total, p.even);
  const most = Math.max(1, ...pieces);
  const largest = pieces.indexOf(most);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" ` +
    `font-family="system-ui, sans-serif" font-size="12" role="img" aria-label="plan">`,
    `<title>${esc(p.title ?? "plan")}</title>`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="${pad.l}" y="22" font-size="14" font-weight="600">${esc(p.title ?? "plan")}</text>`,
  ];
  pieces.forEach((items, i) => {
    const bh = (items / most) * plotH;
    const x0 = X(edges[i]);
    const x1 = X(edges[i + 1]);
    parts.push(
      `<rect class="even-piece" data-items="${items}" x="${x0.toFixed(1)}" ` +
        `y="${(pad.t + plotH - bh).toFixed(1)}" width="${Math.max(0.5, x1 - x0 - 1).toFixed(1)}" ` +
        `height="${bh.toFixed(1)}" fill="#9fb3c8"/>`,
    );
  });
  for (const e of p.even) {
    const x = X(keyPosition(e.key)).toFixed(1);
    parts.push(
      `<line class="even-cut" x1="${x}" x2="${x}" y1="${pad.t}" y2="${pad.t + plotH}" ` +
        `stroke="#7a8699" stroke-dasharray="3 3"/>`,
    );
  }
  for (const key of p.cuts) {
    const x = X(keyPosition(key)).toFixed(1);
    parts.push(
      `<line class="balanced-cut" data-key="${esc(key)}" x1="${x}" x2="${x}" y1="${pad.t}" ` +
        `y2="${pad.t + plotH}" stroke="#c0392b" stroke-width="1.2"/>`,
    );
  }
  const share = p.total > 0 ? (100 * most) / p.total : 0;
  const lx = X((edges[largest] + edges[largest + 1]) / 2);
  parts.push(
    `<text class="largest-share" x="${lx.toFixed(1)}" y="${pad.t - 4}" text-anchor="middle">` +
      `${share.toFixed(1)}% of items</text>`,
    `<line x1="${pad.l}" x2="${pad.l + plotW}" y1="${pad.t + plotH}" y2="${pad.t + plotH}" ` +
      `stroke="#333"/>`,
  );
  for (const label of [" ", "0", "@", "a", "m", "z"]) {
    const x = X(keyPosition(label)).toFixed(1);
    parts.push(
      `<text x="${x}" y="${pad.t + plotH + 16}" text-anchor="middle">${
        esc(label.trim() || "␠")
      }</text>`,
    );
  }
  parts.push(
    `<text x="${pad.l}" y="${h - 12}">bars: items per even piece of the key axis · dashed: ` +
      `even cuts (${p.even.length}) · red: balanced cuts (${p.cuts.length})</text>`,
    "</svg>",
  );
  return parts.join("\n");
}
