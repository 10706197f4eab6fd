/**
 * Cutting raw log bytes (the background Range reads) before decoding them: runs of ASCII-only
 * lines, which the browser's decoder turns into one-byte strings very fast, and, alone, each line
 * with a byte from 0x80 on (decoded on its own, so one such line does not make a whole run
 * wide, nor slow to decode). The scan reads four bytes at a time.
 *
 * No DOM here (unit-tested under Node).
 */

/** The index of the first byte from 0x80 on at or after `i`, or -1. */
export function nextHigh(bytes: Uint8Array, i: number): number {
  const n = bytes.length;
  for (; i < n && ((bytes.byteOffset + i) & 3) !== 0; i++) if (bytes[i]! >= 0x80) return i;
  if (i >= n) return -1;
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset + i, (n - i) >> 2);
  for (let w = 0; w < words.length; w++) {
    if ((words[w]! & 0x80808080) !== 0) {
      for (let j = i + (w << 2); ; j++) if (bytes[j]! >= 0x80) return j;
    }
  }
  for (i += words.length << 2; i < n; i++) if (bytes[i]! >= 0x80) return i;
  return -1;
}

/** `bytes` as pieces [start, end, ascii]: ASCII runs and, alone, each line with a high byte (with its newline). */
export function asciiRuns(bytes: Uint8Array): Array<[number, number, boolean]> {
  const out: Array<[number, number, boolean]> = [];
  let at = 0;
  for (let p = nextHigh(bytes, 0); p >= 0; p = nextHigh(bytes, at)) {
    const start = p === 0 ? 0 : bytes.lastIndexOf(10, p - 1) + 1;
    const nl = bytes.indexOf(10, p);
    const end = nl < 0 ? bytes.length : nl + 1;
    if (start > at) out.push([at, start, true]);
    out.push([start, end, false]);
    at = end;
    if (at >= bytes.length) break;
  }
  if (at < bytes.length) out.push([at, bytes.length, true]);
  return out;
}
