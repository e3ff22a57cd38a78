/**
 * The served mirror: a crawl's copy as a read-only CouchDB database and an npm registry's metadata
 * endpoint (`mirror_app.ts`), with the mirror's own change sequence kept through the sink seam
 * (`mirror_sink.ts`).
 *
 * @module
 */
export {
  createMirrorApp,
  type MirrorContext,
  type MirrorDb,
  type MirrorOptions,
  mirrorUuid,
} from "./mirror_app.ts";
export {
  keepMirrorsLevel,
  levelMirror,
  MIRROR_POLL_MS,
  type MirrorLevelContext,
  notServable,
} from "./mirror_level.ts";
export { MIRROR_SINK, mirrorSink } from "./mirror_sink.ts";
export { abbreviate, ABBREVIATED } from "./npm_packument.ts";
