/**
 * TRIAD_METRICS_PORT: unset, `/metrics` is answered on the main port (as it always was); set, a
 * second listener answers `/metrics` and nothing else, and the main port (the one an Ingress
 * routes to) answers 404 there.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { Client, startTestServer, type TestServer } from '../helpers/server.ts';

let plain: TestServer;
let split: TestServer;
let metrics: Client;

beforeAll(async () => {
  [plain, split] = await Promise.all([startTestServer(), startTestServer({ TRIAD_METRICS_PORT: '0' })]);
  metrics = new Client(`http://127.0.0.1:${split.running.metricsPort}`);
});
afterAll(async () => {
  await Promise.all([plain?.close(), split?.close()]);
});

const HISTOGRAM =
  /triad_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/orgs\/:org",status="404"\} [1-9]/;

describe('TRIAD_METRICS_PORT unset', () => {
  test('when /metrics is asked on the main port, then it answers the metrics', async () => {
    expect(plain.running.metricsPort).toBeUndefined();
    await plain.anon.get('/api/v1/orgs/nope-org');
    const r = await plain.anon.get('/metrics');
    expect(r.status).toBe(200);
    expect(r.text).toMatch(HISTOGRAM);
    const doc = await plain.anon.get('/api/v1/openapi.json');
    expect(doc.body.paths['/metrics']).toBeDefined();
  });
});

describe('TRIAD_METRICS_PORT set', () => {
  test('when /metrics is asked on the metrics port, then it answers the metrics of requests served on the main port', async () => {
    expect(split.running.metricsPort).toEqual(expect.any(Number));
    expect(split.running.metricsPort).not.toBe(split.running.port);
    await split.anon.get('/api/v1/orgs/nope-org');
    const r = await metrics.get('/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    expect(r.text).toContain('triad_process_cpu_user_seconds_total');
    expect(r.text).toMatch(HISTOGRAM);
  });

  test('when /metrics is asked on the main port, then it is not found there (nor in the OpenAPI document)', async () => {
    const r = await split.anon.get('/metrics');
    expect(r.status).toBe(404);
    expect(r.text).not.toContain('triad_process_cpu_user_seconds_total');
    const doc = await split.anon.get('/api/v1/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.paths['/metrics']).toBeUndefined();
    expect(doc.body.paths['/healthz']).toBeDefined();
  });

  test('when anything but /metrics is asked on the metrics port, then it is not found', async () => {
    for (const p of ['/healthz', '/readyz', '/api/v1/orgs', '/']) {
      const r = await metrics.get(p);
      expect([p, r.status]).toEqual([p, 404]);
    }
  });

  test('when the server drains a request in flight, then the metrics port still answers; once it has stopped, it is closed', async () => {
    const s = await startTestServer({ TRIAD_METRICS_PORT: '0', TRIAD_SHUTDOWN_TIMEOUT_SECONDS: '60' });
    const scrape = new Client(`http://127.0.0.1:${s.running.metricsPort}`);
    // a request whose body is still arriving (a push being uploaded, say)
    const upload = net.connect(s.running.port, '127.0.0.1');
    await new Promise<void>((resolve) => upload.once('connect', () => resolve()));
    const answer = new Promise<string>((resolve) => {
      let text = '';
      upload.on('data', (d: Buffer) => (text += d.toString()));
      upload.on('close', () => resolve(text));
    });
    const body = JSON.stringify({ name: 'drained', description: 'arrived during the drain' });
    upload.write(
      `POST /api/v1/orgs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.adminToken}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    const stopped = s.close();
    // once the main port no longer takes connections (the drain), the metrics port still does
    const refused = () =>
      fetch(`http://127.0.0.1:${s.running.port}/healthz`).then(
        () => false,
        () => true,
      );
    while (!(await refused())) await new Promise((r) => setTimeout(r, 50));
    const during = await scrape.get('/metrics');
    expect(during.status).toBe(200);
    // the request in flight ends normally
    upload.write(body.slice(5));
    expect(await answer).toMatch(/^HTTP\/1.1 201/);
    await stopped;
    await expect(fetch(`http://127.0.0.1:${s.running.metricsPort}/metrics`)).rejects.toThrow();
  });

  test('when the server stops, then the metrics port closes too', async () => {
    const s = await startTestServer({ TRIAD_METRICS_PORT: '0' });
    const port = s.running.metricsPort;
    expect((await new Client(`http://127.0.0.1:${port}`).get('/metrics')).status).toBe(200);
    await s.close();
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
  });
});
