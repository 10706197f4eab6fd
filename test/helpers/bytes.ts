import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';

/** `size` bytes of a repeatable pattern (by `seed`), produced chunk by chunk: never held whole. */
export function pattern(size: number, seed = 7): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= size) {
        this.push(null);
        return;
      }
      const n = Math.min(256 * 1024, size - sent);
      const b = Buffer.alloc(n);
      for (let i = 0; i + 4 <= n; i += 4) b.writeUInt32LE(((sent + i) * seed) >>> 0, i);
      sent += n;
      this.push(b);
    },
  });
}

/** sha256 (hex) and length of a stream, read chunk by chunk. */
export async function digest(
  s: AsyncIterable<Uint8Array> | Readable,
): Promise<{ sha: string; size: number }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const c of s as AsyncIterable<Uint8Array>) {
    h.update(c);
    size += c.length;
  }
  return { sha: h.digest('hex'), size };
}
