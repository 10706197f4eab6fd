import net from 'node:net';
import { describe, expect, test } from '@jest/globals';
import { startTestServer } from '../helpers/server.ts';

describe('graceful shutdown with idle connections', () => {
  test('when a client holds a connection that never sent a request, then close() does not wait for the drain deadline', async () => {
    // a drain deadline far past this test's time limit: only a close that does not wait passes
    const s = await startTestServer({ TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '600' });
    const port = new URL(s.url).port;
    // an idle keep-alive socket after a request, and a socket that never sent anything
    const silent = net.connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
    const r = await s.anon.get('/healthz');
    expect(r.status).toBe(200);
    const closedByServer = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    await s.close();
    await closedByServer;
  });
});
