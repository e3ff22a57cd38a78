/**
 * How many bytes of documents a process holds in memory at once, across all its pages: each
 * document fetched is charged to a shared budget when it arrives and refunded when it leaves memory
 * (written to its chunks at once when large, or with its page's commit). New document requests
 * wait while the budget is spent, so a crawl whose documents are large slows down instead of
 * running out of memory. What a single answer may hold is bounded elsewhere (32 MiB a document,
 * 16 MiB a listing or `_bulk_get` answer).
 *
 * @module
 */

/** The default budget of document bytes one process holds in memory, in bytes (256 MiB). */
export const DOC_MEMORY_BYTES = 256 * 1024 * 1024;

/** What a fetch of documents asks of a budget of bytes in memory. */
export interface DocBudget {
  /** True while the budget is spent: new document requests wait (`room`). */
  readonly full: boolean;
  /** Resolves once less than the budget is held. */
  room(): Promise<void>;
  /** Counts `bytes` as held. */
  charge(bytes: number): void;
  /** Counts `bytes` as let go. */
  refund(bytes: number): void;
}

/** A process's budget of document bytes in memory (see the module comment). */
export class DocMemory implements DocBudget {
  #held = 0;
  #limit: number;
  #waiters: (() => void)[] = [];

  /** A budget of `limitBytes`. @default DOC_MEMORY_BYTES */
  constructor(limitBytes: number = DOC_MEMORY_BYTES) {
    this.#limit = limitBytes;
  }

  /** Bytes held now. */
  get held(): number {
    return this.#held;
  }

  /** True while the budget is spent: new document requests wait (`room`). */
  get full(): boolean {
    return this.#held >= this.#limit;
  }

  /** Resolves once less than the budget is held. */
  room(): Promise<void> {
    if (!this.full) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Counts `bytes` as held. */
  charge(bytes: number): void {
    this.#held += bytes;
  }

  /** Counts `bytes` as let go, and lets waiting requests go on while there is room. */
  refund(bytes: number): void {
    this.#held = Math.max(0, this.#held - bytes);
    while (!this.full && this.#waiters.length > 0) this.#waiters.shift()!();
  }
}

/**
 * What one page's fetch of documents charged to a budget, net of its refunds: what the page does
 * not keep goes back with {@linkcode PageCharges.keepOnly}, so that a page that fails, or drops
 * documents, never leaves the process's budget spent for good.
 */
export class PageCharges implements DocBudget {
  #budget: DocBudget;
  #net = 0;

  /** Charges made through this go to `budget`. */
  constructor(budget: DocBudget) {
    this.#budget = budget;
  }

  /** See {@linkcode DocBudget.full}. */
  get full(): boolean {
    return this.#budget.full;
  }

  /** See {@linkcode DocBudget.room}. */
  room(): Promise<void> {
    return this.#budget.room();
  }

  /** See {@linkcode DocBudget.charge}. */
  charge(bytes: number): void {
    this.#net += bytes;
    this.#budget.charge(bytes);
  }

  /** See {@linkcode DocBudget.refund}. */
  refund(bytes: number): void {
    this.#net -= bytes;
    this.#budget.refund(bytes);
  }

  /** Refunds all it charged but `keptBytes` (what the page goes on holding; 0 when it failed). */
  keepOnly(keptBytes: number): void {
    if (this.#net > keptBytes) this.refund(this.#net - keptBytes);
  }
}
