/**
 * The sinks room: what is kept equal to a crawl's store is told what changed there, from the
 * ledger's notes (`store/notes.ts`), never from inside a commit: the seam (`sink.ts`) and the
 * delivery from a position kept in KV (`deliver.ts`). A sink is one module plus its wiring.
 *
 * @module
 */
export type { Sink, SinkBatch, SinkState } from "./sink.ts";
export { deliver, DELIVER_NOTES, deliverAll, sinkLag } from "./deliver.ts";
export type { Delivered, DeliverOptions, SinkLag } from "./deliver.ts";
