/**
 * Document requests in flight for a crawl in one process, all its shards together: its slots
 * (shards x concurrency, what the crawl was planned with). A shard always has its own
 * concurrency; beyond it, it borrows slots the crawl's other shards leave idle (done, or
 * between pages), so that slow documents are spread over idle slots whichever shard lists them,
 * instead of waiting behind the four of their own shard.
 *
 * @module
 */

/** The document slots of one crawl in this process (see the module comment). */
export class DocSlots {
  #capacity: number;
  #inUse = 0;

  /** `capacity` slots (at least 1). */
  constructor(capacity: number) {
    this.#capacity = Math.max(1, capacity);
  }

  /** Requests in flight now, own and borrowed. */
  get inUse(): number {
    return this.#inUse;
  }

  /** Counts a request within its shard's own concurrency (always granted). */
  own(): void {
    this.#inUse++;
  }

  /** Takes an idle slot beyond the shard's own concurrency: true when one was idle. */
  borrow(): boolean {
    if (this.#inUse >= this.#capacity) return false;
    this.#inUse++;
    return true;
  }

  /** A request of either kind ended. */
  done(): void {
    this.#inUse = Math.max(0, this.#inUse - 1);
  }
}

/** The slots of each crawl this process runs (one per crawl id, made at its first shard). */
export class CrawlSlots {
  #byCrawl = new Map<string, DocSlots>();

  /** The slots of crawl `id`, planned as `shards` x `concurrency`. */
  for(crawl: { id: string; shards: number; concurrency: number }): DocSlots {
    let s = this.#byCrawl.get(crawl.id);
    if (!s) this.#byCrawl.set(crawl.id, s = new DocSlots(crawl.shards * crawl.concurrency));
    return s;
  }
}
