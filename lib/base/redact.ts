/**
 * Redaction for logs and answers: URLs lose their credentials before they are printed or stored in
 * a message.
 *
 * @module
 */

/** A URL with any user:password removed, for logs and messages. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = "";
      u.password = "";
    }
    return u.toString().replace(/\/+$/, "");
  } catch {
    return "<invalid url>";
  }
}
