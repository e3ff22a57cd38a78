/**
 * A small terminal for tests: the few things a terminal does with what the progress drawing
 * writes (printable text that wraps at the last column, a line feed that scrolls the top row into
 * the history at the bottom, `\r`, cursor up `ESC[nA`, erase line `ESC[2K`), and a refusal of any
 * other escape. What a user scrolls back through is `transcript()`.
 */
export class TerminalScreen {
  readonly history: string[] = [];
  #rows: string[][];
  #r = 0;
  #c = 0;
  /** The cursor stands past the last column: the next printable character wraps first. */
  #pendingWrap = false;

  constructor(readonly columns: number, readonly rows: number) {
    this.#rows = Array.from({ length: rows }, () => []);
  }

  /** Takes what a program wrote (a terminal's output post-processing turns `\n` into `\r\n`). */
  write(text: string): void {
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      if (ch === "\x1b") {
        // deno-lint-ignore no-control-regex -- an escape sequence is what it reads
        const m = /^\x1b\[(\d*)([A-Za-z])/.exec(text.slice(i));
        if (!m) {
          throw new Error(
            `an escape the test terminal does not know: ${JSON.stringify(text.slice(i, i + 8))}`,
          );
        }
        if (m[2] === "A") {
          this.#r = Math.max(0, this.#r - Number(m[1] || 1));
          this.#pendingWrap = false;
        } else if (m[2] === "K" && m[1] === "2") this.#rows[this.#r] = [];
        else throw new Error(`an escape the test terminal does not know: ${JSON.stringify(m[0])}`);
        i += m[0].length - 1;
      } else if (ch === "\n") {
        this.#c = 0;
        this.#pendingWrap = false;
        this.#down();
      } else if (ch === "\r") {
        this.#c = 0;
        this.#pendingWrap = false;
      } else {
        const code = ch.codePointAt(0)!;
        if (code < 0x20 || (code >= 0x7f && code < 0xa0)) throw new Error(`raw control ${code}`);
        if (this.#pendingWrap) {
          this.#c = 0;
          this.#pendingWrap = false;
          this.#down();
        }
        const row = this.#rows[this.#r];
        while (row.length < this.#c) row.push(" ");
        row[this.#c] = ch;
        if (this.#c === this.columns - 1) this.#pendingWrap = true;
        else this.#c++;
      }
    }
  }

  #down(): void {
    if (this.#r < this.rows - 1) return void this.#r++;
    this.history.push(this.#rows.shift()!.join("").trimEnd());
    this.#rows.push([]);
  }

  /** The screen's rows as text (trailing spaces dropped). */
  screen(): string[] {
    return this.#rows.map((r) => r.join("").trimEnd());
  }

  /** The history, then the screen, without the blank rows at the end. */
  transcript(): string[] {
    const all = [...this.history, ...this.screen()];
    while (all.length > 0 && all.at(-1) === "") all.pop();
    return all;
  }
}
