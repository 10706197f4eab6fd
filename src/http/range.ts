/**
 * One `Range: bytes=...` request header against an object of `size` bytes (RFC 9110): the
 * inclusive byte range it asks for, or `undefined` to send the whole object (no header, several
 * ranges, another unit, or a range the object cannot satisfy: a server may ignore `Range`).
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return undefined;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const n = Number(b);
    return n === 0 || size === 0 ? undefined : { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  return start >= size || end < start ? undefined : { start, end };
}
