/**
 * Which order a view's rows come in, asked once per source: the view's design document says what
 * collation it declares, and the database's info says which server holds it.
 *
 * - pouchdb-server ignores the option: its views are `pouch` (CouchDB's documented type order,
 *   strings and docids by UTF-16 code unit).
 * - A view declaring `"collation": "raw"` elsewhere is `raw` (Erlang term order).
 * - Apache CouchDB's default collation is ICU, which rankcrawl does not reproduce: refused, saying
 *   how to declare raw collation.
 * - Any other server's default is taken as `typed` (the project's registry is such a server). In
 *   every case the rows are checked in order as they are listed, so a wrong guess is refused,
 *   never crawled wrongly.
 *
 * @module
 */
import { FatalError } from "../../base/errors.ts";
import type { Collation } from "../../plan/view/mod.ts";

/**
 * A GET's status and parsed JSON body (null when it was not JSON); `expected` names a field the
 * answer has, so that a `200 {"error": …}` without it is asked again like a 5xx.
 */
export type GetJson = (url: string, expected: string) => Promise<{ status: number; body: unknown }>;

function field(v: unknown, name: string): unknown {
  return typeof v === "object" && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)[name]
    : undefined;
}

/**
 * What server holds the database at `dbUrl`, told by its database info (`GET dbUrl`, inside the
 * source's own path): `pouchdb` (it names its storage `adapter`), `couchdb` (Apache CouchDB 2+ and
 * Cloudant give their `cluster` parameters, 1.x its `disk_format_version`: servers whose default
 * view collation is ICU), or `other` (anything else, or no readable info).
 * @throws TransientError when the info could not be had after retries
 */
export async function serverKind(
  get: GetJson,
  dbUrl: string,
): Promise<"pouchdb" | "couchdb" | "other"> {
  // Failures that are worth asking again are thrown (the caller asks again later); an answer that
  // is not a database's info (a 4xx, not JSON) says nothing about the server.
  const info = await get(dbUrl, "db_name");
  if (info.status !== 200) return "other";
  const b = info.body;
  if (typeof field(b, "adapter") === "string" || typeof field(b, "backend_adapter") === "string") {
    return "pouchdb";
  }
  const cluster = field(b, "cluster");
  if (
    (typeof cluster === "object" && cluster !== null) ||
    field(b, "disk_format_version") !== undefined
  ) {
    return "couchdb";
  }
  return "other";
}

/**
 * The collation of view `ddoc/name` of database `dbUrl` (module comment).
 * @throws FatalError when the design document or the view does not exist, cannot be read, or the
 * view collates by ICU on CouchDB
 */
export async function viewCollation(
  get: GetJson,
  dbUrl: string,
  view: { ddoc: string; name: string; description: string },
): Promise<Collation> {
  const ddocPath = `_design/${encodeURIComponent(view.ddoc)}`;
  const ddoc = await get(`${dbUrl}/${ddocPath}`, "views");
  if (ddoc.status === 404) {
    throw new FatalError(`${view.description}: no design document ${ddocPath} (404)`);
  }
  if (ddoc.status === 401 || ddoc.status === 403) {
    throw new FatalError(`${view.description}: access denied to ${ddocPath} (${ddoc.status})`);
  }
  if (ddoc.status !== 200) {
    throw new FatalError(`${view.description}: ${ddocPath} answered HTTP ${ddoc.status}`);
  }
  const def = field(field(ddoc.body, "views"), view.name);
  if (def === undefined) {
    throw new FatalError(`${view.description}: ${ddocPath} has no view "${view.name}"`);
  }
  // Per view (CouchDB reads it there); some documentation puts it at the design document's root.
  const declared = field(field(def, "options"), "collation") ??
    field(field(ddoc.body, "options"), "collation") ?? "default";
  const server = await serverKind(get, dbUrl);
  if (server === "pouchdb") return "pouch";
  if (declared === "raw") return "raw";
  if (server === "couchdb") {
    throw new FatalError(
      `${view.description} collates with CouchDB's default (ICU), an order rankcrawl does not ` +
        `reproduce; declare raw collation on the view ("views": {"${view.name}": {"map": ..., ` +
        `"options": {"collation": "raw"}}} in ${ddocPath}) and let CouchDB rebuild it`,
    );
  }
  return "typed";
}
