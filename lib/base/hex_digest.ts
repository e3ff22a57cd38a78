/**
 * A short, stable name for a text: the first bytes of its SHA-256, as hex.
 *
 * @module
 */

/**
 * The first `bytes` bytes of the SHA-256 of `text`, as `2 × bytes` lowercase hex digits.
 *
 * @example
 * ```ts
 * await hexDigest("abc", 4); // "ba7816bf"
 * ```
 */
export async function hexDigest(text: string, bytes: number): Promise<string> {
  const d = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(d).slice(0, bytes)].map((b) => b.toString(16).padStart(2, "0"))
    .join("");
}
