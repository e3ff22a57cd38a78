/**
 * Sources that are SQL tables: any table with a text key is a rank oracle (`sqlite_source.ts`).
 *
 * @module
 */
export { parseSqliteRef, SqliteSource } from "./sqlite_source.ts";
