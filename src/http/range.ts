/**
 * One `Range: bytes=...` request header against an object of `size` bytes (RFC 9110): the
 * inclusive byte range it asks for; `unsatisfiable` when it is a single byte range the object
 * cannot satisfy (the first byte past its end, a suffix of 0 bytes: a 416); `undefined` to send
 * the whole object (no header, several ranges, another unit or a malformed one: a server may
 * ignore those).
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return undefined;
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  if (a === '') {
    const n = Number(b);
    return n === 0 || size === 0 ? 'unsatisfiable' : { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (b !== '' && Number(b) < start) return undefined; // malformed (last before first): ignored
  return start >= size ? 'unsatisfiable' : { start, end };
}
