import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

describe('operations endpoints', () => {
  test('when the process is up, then /healthz answers 200', async () => {
    const r = await s.anon.get('/healthz');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ok' });
  });

  test('when the database is reachable, then /readyz answers 200', async () => {
    const r = await s.anon.get('/readyz');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ status: 'ready' });
  });

  test('when requests were served, then /metrics exposes the duration histogram by route pattern', async () => {
    await s.anon.get('/api/v1/orgs/nope-org');
    const r = await s.anon.get('/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('text/plain');
    expect(r.text).toContain('triad_process_cpu_user_seconds_total');
    expect(r.text).toMatch(
      /triad_http_request_duration_seconds_count\{method="GET",route="\/api\/v1\/orgs\/:org",status="404"\} [1-9]/,
    );
  });

  test('the OpenAPI document describes every mounted route with its body schema', async () => {
    const r = await s.anon.get('/api/v1/openapi.json');
    expect(r.status).toBe(200);
    expect(r.body.openapi).toBe('3.1.1');
    const paths = r.body.paths;
    for (const [p, m] of [
      ['/api/v1/user', 'get'],
      ['/api/v1/user/tokens', 'get'],
      ['/api/v1/user/tokens', 'post'],
      ['/api/v1/user/tokens/{id}', 'delete'],
      ['/api/v1/orgs', 'post'],
      ['/api/v1/orgs/{org}', 'get'],
      ['/api/v1/orgs/{org}/repos', 'get'],
      ['/api/v1/orgs/{org}/members', 'get'],
      ['/api/v1/orgs/{org}/members/{username}', 'put'],
      ['/api/v1/orgs/{org}/members/{username}', 'delete'],
      ['/api/v1/admin/users', 'post'],
      ['/api/v1/admin/users/{username}/tokens', 'post'],
      ['/healthz', 'get'],
      ['/readyz', 'get'],
      ['/metrics', 'get'],
    ]) {
      expect(paths[p!]?.[m!]).toBeDefined();
    }
    const tokenBody = paths['/api/v1/user/tokens'].post.requestBody.content['application/json'].schema;
    expect(tokenBody.required).toEqual(expect.arrayContaining(['name', 'scopes']));
    expect(tokenBody.properties.scopes.items.enum).toEqual(
      expect.arrayContaining(['repo:read', 'read', 'admin']),
    );
    const members = paths['/api/v1/orgs/{org}/members'].get.parameters.map((x: { name: string }) => x.name);
    expect(members).toEqual(expect.arrayContaining(['org', 'page', 'per_page']));
  });
});

describe('HTTP conventions', () => {
  test('an unknown route answers 404 with the error envelope', async () => {
    const r = await s.anon.get('/api/v1/does-not-exist');
    expect(r.status).toBe(404);
    expect(r.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  test('malformed JSON answers 400 with the envelope', async () => {
    const r = await s.admin.request('POST', '/api/v1/orgs', '{"name": ', {
      'content-type': 'application/json',
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('bad_request');
  });

  test('a body over the limit answers 413 payload_too_large', async () => {
    const big = JSON.stringify({ name: 'x', description: 'y'.repeat(1_100_000) });
    const r = await s.admin.request('POST', '/api/v1/orgs', big, { 'content-type': 'application/json' });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe('payload_too_large');
  });

  test('a body failing its schema answers 400 validation_failed naming the field', async () => {
    const r = await s.admin.post('/api/v1/orgs', { name: 'bad name!' });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('validation_failed');
    expect(r.body.error.message).toContain('body.name');
  });

  test('a missing body on a route that needs one answers 400', async () => {
    const r = await s.admin.request('POST', '/api/v1/orgs');
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('bad_request');
  });

  test('the request id is echoed when given and generated otherwise', async () => {
    const given = await s.anon.get('/healthz', { 'x-request-id': 'abc-123' });
    expect(given.headers.get('x-request-id')).toBe('abc-123');
    const generated = await s.anon.get('/healthz');
    expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  test('pagination clamps per_page to 100 and sets Link and X-Total-Count', async () => {
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    for (let i = 0; i < 4; i++) await s.addMember(org, await s.newUser());
    const clamped = await owner.client.get(`/api/v1/orgs/${org}/members?per_page=1000`);
    expect(clamped.status).toBe(200);
    expect(clamped.body.pagination).toEqual({ page: 1, per_page: 100, total: 5 });
    const page2 = await owner.client.get(`/api/v1/orgs/${org}/members?per_page=2&page=2`);
    expect(page2.body.data).toHaveLength(2);
    expect(page2.body.pagination).toEqual({ page: 2, per_page: 2, total: 5 });
    expect(page2.headers.get('x-total-count')).toBe('5');
    const link = page2.headers.get('link') ?? '';
    expect(link).toContain(`/api/v1/orgs/${org}/members?per_page=2&page=1>; rel="first"`);
    expect(link).toContain('page=1>; rel="prev"');
    expect(link).toContain('page=3>; rel="next"');
    expect(link).toContain('page=3>; rel="last"');
  });

  test('bad pagination values answer 400', async () => {
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    for (const q of ['page=0', 'per_page=0', 'page=abc']) {
      const r = await owner.client.get(`/api/v1/orgs/${org}/members?${q}`);
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('validation_failed');
    }
  });
});
