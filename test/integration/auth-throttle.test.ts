import fs from 'node:fs/promises';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { sh, tempDir, withCreds } from '../helpers/vcs.ts';

// Repeated failed authentications from one client address answer 429 `rate_limited` with
// Retry-After, on the API and on clone URLs (one shared counter per address). See docs/api.md.

type Answer = { status: number; headers: http.IncomingHttpHeaders; body: any };

/** One request sent from a chosen loopback address (the whole 127.0.0.0/8 range is local). */
function from(
  base: string,
  localAddress: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { localAddress, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const json = (res.headers['content-type'] ?? '').includes('json') && text !== '';
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: json ? JSON.parse(text) : text });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const basic = (token: string) => ({ authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function expectLimited(r: Answer, windowSeconds: number): number {
  expect(r.status).toBe(429);
  const after = Number(r.headers['retry-after']);
  expect(Number.isInteger(after)).toBe(true);
  expect(after).toBeGreaterThanOrEqual(1);
  expect(after).toBeLessThanOrEqual(windowSeconds);
  return after;
}

describe('with a limit of 3 failures in 2 s, addresses taken from the socket', () => {
  let s: TestServer;
  let user: TestUser;
  let org: string;
  const repo = 'pub';

  beforeAll(async () => {
    s = await startTestServer({ TRIAD_AUTH_FAILURE_LIMIT: '3', TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '2' });
    user = await s.newUser();
    org = await s.newOrg(user);
    expect((await user.client.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs: 'git' })).status).toBe(
      201,
    );
  });
  afterAll(async () => {
    await s.close();
  });

  test('bad tokens from one address get 429 with Retry-After; other addresses and the window end are unaffected', async () => {
    const bad = bearer('triad_not_a_real_token');
    for (let i = 0; i < 3; i += 1) {
      const r = await from(s.url, '127.0.0.2', '/api/v1/user', bad);
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('unauthorized');
    }
    const limited = await from(s.url, '127.0.0.2', '/api/v1/user', bad);
    expectLimited(limited, 2);
    expect(limited.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String) } });
    expect(limited.headers['x-content-type-options']).toBe('nosniff');
    // While blocked, a valid token from that address is refused too (no more token testing) …
    expectLimited(await from(s.url, '127.0.0.2', '/api/v1/user', bearer(user.token)), 2);
    // … requests without credentials are not throttled …
    expect((await from(s.url, '127.0.0.2', `/api/v1/orgs/${org}`)).status).toBe(200);
    // … and another address is unaffected.
    const other = await from(s.url, '127.0.0.3', '/api/v1/user', bearer(user.token));
    expect(other.status).toBe(200);
    expect(other.body.data.username).toBe(user.username);
    // After the window the address may authenticate again.
    await sleep(2300);
    expect((await from(s.url, '127.0.0.2', '/api/v1/user', bearer(user.token))).status).toBe(200);
  });

  test('clone URLs share the counter: bad Basic credentials block the address on both', async () => {
    const refs = `/${org}/${repo}/info/refs?service=git-upload-pack`;
    for (let i = 0; i < 2; i += 1)
      expect((await from(s.url, '127.0.0.4', refs, basic('wrong'))).status).toBe(401);
    expect((await from(s.url, '127.0.0.4', '/api/v1/user', bearer('wrong'))).status).toBe(401);
    const limited = await from(s.url, '127.0.0.4', refs, basic(user.token));
    expectLimited(limited, 2);
    expect(limited.body).toContain('too many failed authentications');
    expectLimited(await from(s.url, '127.0.0.4', '/api/v1/user', bearer(user.token)), 2);
    // The anonymous first request of a clone (before the client sends credentials) still passes.
    expect((await from(s.url, '127.0.0.4', refs)).status).toBe(200);
    expect((await from(s.url, '127.0.0.5', refs, basic(user.token))).status).toBe(200);
  });

  test('successful authentications never count', async () => {
    for (let i = 0; i < 10; i += 1) {
      expect((await from(s.url, '127.0.0.6', '/api/v1/user', bearer(user.token))).status).toBe(200);
    }
    for (let i = 0; i < 3; i += 1) {
      expect((await from(s.url, '127.0.0.6', '/api/v1/user', bearer('wrong'))).status).toBe(401);
    }
  });

  test('without TRIAD_TRUST_PROXY a forged X-Forwarded-For does not change the address', async () => {
    for (let i = 0; i < 3; i += 1) {
      const r = await from(s.url, '127.0.0.7', '/api/v1/user', {
        ...bearer('wrong'),
        'x-forwarded-for': `198.51.100.${i}`,
      });
      expect(r.status).toBe(401);
    }
    const r = await from(s.url, '127.0.0.7', '/api/v1/user', {
      ...bearer(user.token),
      'x-forwarded-for': '198.51.100.99',
    });
    expectLimited(r, 2);
  });
});

describe('behind a trusted proxy (TRIAD_TRUST_PROXY=loopback)', () => {
  let s: TestServer;
  let user: TestUser;

  beforeAll(async () => {
    s = await startTestServer({
      TRIAD_AUTH_FAILURE_LIMIT: '2',
      TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '30',
      TRIAD_TRUST_PROXY: 'loopback',
    });
    user = await s.newUser();
  });
  afterAll(async () => {
    await s.close();
  });

  test('the address is the one the proxy reports in X-Forwarded-For', async () => {
    const client = (ip: string, token: string) => ({ ...bearer(token), 'x-forwarded-for': ip });
    for (let i = 0; i < 2; i += 1) {
      expect((await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.7', 'wrong'))).status).toBe(
        401,
      );
    }
    expectLimited(await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.7', user.token)), 30);
    const other = await from(s.url, '127.0.0.1', '/api/v1/user', client('203.0.113.8', user.token));
    expect(other.status).toBe(200);
  });
});

describe('a stock client on a blocked address', () => {
  let s: TestServer;

  beforeAll(async () => {
    s = await startTestServer({ TRIAD_AUTH_FAILURE_LIMIT: '2', TRIAD_AUTH_FAILURE_WINDOW_SECONDS: '60' });
  });
  afterAll(async () => {
    await s.close();
  });

  test('git sees 429 after repeated bad tokens', async () => {
    const user = await s.newUser();
    const org = await s.newOrg(user);
    const name = uniq('r');
    // Private, so git gets a 401 challenge and then sends the URL's credentials.
    const created = await user.client.post(`/api/v1/orgs/${org}/repos`, {
      name,
      vcs: 'git',
      is_private: true,
    });
    expect(created.status).toBe(201);
    const dir = await tempDir();
    const url = `${s.url}/${org}/${name}`;
    for (let i = 0; i < 2; i += 1) {
      const r = await sh('git', ['ls-remote', withCreds(url, 'wrong')], dir);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/Authentication failed|401/);
    }
    const r = await sh('git', ['ls-remote', withCreds(url, user.token)], dir);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('429');
    await fs.rm(dir, { recursive: true, force: true });
  });
});
