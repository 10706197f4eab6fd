import http from 'node:http';
import { Readable } from 'node:stream';

/** One part of a hand-made multipart/form-data body. */
export type Part =
  | { field: string; value: string }
  | {
      field: string;
      filename: string;
      contentType?: string;
      data: Buffer | { size: number; stream: Readable };
    };

export type Sent = { status: number; body: any; text: string; headers: http.IncomingHttpHeaders };

const BOUNDARY = '----triad-test-boundary-7c1f';

/**
 * POSTs a multipart/form-data body streamed from its parts (a file part may be a stream of known
 * size, so large uploads are never held in memory), with an exact `Content-Length` (none with
 * `chunked`). `truncate` leaves out the closing boundary (a body that ends early); `contentType`
 * overrides the header; `headers` are added (a session's cookie, fetch metadata).
 */
export function postMultipart(
  url: string,
  token: string | undefined,
  parts: Part[],
  opts: {
    truncate?: boolean;
    contentType?: string;
    headers?: Record<string, string>;
    chunked?: boolean;
  } = {},
): Promise<Sent> {
  const pieces: (Buffer | Readable)[] = [];
  let length = 0;
  const add = (b: Buffer | Readable, n: number) => {
    pieces.push(b);
    length += n;
  };
  for (const p of parts) {
    const head =
      'filename' in p
        ? `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${p.field}"; filename="${p.filename}"\r\n` +
          `Content-Type: ${p.contentType ?? 'application/octet-stream'}\r\n\r\n`
        : `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${p.field}"\r\n\r\n`;
    add(Buffer.from(head), Buffer.byteLength(head));
    if ('filename' in p) {
      if (Buffer.isBuffer(p.data)) add(p.data, p.data.length);
      else add(p.data.stream, p.data.size);
    } else add(Buffer.from(p.value), Buffer.byteLength(p.value));
    add(Buffer.from('\r\n'), 2);
  }
  if (opts.truncate !== true) add(Buffer.from(`--${BOUNDARY}--\r\n`), BOUNDARY.length + 6);
  const body = Readable.from(
    (async function* () {
      for (const p of pieces) {
        if (Buffer.isBuffer(p)) yield p;
        else for await (const c of p as AsyncIterable<Buffer>) yield c;
      }
    })(),
  );
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      'content-type': opts.contentType ?? `multipart/form-data; boundary=${BOUNDARY}`,
      ...(opts.chunked === true ? {} : { 'content-length': String(length) }),
      ...opts.headers,
    };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text === '' ? undefined : JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, text, headers: res.headers });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    body.on('error', (e) => req.destroy(e));
    body.pipe(req);
  });
}
