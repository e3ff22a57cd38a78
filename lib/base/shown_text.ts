/**
 * Text a registry controls (a sequence, an id, an error reason, a document's answer), made safe to
 * show a human: on a terminal, a control character can clear the screen, move the cursor, retitle
 * the window or forge a line; a bidirectional override can make text read otherwise than it is.
 * Every such character is shown as its escape (`\u{1b}`), and the text is cut to a length. JSON
 * answers keep the raw value; only what is printed for people goes through here.
 *
 * @module
 */

/**
 * What may not reach a terminal raw: C0 controls (ESC, BEL, CR, …; TAB aside), DEL, C1 controls
 * (CSI, OSC, …), bidirectional marks, embeddings, overrides and isolates, the line and paragraph
 * separators. A line feed too, unless the text is several lines of our own.
 */
// deno-lint-ignore no-control-regex -- control characters are what it finds
const UNSAFE = new RegExp(
  "[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069\\u2028\\u2029]",
  "g",
);

/** The longest piece of registry text shown by default, in characters. */
export const SHOWN_MAX_CHARS = 500;

/**
 * `text` with every character that could act on a terminal shown as an escape, and cut to
 * `maxChars` (with `…`). A line feed is escaped too (a registry's text never starts a line of its
 * own), unless `lines` says the text is lines of our own, joined by line feeds.
 *
 * @example
 * ```ts
 * shownText("seq 12\u001b[2J\u001b]0;PWNED\u0007"); // "seq 12\\u{1b}[2J\\u{1b}]0;PWNED\\u{7}"
 * ```
 */
export function shownText(
  text: string,
  o: { maxChars?: number; lines?: boolean } = {},
): string {
  const escaped = (o.lines ? text.split("\n") : [text])
    .map((line) =>
      line.replace(/\n/g, "\\n").replace(
        UNSAFE,
        (c) => `\\u{${c.codePointAt(0)!.toString(16)}}`,
      )
    )
    .join("\n");
  const max = o.maxChars ?? (o.lines ? Infinity : SHOWN_MAX_CHARS);
  return escaped.length <= max ? escaped : escaped.slice(0, Math.max(0, max - 1)) + "…";
}
