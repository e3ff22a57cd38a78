/**
 * The plan as a picture, in two panels. Above: the share of items before each point of the key
 * axis (a naive even split's axis, first two characters over printable ASCII), a curve that climbs
 * steeply where the keys are dense, with the even split's cuts as dashed verticals at equal
 * spacing and the balanced cuts as red horizontals at equal steps of items, each reaching the curve
 * where its key is: in a crowd like npm's `@` scopes they stack one above the other instead of
 * merging. Below: the items of each even piece as bars against the equal share every balanced shard
 * holds, the largest labelled with its share. `deno task plan --svg` writes it; the status page
 * shows it for each crawl.
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
  /**
   * The rank of each cut (items before it), where known; else the cuts are taken as equal steps
   * of items (what a balanced plan makes).
   */
  cutRanks?: number[];
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

const f1 = (n: number) => n.toFixed(1);

/** Where the curve of the share of items reaches `share`, on the key axis (0..1). */
function axisAt(points: { x: number; y: number }[], share: number): number {
  for (let i = 1; i < points.length; i++) {
    const a = points[i - 1];
    const b = points[i];
    if (share <= b.y) return b.y === a.y ? a.x : a.x + ((share - a.y) / (b.y - a.y)) * (b.x - a.x);
  }
  return 1;
}

/**
 * The SVG text of a plan picture (see the module comment). Classes for readers: `share-curve`,
 * `even-cut` (one per even cut), `balanced-cut` (one per balanced cut, `data-key`), `even-piece`
 * (one bar per even piece, `data-items`), `largest-share`, `y-axis`.
 *
 * @example
 * ```ts
 * const svg = planSvg({ total: 100, even: [{ key: "P", rank: 90 }], cuts: ["@b", "@t", "m"] });
 * await Deno.writeTextFile("plan.svg", svg);
 * ```
 */
export function planSvg(p: PlanPicture, options: { width?: number; height?: number } = {}): string {
  const w = options.width ?? 960;
  const h = options.height ?? 460;
  const pad = { l: 56, r: 16, t: 40 };
  const topH = Math.round((h - pad.t) * 0.55);
  const barsTop = pad.t + topH + 58;
  const layout: Layout = {
    w,
    h,
    pad,
    topH,
    barsTop,
    barsH: h - barsTop - 40,
    X: (f: number) => pad.l + f * (w - pad.l - pad.r),
    Y: (share: number) => pad.t + topH - share * topH,
  };
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" ` +
    `font-family="system-ui, sans-serif" font-size="12" role="img" aria-label="plan">`,
    `<title>${esc(p.title ?? "plan")}</title>`,
    `<rect width="${w}" height="${h}" fill="#fff"/>`,
    `<text x="${pad.l}" y="22" font-size="14" font-weight="600">${esc(p.title ?? "plan")}</text>`,
    ...sharePanel(p, layout),
    ...piecesPanel(p, layout),
    "</svg>",
  ].join("\n");
}

/** Where things go in the picture. */
interface Layout {
  w: number;
  h: number;
  pad: { l: number; r: number; t: number };
  /** Height of the upper panel. */
  topH: number;
  /** Top and height of the lower panel. */
  barsTop: number;
  barsH: number;
  /** A point of the key axis (0..1) as x. */
  X: (f: number) => number;
  /** A share of items (0..1) as y in the upper panel. */
  Y: (share: number) => number;
}

/** The upper panel: items before each key, the even cuts and the balanced cuts. */
function sharePanel(p: PlanPicture, { pad, topH, X, Y }: Layout): string[] {
  const total = Math.max(1, p.total);
  const parts: string[] = [];
  // The y axis: share of items before a point of the key axis.
  parts.push(`<g class="y-axis">`);
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    parts.push(
      `<line x1="${pad.l - 4}" x2="${X(1)}" y1="${f1(Y(t))}" y2="${f1(Y(t))}" stroke="#e6eaf0"/>`,
      `<text x="${pad.l - 8}" y="${f1(Y(t) + 4)}" text-anchor="end">${t * 100}%</text>`,
    );
  }
  parts.push(
    `<text transform="translate(14 ${f1(pad.t + topH / 2)}) rotate(-90)" text-anchor="middle">` +
      `items before</text>`,
    `</g>`,
  );
  const points = [
    { x: 0, y: 0 },
    ...p.even.map((e) => ({ x: keyPosition(e.key), y: e.rank / total })),
    { x: 1, y: 1 },
  ];
  if (p.even.length > 0) {
    parts.push(
      `<polyline class="share-curve" fill="none" stroke="#1d2733" stroke-width="1.5" points="${
        points.map((q) => `${f1(X(q.x))},${f1(Y(q.y))}`).join(" ")
      }"/>`,
    );
  }
  for (const e of p.even) {
    const x = f1(X(keyPosition(e.key)));
    parts.push(
      `<line class="even-cut" x1="${x}" x2="${x}" y1="${pad.t}" y2="${pad.t + topH}" ` +
        `stroke="#7a8699" stroke-dasharray="3 3"/>`,
    );
  }
  p.cuts.forEach((key, i) => {
    const rank = p.cutRanks?.[i] ?? ((i + 1) * total) / (p.cuts.length + 1);
    const y = f1(Y(rank / total));
    // Without the even split's curve, a cut reaches its key's place on the axis.
    const x = f1(X(p.even.length > 0 ? axisAt(points, rank / total) : keyPosition(key)));
    parts.push(
      `<line class="balanced-cut" data-key="${esc(key)}" x1="${pad.l}" x2="${x}" y1="${y}" ` +
        `y2="${y}" stroke="#c0392b" stroke-width="1"/>`,
      `<circle cx="${x}" cy="${y}" r="1.8" fill="#c0392b"/>`,
    );
  });
  parts.push(
    `<line x1="${pad.l}" x2="${X(1)}" y1="${pad.t + topH}" y2="${pad.t + topH}" stroke="#333"/>`,
  );
  for (
    const [label, at] of [["space", " "], ["0", "0"], ["@", "@"], ["a", "a"], ["m", "m"], [
      "z",
      "z",
    ]]
  ) {
    parts.push(
      `<text x="${f1(X(keyPosition(at)))}" y="${pad.t + topH + 16}" text-anchor="middle">` +
        `${esc(label)}</text>`,
    );
  }
  parts.push(
    `<text x="${pad.l}" y="${pad.t + topH + 32}">key order (first two characters) · curve: items ` +
      `before each key · dashed: even cuts (${p.even.length}) · red: balanced cuts ` +
      `(${p.cuts.length}), at equal steps of items</text>`,
  );
  return parts;
}

/** The lower panel: items per even piece against the equal share of a balanced shard. */
function piecesPanel(p: PlanPicture, { h, pad, barsTop, barsH, X }: Layout): string[] {
  const parts: string[] = [];
  const pieces = evenSplitPieces(p.total, p.even);
  const most = Math.max(1, ...pieces);
  const largest = pieces.indexOf(most);
  const edges = [0, ...p.even.map((e) => keyPosition(e.key)), 1];
  const BY = (items: number) => barsTop + barsH - (items / most) * barsH;
  pieces.forEach((items, i) => {
    const x0 = X(edges[i]);
    const x1 = X(edges[i + 1]);
    parts.push(
      `<rect class="even-piece" data-items="${items}" x="${f1(x0)}" y="${f1(BY(items))}" ` +
        `width="${f1(Math.max(0.5, x1 - x0 - 1))}" height="${f1(barsTop + barsH - BY(items))}" ` +
        `fill="#9fb3c8"/>`,
    );
  });
  const shardItems = p.total / (p.cuts.length + 1);
  const share = p.total > 0 ? (100 * most) / p.total : 0;
  parts.push(
    `<line class="balanced-share" x1="${pad.l}" x2="${X(1)}" y1="${f1(BY(shardItems))}" ` +
      `y2="${f1(BY(shardItems))}" stroke="#c0392b" stroke-dasharray="4 2"/>`,
    `<text class="largest-share" x="${f1(X((edges[largest] + edges[largest + 1]) / 2))}" ` +
      `y="${barsTop - 4}" text-anchor="middle">${share.toFixed(1)}% of items</text>`,
    `<line x1="${pad.l}" x2="${X(1)}" y1="${barsTop + barsH}" y2="${barsTop + barsH}" ` +
      `stroke="#333"/>`,
    `<text x="${pad.l}" y="${h - 12}">bars: items per even piece of the key axis · red dashes: ` +
      `items per balanced shard (${Math.round(shardItems).toLocaleString("en-US")})</text>`,
  );
  return parts;
}
