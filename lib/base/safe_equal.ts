/**
 * Comparing secrets (tokens) without telling, by how long it takes, where they differ.
 *
 * @module
 */

/**
 * Compares two secrets in time that does not depend on where they differ: both are hashed first
 * (so lengths leak nothing either) and the digests compared with XOR.
 */
export async function safeEqual(a: string, b: string): Promise<boolean> {
  const enc = new TextEncoder();
  const [x, y] = await Promise.all([
    crypto.subtle.digest("SHA-256", enc.encode(a)),
    crypto.subtle.digest("SHA-256", enc.encode(b)),
  ]);
  const u = new Uint8Array(x);
  const v = new Uint8Array(y);
  let diff = 0;
  for (let i = 0; i < u.length; i++) diff |= u[i] ^ v[i];
  return diff === 0;
}
