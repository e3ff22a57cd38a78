/**
 * A budget of bytes held at once, shared by everything of a process that holds them (the bodies
 * of answers being read): taking bytes waits while the budget is spent, in the order asked, and
 * giving them back lets the next go on. One take larger than the whole budget goes on alone once
 * nothing else is held, so that no single answer can be refused by the budget.
 *
 * @module
 */

/**
 * A budget of bytes (see the module comment).
 *
 * @example
 * ```ts
 * const budget = new ByteBudget(64 * 2 ** 20); // 64 MiB of bodies at once
 * const giveBack = await budget.take(5 * 2 ** 20); // waits while the budget is spent
 * try {
 *   // read the 5 MiB body
 * } finally {
 *   giveBack();
 * }
 * ```
 */
export class ByteBudget {
  #limit: number;
  #held = 0;
  #waiting: { bytes: number; go: () => void }[] = [];

  /** A budget of `limitBytes` (at least 1). */
  constructor(limitBytes: number) {
    this.#limit = Math.max(1, limitBytes);
  }

  /** Bytes held now. */
  get held(): number {
    return this.#held;
  }

  /** The budget, in bytes. */
  get limitBytes(): number {
    return this.#limit;
  }

  /**
   * Resolves once `bytes` are held (within the budget, or alone when larger than it), with the
   * function that gives them back (once; later calls do nothing). With `wait: false` they are
   * held at once, over the budget if need be: for a holder that must not wait holding something
   * others wait for. @default wait true
   */
  async take(bytes: number, options: { wait?: boolean } = {}): Promise<() => void> {
    const n = Math.max(0, bytes);
    if ((options.wait ?? true) && (this.#waiting.length > 0 || !this.#fits(n))) {
      // Counted as held by #wake, when it lets this one go.
      await new Promise<void>((go) => this.#waiting.push({ bytes: n, go }));
    } else {
      this.#held += n;
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#held -= n;
      this.#wake();
    };
  }

  #fits(bytes: number): boolean {
    return this.#held === 0 || this.#held + bytes <= this.#limit;
  }

  /** Lets waiting takes go on, first come first served, while they fit. */
  #wake(): void {
    while (this.#waiting.length > 0 && this.#fits(this.#waiting[0].bytes)) {
      const next = this.#waiting.shift()!;
      this.#held += next.bytes;
      next.go();
    }
  }
}
