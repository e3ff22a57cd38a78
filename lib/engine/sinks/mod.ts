/**
 * The sinks room: what is kept equal to a crawl's store is told what changed there, from the
 * ledger's notes (`store/notes.ts`), never from inside a commit: the seam (`sink.ts`), the
 * ledger's streams and how far behind each sink is (`ledger.ts`), and the delivery from a position
 * kept in KV (`deliver.ts`). A sink is one module plus its wiring.
 *
 * @module
 */
export type { Sink, SinkBatch, SinkState } from "./sink.ts";
export { deliver, DELIVER_NOTES, deliverAll } from "./deliver.ts";
export type { Delivered, DeliverOptions } from "./deliver.ts";
export { sinkLag } from "./ledger.ts";
export type { SinkLag } from "./ledger.ts";
