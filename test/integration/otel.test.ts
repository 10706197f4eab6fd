import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect, test } from '@jest/globals';
import { startTestServer } from '../helpers/server.ts';

test('when OTEL_EXPORTER_OTLP_ENDPOINT is set, then a span per request is exported over OTLP/HTTP', async () => {
  const received: { url: string; body: string }[] = [];
  const collector = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      received.push({ url: req.url ?? '', body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  const port = (collector.address() as AddressInfo).port;
  const s = await startTestServer({
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
    OTEL_SERVICE_NAME: 'triad-test',
  });
  try {
    expect((await s.anon.get('/api/v1/orgs/no-such-org')).status).toBe(404);
  } finally {
    await s.close(); // flushes the exporter
    collector.close();
  }
  const traces = received.filter((r) => r.url === '/v1/traces');
  expect(traces.length).toBeGreaterThan(0);
  const all = traces.map((t) => t.body).join('\n');
  expect(all).toContain('GET /api/v1/orgs/:org');
  expect(all).toContain('triad-test');
});
