import http from 'node:http';
import net from 'node:net';
import { afterEach, expect, test } from '@jest/globals';
import { clientLeft } from '../../src/http/connections.ts';
import { waitUntil } from '../helpers/wait.ts';

/**
 * `clientLeft` on a real HTTP server: the signal long polls, live logs and archives stop on. It
 * must abort for a client gone before it was asked (during authorisation), for a request
 * pipelined behind another on a connection that dies, and never for an answer already sent.
 */

let server: http.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r) ?? r(undefined));
  server = undefined;
});

/** A server whose handler waits for `before`, then takes the signal and records it by path. */
async function serve(before: () => Promise<void>, answer: (path: string) => boolean) {
  const signals = new Map<string, AbortSignal>();
  server = http.createServer((req, res) => {
    void before().then(() => {
      const signal = clientLeft(req, res);
      signals.set(req.url ?? '', signal);
      if (answer(req.url ?? '')) res.end('ok');
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const sock = net.connect(port, '127.0.0.1');
  await new Promise<void>((res, rej) => sock.once('connect', res).once('error', rej));
  sock.on('error', () => undefined);
  return { signals, sock };
}

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;

test('when the client left before the handler asked, then the signal is aborted at once', async () => {
  let release = () => undefined as void;
  const held = new Promise<void>((r) => (release = r));
  const { signals, sock } = await serve(
    () => held,
    () => false,
  );
  sock.write(get('/poll'));
  await new Promise((r) => setTimeout(r, 200)); // the request reached the handler's await
  sock.destroy();
  await new Promise((r) => setTimeout(r, 200)); // the server heard of the close
  release();
  await waitUntil('the handler to ask', () => signals.has('/poll'), 5_000);
  expect(signals.get('/poll')!.aborted).toBe(true);
});

test('when a connection dies with a request pipelined behind another, then both signals abort', async () => {
  const { signals, sock } = await serve(
    () => Promise.resolve(),
    () => false,
  );
  sock.write(get('/first') + get('/second'));
  await waitUntil('both requests to be handled', () => signals.size === 2, 5_000);
  expect([signals.get('/first')!.aborted, signals.get('/second')!.aborted]).toEqual([false, false]);
  sock.destroy();
  await waitUntil(
    'both signals to abort',
    () => signals.get('/first')!.aborted && signals.get('/second')!.aborted,
    5_000,
  );
});

test('when the answer was sent and the kept-alive connection closes later, then the signal stays quiet', async () => {
  const { signals, sock } = await serve(
    () => Promise.resolve(),
    () => true,
  );
  let got = '';
  sock.on('data', (d) => (got += String(d)));
  sock.write(get('/done'));
  await waitUntil('the answer', () => got.includes('ok'), 5_000);
  sock.destroy();
  await new Promise((r) => setTimeout(r, 200));
  expect(signals.get('/done')!.aborted).toBe(false);
});
