import net from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, test } from '@jest/globals';
import { requestFrom } from '../helpers/from-address.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { sleep, waitFor, waitUntil } from '../helpers/wait.ts';

// Connection limits (docs/configuration.md, docs/hosting.md "Connection limits"): a per-client
// cap, a first-request timeout for connections that send nothing, and a small reserve above
// TRIAD_MAX_CONNECTIONS in which /healthz and /readyz are still answered. Loopback only, with a
// few hundred sockets at most.

type Held = { sock: net.Socket; closed: Promise<void>; data: () => string };

const port = (s: TestServer) => Number(new URL(s.url).port);

/** An open TCP connection from `localAddress` that sends nothing (unless `send`). */
async function hold(s: TestServer, localAddress: string, send?: string): Promise<Held> {
  const sock = net.connect({ port: port(s), host: '127.0.0.1', localAddress });
  let got = '';
  sock.on('data', (b: Buffer) => (got += b.toString()));
  sock.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => sock.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    sock.once('connect', resolve);
    sock.once('error', reject);
  });
  if (send !== undefined) sock.write(send);
  return { sock, closed, data: () => got };
}

const isClosed = (h: Held) => h.sock.destroyed || h.sock.readyState === 'closed';

/** Whether `h` gets closed within `ms`. */
async function closesWithin(h: Held, ms: number): Promise<boolean> {
  return Promise.race([h.closed.then(() => true), sleep(ms).then(() => false)]);
}

const request = (s: TestServer, localAddress: string, path: string) => requestFrom(s.url, localAddress, path);

/** A request on a held connection (keep-alive); resolves with the raw answer. */
async function onHeld(h: Held, path: string): Promise<string> {
  const before = h.data().length;
  h.sock.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  const answered = () => /\r\n\r\n[\s\S]*\}/.test(h.data().slice(before)) || isClosed(h);
  await waitUntil(`an answer to GET ${path} on a held connection`, answered, 10_000, 20);
  return h.data().slice(before);
}

async function metric(s: TestServer, name: string): Promise<number> {
  const r = await request(s, '127.0.0.1', '/metrics');
  expect(r.status).toBe(200);
  const m = new RegExp(`^${name} (\\d+)$`, 'm').exec(r.body as string);
  return Number(m?.[1] ?? NaN);
}

let held: Held[] = [];
afterEach(() => {
  for (const h of held) h.sock.destroy();
  held = [];
});

describe('one client holding 300 idle connections (TRIAD_MAX_CONNECTIONS=280, per-client default)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ TRIAD_MAX_CONNECTIONS: '280' });
  });
  afterAll(async () => {
    await s.close();
  });

  test('keeps 256 of them, closes the rest on arrival, and every other client is still served', async () => {
    for (let i = 0; i < 300; i += 1) held.push(await hold(s, '127.0.0.2'));
    // The server closes the 44 beyond the cap on arrival; the client hears of it a little later.
    await waitUntil('the connections beyond the per-client cap to be closed', () =>
      held.slice(256).every((h) => isClosed(h)),
    );
    const open = held.filter((h) => !isClosed(h));
    expect(open.length).toBe(256);
    expect(held.slice(256).every((h) => isClosed(h) && h.data() === '')).toBe(true);
    // A new request from that client is refused at once (no answer); others are served.
    await expect(request(s, '127.0.0.2', '/healthz')).rejects.toThrow();
    const health = await request(s, '127.0.0.3', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok' });
    expect((await request(s, '127.0.0.3', '/readyz')).status).toBe(200);
    expect((await request(s, '127.0.0.3', '/api/v1/openapi.json')).status).toBe(200);
    expect(await metric(s, 'triad_http_client_connections_dropped_total')).toBeGreaterThanOrEqual(44);
  });
});

describe('TRIAD_FIRST_REQUEST_TIMEOUT_SECONDS=1', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ TRIAD_FIRST_REQUEST_TIMEOUT_SECONDS: '1' });
  });
  afterAll(async () => {
    await s.close();
  });

  test('a connection that sends nothing, or an unfinished request head, is closed after it; one that made a request stays', async () => {
    // before the first connection is accepted: its timer can only start later
    const started = Date.now();
    const idle = await hold(s, '127.0.0.4');
    const trickle = await hold(s, '127.0.0.4', 'GET /healthz HTTP/1.1\r\nHost: x\r\n');
    const used = await hold(s, '127.0.0.4');
    held.push(idle, trickle, used);
    expect(await onHeld(used, '/healthz')).toMatch(/^HTTP\/1\.1 200 /);
    expect(await closesWithin(idle, 4_000)).toBe(true);
    expect(await closesWithin(trickle, 4_000)).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(idle.data()).toBe('');
    expect(trickle.data()).toBe('');
    // The connection that made a request is kept alive past the timeout and serves another.
    expect(isClosed(used)).toBe(false);
    expect(await onHeld(used, '/healthz')).toMatch(/^HTTP\/1\.1 200 /);
    expect(await metric(s, 'triad_http_connections_first_request_timeouts_total')).toBeGreaterThanOrEqual(2);
  });
});

describe('at the global cap (TRIAD_MAX_CONNECTIONS=6, 4 per client)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ TRIAD_MAX_CONNECTIONS: '6', TRIAD_MAX_CONNECTIONS_PER_CLIENT: '4' });
  });
  afterAll(async () => {
    await s.close();
  });

  test('/healthz and /readyz are still answered, other requests get 503, and beyond the reserve connections are closed on arrival', async () => {
    for (let i = 0; i < 4; i += 1) held.push(await hold(s, '127.0.0.5'));
    for (let i = 0; i < 2; i += 1) held.push(await hold(s, '127.0.0.6'));
    await sleep(200);
    expect(held.every((h) => !isClosed(h))).toBe(true);

    const health = await request(s, '127.0.0.7', '/healthz');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok' });
    expect(health.headers.connection).toBe('close');
    const ready = await request(s, '127.0.0.7', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready' });
    const busy = await request(s, '127.0.0.7', '/api/v1/openapi.json');
    expect(busy.status).toBe(503);
    expect(busy.body).toEqual({ error: { code: 'service_unavailable', message: expect.any(String) } });
    expect(busy.headers['retry-after']).toBe('5');
    expect(busy.headers.connection).toBe('close');

    // The reserve takes two connections per client; a third is closed on arrival.
    const spare = [await hold(s, '127.0.0.8'), await hold(s, '127.0.0.8')];
    const third = await hold(s, '127.0.0.8');
    held.push(...spare, third);
    expect(await closesWithin(third, 1_000)).toBe(true);
    expect(third.data()).toBe('');
    expect(spare.every((h) => !isClosed(h))).toBe(true);

    // Once the holders leave, the server serves everything again.
    // The server counts a connection as gone only when it handles its close (a loaded process
    // may still see the old count for a while): ask until it answers, then it must be a 200.
    for (const h of held) h.sock.destroy();
    const after = await waitFor(
      'a request served once the holders left',
      async () => {
        const r = await request(s, '127.0.0.7', '/api/v1/openapi.json').catch(() => undefined);
        return r?.status === 503 ? undefined : r;
      },
      10_000,
    );
    expect(after.status).toBe(200);
    expect(await metric(s, 'triad_http_connections_dropped_total')).toBeGreaterThanOrEqual(1);
  });
});

describe('behind a trusted proxy (TRIAD_TRUST_PROXY=127.0.0.9, 4 per client)', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ TRIAD_TRUST_PROXY: '127.0.0.9', TRIAD_MAX_CONNECTIONS_PER_CLIENT: '4' });
  });
  afterAll(async () => {
    await s.close();
  });

  test("the proxy's connections are not limited per client; other clients are", async () => {
    const proxy: Held[] = [];
    for (let i = 0; i < 10; i += 1) proxy.push(await hold(s, '127.0.0.9'));
    const direct: Held[] = [];
    for (let i = 0; i < 5; i += 1) direct.push(await hold(s, '127.0.0.10'));
    held.push(...proxy, ...direct);
    // direct[4] is closed on arrival; the client hears of it a little later.
    await waitUntil('the fifth direct connection to be closed', () => isClosed(direct[4]!));
    expect(proxy.every((h) => !isClosed(h))).toBe(true);
    for (const h of proxy) expect(await onHeld(h, '/healthz')).toMatch(/^HTTP\/1\.1 200 /);
    expect(direct.slice(0, 4).every((h) => !isClosed(h))).toBe(true);
    expect(isClosed(direct[4]!)).toBe(true);
  });
});
