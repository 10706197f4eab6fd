import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  startTestServer,
  uniq,
  type Client,
  type Res,
  type TestServer,
  type TestUser,
} from '../helpers/server.ts';
import { expectError } from '../helpers/factories.ts';

// Security headers, token rules (expiry never beyond the minter's, per-user cap, paged list) and
// organization creation rules (scope, personal token, per-user cap). See docs/api.md.

let s: TestServer;
const MAX_TOKENS = 6;
const MAX_ORGS = 3;
beforeAll(async () => {
  s = await startTestServer({
    TRIAD_MAX_TOKENS_PER_USER: String(MAX_TOKENS),
    TRIAD_MAX_ORGS_PER_USER: String(MAX_ORGS),
  });
});
afterAll(async () => {
  await s.close();
});

async function mint(user: TestUser | Client, body: Record<string, unknown>): Promise<Res> {
  const c = 'client' in user ? user.client : user;
  return c.post('/api/v1/user/tokens', { name: uniq('tok'), ...body });
}

async function tokenClient(user: TestUser, body: Record<string, unknown>): Promise<Client> {
  const r = await mint(user, body);
  if (r.status !== 201) throw new Error(`token create: ${r.status} ${r.text}`);
  return s.anon.as(r.body.data.token);
}

const inHours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

describe('security headers', () => {
  test('API answers, errors included, carry nosniff and no-store', async () => {
    const u = await s.newUser();
    const answers = [
      await u.client.get('/api/v1/user'),
      await s.anon.get('/api/v1/user'),
      await s.anon.get('/api/v1/no-such-route'),
      await s.anon.get('/API/v1/orgs/nope'),
      await u.client.request('POST', '/api/v1/orgs', '{"name": ', { 'content-type': 'application/json' }),
      await s.anon.get('/api/v1/openapi.json'),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 401, 404, 404, 400, 200]);
    for (const r of answers) {
      expect(r.headers.get('x-content-type-options')).toBe('nosniff');
      expect(r.headers.get('cache-control')).toBe('no-store');
    }
  });
});

describe('token expiry never passes the minter’s', () => {
  test('an expiring token mints tokens that expire no later than itself', async () => {
    const u = await s.newUser();
    const minterExpiry = inHours(1);
    const short = await tokenClient(u, { scopes: ['repo:read', 'repo:write'], expires_at: minterExpiry });
    const omitted = await mint(short, { scopes: ['repo:read'] });
    expect(omitted.status).toBe(201);
    expect(omitted.body.data.expires_at).toBe(minterExpiry);
    const nulled = await mint(short, { scopes: ['repo:read'], expires_at: null });
    expect(nulled.status).toBe(201);
    expect(nulled.body.data.expires_at).toBe(minterExpiry);
    const earlier = inHours(0.5);
    const sooner = await mint(short, { scopes: ['repo:read'], expires_at: earlier });
    expect(sooner.status).toBe(201);
    expect(sooner.body.data.expires_at).toBe(earlier);
    // The minted token works and cannot be used to go further either.
    const child = s.anon.as(omitted.body.data.token);
    expect((await child.get('/api/v1/user')).status).toBe(200);
    expect((await mint(child, { scopes: ['repo:read'] })).body.data.expires_at).toBe(minterExpiry);
  });

  test('asking for a later expiry than the minter’s answers 400 and creates nothing', async () => {
    const u = await s.newUser();
    const short = await tokenClient(u, { scopes: ['repo:read'], expires_at: inHours(1) });
    const before = (await u.client.get('/api/v1/user/tokens')).body.pagination.total;
    expectError(
      await mint(short, { scopes: ['repo:read'], expires_at: inHours(2) }),
      400,
      'validation_failed',
    );
    expect((await u.client.get('/api/v1/user/tokens')).body.pagination.total).toBe(before);
  });

  test('a never-expiring token mints never-expiring tokens (and any expiry)', async () => {
    const u = await s.newUser();
    const r = await mint(u, { scopes: ['repo:read'] });
    expect(r.status).toBe(201);
    expect(r.body.data.expires_at).toBeNull();
    expect((await mint(u, { scopes: ['repo:read'], expires_at: inHours(1000) })).status).toBe(201);
  });

  test('an expiring admin token cannot mint a lasting token through the admin endpoint', async () => {
    const admin = await s.newUser(uniq('adm'), { admin: true, scopes: ['admin'] });
    const expiry = inHours(1);
    const short = await tokenClient(admin, { scopes: ['admin'], expires_at: expiry });
    const victim = await s.newUser();
    for (const username of [admin.username, victim.username]) {
      const r = await short.post(`/api/v1/admin/users/${username}/tokens`, { name: 'x', scopes: ['admin'] });
      expect(r.status).toBe(201);
      expect(r.body.data.expires_at).toBe(expiry);
    }
    expectError(
      await short.post(`/api/v1/admin/users/${victim.username}/tokens`, {
        name: 'x',
        scopes: ['repo:read'],
        expires_at: inHours(5),
      }),
      400,
      'validation_failed',
    );
  });
});

describe('tokens per user are capped', () => {
  test('beyond the cap a create answers 409 limit_exceeded; deleting one makes room', async () => {
    const u = await s.newUser(); // holds 1 token
    for (let i = 1; i < MAX_TOKENS; i += 1)
      expect((await mint(u, { scopes: ['repo:read'] })).status).toBe(201);
    const over = await mint(u, { scopes: ['repo:read'] });
    expectError(over, 409, 'limit_exceeded');
    expect(over.body.error.message).toContain(String(MAX_TOKENS));
    // The admin endpoint obeys the same cap.
    expectError(
      await s.admin.post(`/api/v1/admin/users/${u.username}/tokens`, { name: 'x', scopes: ['repo:read'] }),
      409,
      'limit_exceeded',
    );
    const list = await u.client.get('/api/v1/user/tokens?per_page=100');
    expect(list.body.pagination.total).toBe(MAX_TOKENS);
    const last = list.body.data[list.body.data.length - 1];
    expect((await u.client.delete(`/api/v1/user/tokens/${last.id}`)).status).toBe(204);
    expect((await mint(u, { scopes: ['repo:read'] })).status).toBe(201);
  });

  test('concurrent creates never pass the cap', async () => {
    const u = await s.newUser();
    const results = await Promise.all(Array.from({ length: 12 }, () => mint(u, { scopes: ['repo:read'] })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(MAX_TOKENS - 1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'limit_exceeded');
    expect((await u.client.get('/api/v1/user/tokens')).body.pagination.total).toBe(MAX_TOKENS);
  });
});

describe('the token list is paged', () => {
  test('it answers the list envelope with page, per_page, total and Link', async () => {
    const u = await s.newUser();
    for (let i = 0; i < 4; i += 1) expect((await mint(u, { scopes: ['repo:read'] })).status).toBe(201);
    const first = await u.client.get('/api/v1/user/tokens?per_page=2');
    expect(first.status).toBe(200);
    expect(first.body.pagination).toEqual({ page: 1, per_page: 2, total: 5 });
    expect(first.body.data).toHaveLength(2);
    expect(first.body.data[0]).not.toHaveProperty('token');
    expect(first.headers.get('x-total-count')).toBe('5');
    expect(first.headers.get('link')).toContain('rel="next"');
    const third = await u.client.get('/api/v1/user/tokens?per_page=2&page=3');
    expect(third.body.data).toHaveLength(1);
    const ids = [
      ...first.body.data,
      ...(await u.client.get('/api/v1/user/tokens?per_page=2&page=2')).body.data,
    ];
    expect(new Set([...ids, ...third.body.data].map((t: { id: number }) => t.id)).size).toBe(5);
    const all = await u.client.get('/api/v1/user/tokens');
    expect(all.body.pagination).toEqual({ page: 1, per_page: 30, total: 5 });
    expectError(await u.client.get('/api/v1/user/tokens?per_page=0'), 400, 'validation_failed');
  });
});

describe('organization creation', () => {
  test('a token without repo:write (or write/admin) answers 403 and creates nothing', async () => {
    const u = await s.newUser();
    for (const scopes of [['repo:read'], ['read'], ['issues:write', 'ci:write', 'pulls:write']]) {
      const c = await tokenClient(u, { scopes });
      const name = uniq('org');
      expectError(await c.post('/api/v1/orgs', { name }), 403, 'forbidden');
      expectError(await s.anon.get(`/api/v1/orgs/${name}`), 404, 'not_found');
    }
  });

  test('repo:write, the earlier write and admin scopes on a personal token may create', async () => {
    for (const scopes of [['repo:write'], ['write'], ['admin']]) {
      const u = await s.newUser();
      const c = await tokenClient(u, { scopes });
      expect((await c.post('/api/v1/orgs', { name: uniq('org') })).status).toBe(201);
    }
  });

  test('org- and repo-level tokens answer 403 even with every scope', async () => {
    const u = await s.newUser();
    const org = await s.newOrg(u);
    expect((await u.client.post(`/api/v1/orgs/${org}/repos`, { name: 'r' })).status).toBe(201);
    for (const body of [
      { level: 'org', target: org },
      { level: 'repo', target: `${org}/r` },
    ]) {
      const c = await tokenClient(u, { scopes: ['admin'], ...body });
      expectError(await c.post('/api/v1/orgs', { name: uniq('org') }), 403, 'forbidden');
    }
  });

  test('a user owning the cap answers 409 limit_exceeded; site admins are exempt', async () => {
    const u = await s.newUser();
    for (let i = 0; i < MAX_ORGS; i += 1) await s.newOrg(u);
    const over = await u.client.post('/api/v1/orgs', { name: uniq('org') });
    expectError(over, 409, 'limit_exceeded');
    expect(over.body.error.message).toContain(String(MAX_ORGS));
    for (let i = 0; i <= MAX_ORGS; i += 1) await s.newOrg({ ...u, client: s.admin });
  });

  test('concurrent creates of distinct names never pass the cap, and never 500', async () => {
    const u = await s.newUser();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => u.client.post('/api/v1/orgs', { name: uniq('org') })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(MAX_ORGS);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'limit_exceeded');
  });

  test('concurrent creates of one name in different cases: one 201, the rest 409 conflict', async () => {
    const users = await Promise.all(Array.from({ length: 6 }, () => s.newUser()));
    const name = uniq('Race');
    const results = await Promise.all(
      users.map((u, i) =>
        u.client.post('/api/v1/orgs', { name: i % 2 === 0 ? name.toLowerCase() : name.toUpperCase() }),
      ),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'conflict');
  });
});
