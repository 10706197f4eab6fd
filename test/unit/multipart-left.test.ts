import http from 'node:http';
import net from 'node:net';
import { afterEach, expect, test } from '@jest/globals';
import type { Request } from 'express';
import { multipartUpload } from '../../src/http/multipart.ts';

/**
 * An upload whose client left before the handler began to read it (while it was being
 * authorised, or looking up its release) must fail at once: the parser hears nothing more of a
 * request that is gone, so it would wait for good, the handler with it.
 */

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

const BOUNDARY = 'left-boundary';
const part =
  `--${BOUNDARY}\r\nContent-Disposition: form-data; name="attachment"; filename="a.bin"\r\n` +
  'Content-Type: application/octet-stream\r\n\r\n';

/** Serves one upload: once its request is gone, reads it; answers what `file()` did within 3 s. */
async function uploadAfterLeaving(body: string, declared: number): Promise<string> {
  let outcome: (v: string) => void = () => undefined;
  const result = new Promise<string>((r) => (outcome = r));
  server = http.createServer((req) => {
    req.once('close', () => {
      const upload = multipartUpload(req as Request, { field: 'attachment', maxBytes: 1_000_000 });
      const timer = setTimeout(() => outcome('still waiting'), 3_000);
      upload.file().then(
        () => outcome('a file'),
        (e: unknown) => outcome(`refused: ${(e as Error).message}`),
      );
      void result.then(() => clearTimeout(timer));
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const sock = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((res, rej) => sock.once('connect', res).once('error', rej));
  sock.on('error', () => undefined);
  sock.write(
    `POST /assets HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
      `Content-Length: ${declared}\r\n\r\n${body}`,
  );
  await new Promise((r) => setTimeout(r, 200)); // the server has the head and what was sent
  sock.destroy();
  return result;
}

test('when the client left in the middle of the body before the handler read it, then file() is refused at once', async () => {
  const body = `${part}${'x'.repeat(1000)}`;
  expect(await uploadAfterLeaving(body, body.length + 5000)).toBe('refused: the request body ended early');
});

test('when the client sent the whole body and left before the handler read it, then file() is refused at once', async () => {
  const body = `${part}${'x'.repeat(1000)}\r\n--${BOUNDARY}--\r\n`;
  expect(await uploadAfterLeaving(body, body.length)).toBe('refused: the request body ended early');
});

test('when the client leaves after the file part, before the body ends, then end() is refused at once', async () => {
  let outcome: (v: string) => void = () => undefined;
  const result = new Promise<string>((r) => (outcome = r));
  server = http.createServer((req) => {
    const upload = multipartUpload(req as Request, { field: 'attachment', maxBytes: 1_000_000 });
    void (async () => {
      const f = await upload.file();
      for await (const _ of f.stream) void _; // the whole file part
      const timer = setTimeout(() => outcome('still waiting'), 3_000);
      await upload.end().then(
        () => outcome('ended'),
        (e: unknown) => outcome(`refused: ${(e as Error).message}`),
      );
      clearTimeout(timer);
    })();
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const sock = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise<void>((res, rej) => sock.once('connect', res).once('error', rej));
  sock.on('error', () => undefined);
  // the file part, then the start of a text field sent after it (as `curl -F f=@x -F label=y`)
  const body = `${part}${'x'.repeat(1000)}\r\n--${BOUNDARY}\r\nContent-Disposition: form-data; name="label"\r\n\r\nhal`;
  sock.write(
    `POST /assets HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
      `Content-Length: ${body.length + 5000}\r\n\r\n${body}`,
  );
  await new Promise((r) => setTimeout(r, 300)); // the file part has been read
  sock.destroy();
  expect(await result).toBe('refused: the request body ended early');
});
