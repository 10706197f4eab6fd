import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type Client, type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, newRepo, newTeam } from '../helpers/factories.ts';
import { sleep } from '../helpers/wait.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

/** Creates another token of `user` through the user endpoint and returns a client using it. */
async function tokenOf(user: TestUser, body: Record<string, unknown>): Promise<Client> {
  const r = await user.client.post('/api/v1/user/tokens', { name: uniq('tok'), ...body });
  if (r.status !== 201) throw new Error(`token create: ${r.status} ${r.text}`);
  return s.anon.as(r.body.data.token);
}

const createRepo = async (owner: Client, org: string, opts: { isPrivate?: boolean; name?: string } = {}) =>
  (await newRepo(owner, org, { isPrivate: opts.isPrivate ?? false, name: opts.name })).name;

describe('bearer token authentication', () => {
  test('when no token is sent to GET /api/v1/user, then it answers 401 with the envelope', async () => {
    const r = await s.anon.get('/api/v1/user');
    expectError(r, 401, 'unauthorized');
  });

  test('when a valid token is sent, then GET /api/v1/user answers 200 with the profile', async () => {
    const u = await s.newUser();
    const r = await u.client.get('/api/v1/user');
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      id: u.id,
      username: u.username,
      email: `${u.username}@example.test`,
      display_name: `${u.username} Display`,
      is_admin: false,
      avatar_url: '',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
    });
  });

  test('when the Authorization header is malformed, then it answers 401', async () => {
    const u = await s.newUser();
    for (const header of [`Basic ${u.token}`, 'Bearer', 'Bearer ', `Token ${u.token}`, `Bearer a b`]) {
      const r = await s.anon.get('/api/v1/user', { authorization: header });
      expectError(r, 401, 'unauthorized');
    }
  });

  test('when the bearer token is unknown, then it answers 401 even on a public route', async () => {
    const bogus = s.anon.as('triad_0000000000000000000000000000000000000000000000');
    expectError(await bogus.get('/api/v1/user'), 401, 'unauthorized');
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    expectError(await bogus.get(`/api/v1/orgs/${org}`), 401, 'unauthorized');
    expect((await s.anon.get(`/api/v1/orgs/${org}`)).status).toBe(200);
  });

  test('when a token is created with expires_at in the past, then it answers 400', async () => {
    const u = await s.newUser();
    const r = await u.client.post('/api/v1/user/tokens', {
      name: 'old',
      scopes: ['repo:read'],
      expires_at: new Date(Date.now() - 60_000).toISOString(),
    });
    expectError(r, 400, 'validation_failed');
    const list = await u.client.get('/api/v1/user/tokens');
    expect(list.body.data.map((t: { name: string }) => t.name)).not.toContain('old');
  });

  test('when a token has expired, then it answers 401 "token expired", and works before that', async () => {
    const u = await s.newUser();
    // 5 s: the creation and the first use below must both fit before it (2 s was missed under load)
    const expiresAt = new Date(Date.now() + 5000);
    const created = await u.client.post('/api/v1/user/tokens', {
      name: 'short',
      scopes: ['repo:read'],
      expires_at: expiresAt.toISOString(),
    });
    expect(created.status).toBe(201);
    expect(created.body.data.expires_at).toBe(expiresAt.toISOString());
    const short = s.anon.as(created.body.data.token);
    expect((await short.get('/api/v1/user')).status).toBe(200);
    await sleep(Math.max(0, expiresAt.getTime() - Date.now()) + 300);
    const r = await short.get('/api/v1/user');
    expectError(r, 401, 'unauthorized');
    expect(r.body.error.message).toBe('token expired');
  });

  test('when a token is revoked, then DELETE answers 204 and the token answers 401 afterwards', async () => {
    const u = await s.newUser();
    const created = await u.client.post('/api/v1/user/tokens', { name: 'doomed', scopes: ['repo:read'] });
    expect(created.status).toBe(201);
    const doomed = s.anon.as(created.body.data.token);
    expect((await doomed.get('/api/v1/user')).status).toBe(200);
    const del = await u.client.delete(`/api/v1/user/tokens/${created.body.data.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expectError(await doomed.get('/api/v1/user'), 401, 'unauthorized');
    const list = await u.client.get('/api/v1/user/tokens');
    expect(list.body.data.map((t: { id: number }) => t.id)).not.toContain(created.body.data.id);
    expectError(await u.client.delete(`/api/v1/user/tokens/${created.body.data.id}`), 404, 'not_found');
  });

  test("when a user deletes someone else's token id, then it answers 404 and the token keeps working", async () => {
    const a = await s.newUser();
    const b = await s.newUser();
    const created = await b.client.post('/api/v1/user/tokens', { name: 'mine', scopes: ['repo:read'] });
    expect(created.status).toBe(201);
    expectError(await a.client.delete(`/api/v1/user/tokens/${created.body.data.id}`), 404, 'not_found');
    expect((await s.anon.as(created.body.data.token).get('/api/v1/user')).status).toBe(200);
    expectError(await a.client.delete('/api/v1/user/tokens/not-a-number'), 404, 'not_found');
  });
});

describe('token create and list', () => {
  test('when a token is created, then it answers 201 with the plaintext token once', async () => {
    const u = await s.newUser();
    const r = await u.client.post('/api/v1/user/tokens', { name: 'ci', scopes: ['repo:read', 'ci:read'] });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      name: 'ci',
      scopes: ['repo:read', 'ci:read'],
      level: 'personal',
      target: null,
      expires_at: null,
      created_at: expect.any(String),
      last_used_at: null,
      api_variant: null,
      token: expect.stringMatching(/^\S{20,}$/),
    });
    expect(r.body.data.token).not.toBe(u.token);
    const me = await s.anon.as(r.body.data.token).get('/api/v1/user');
    expect(me.body.data.username).toBe(u.username);
  });

  test('when tokens are listed, then each has the documented fields and never a token value', async () => {
    const u = await s.newUser();
    const created = await u.client.post('/api/v1/user/tokens', { name: 'listed', scopes: ['pulls:read'] });
    expect(created.status).toBe(201);
    const r = await u.client.get('/api/v1/user/tokens');
    expect(r.status).toBe(200);
    expect(r.body.data).toHaveLength(2);
    for (const t of r.body.data) {
      expect(Object.keys(t).sort()).toEqual(
        [
          'api_variant',
          'created_at',
          'expires_at',
          'id',
          'last_used_at',
          'level',
          'name',
          'scopes',
          'target',
        ].sort(),
      );
      expect(t).not.toHaveProperty('token');
      expect(JSON.stringify(t)).not.toContain(created.body.data.token);
      expect(JSON.stringify(t)).not.toContain(u.token);
    }
    expect(r.body.data[1]).toEqual({
      id: created.body.data.id,
      name: 'listed',
      scopes: ['pulls:read'],
      level: 'personal',
      target: null,
      expires_at: null,
      created_at: created.body.data.created_at,
      last_used_at: null,
      api_variant: null,
    });
  });

  test('when a token is used, then its last_used_at is recorded in the list', async () => {
    const u = await s.newUser();
    const created = await u.client.post('/api/v1/user/tokens', { name: 'used', scopes: ['repo:read'] });
    expect(created.status).toBe(201);
    expect((await s.anon.as(created.body.data.token).get('/api/v1/user')).status).toBe(200);
    let used: unknown = null;
    for (let i = 0; i < 50 && used === null; i++) {
      const list = await u.client.get('/api/v1/user/tokens');
      used = list.body.data.find((t: { id: number }) => t.id === created.body.data.id)?.last_used_at ?? null;
      if (used === null) await sleep(50);
    }
    expect(used).toEqual(expect.any(String));
  });

  test('when a scope name is unknown, then create answers 400', async () => {
    const u = await s.newUser();
    for (const scopes of [['repo:delete'], ['REPO:READ'], ['repo:read', 'everything']]) {
      const r = await u.client.post('/api/v1/user/tokens', { name: 'x', scopes });
      expectError(r, 400, 'validation_failed');
    }
  });

  test('when scopes repeat or are empty, then create answers 400', async () => {
    const u = await s.newUser();
    expectError(
      await u.client.post('/api/v1/user/tokens', { name: 'x', scopes: ['repo:read', 'repo:read'] }),
      400,
      'validation_failed',
    );
    expectError(
      await u.client.post('/api/v1/user/tokens', { name: 'x', scopes: [] }),
      400,
      'validation_failed',
    );
    expectError(await u.client.post('/api/v1/user/tokens', { scopes: ['read'] }), 400, 'validation_failed');
  });

  test('when no token is sent to the token endpoints, then they answer 401', async () => {
    expectError(await s.anon.get('/api/v1/user/tokens'), 401, 'unauthorized');
    expectError(
      await s.anon.post('/api/v1/user/tokens', { name: 'x', scopes: ['read'] }),
      401,
      'unauthorized',
    );
    expectError(await s.anon.delete('/api/v1/user/tokens/1'), 401, 'unauthorized');
  });
});

describe('current-variant scopes', () => {
  let owner: TestUser;
  let member: TestUser;
  let org: string;
  beforeAll(async () => {
    ({ owner, member, org } = await newTeam(s));
  });

  test('when a member token has only issues:read, then creating a repository answers 403', async () => {
    const c = await tokenOf(member, { scopes: ['issues:read'] });
    const name = uniq('repo');
    const r = await c.post(`/api/v1/orgs/${org}/repos`, { name });
    expectError(r, 403, 'forbidden');
    expectError(await owner.client.get(`/api/v1/repos/${org}/${name}`), 404, 'not_found');
  });

  test('when a member token has repo:write, then creating a repository answers 201', async () => {
    const c = await tokenOf(member, { scopes: ['repo:write'] });
    const name = uniq('repo');
    const r = await c.post(`/api/v1/orgs/${org}/repos`, { name });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ name, org, is_private: false });
  });

  test('when a non-member has repo:write, then creating a repository answers 403', async () => {
    const outsider = await s.newUser(undefined, { scopes: ['repo:write'] });
    const r = await outsider.client.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo') });
    expectError(r, 403, 'forbidden');
  });

  test('when anonymous creates a repository, then it answers 401', async () => {
    expectError(await s.anon.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo') }), 401, 'unauthorized');
  });

  test('when a token has repo:write, then it also reads a private repository (write implies read)', async () => {
    const name = await createRepo(owner.client, org, { isPrivate: true });
    const writer = await tokenOf(member, { scopes: ['repo:write'] });
    const r = await writer.get(`/api/v1/repos/${org}/${name}`);
    expect(r.status).toBe(200);
    expect(r.body.data.name).toBe(name);
  });

  test('when a member token lacks any repo scope, then a private repository is forbidden (403)', async () => {
    const name = await createRepo(owner.client, org, { isPrivate: true });
    const c = await tokenOf(member, { scopes: ['issues:read'] });
    expectError(await c.get(`/api/v1/repos/${org}/${name}`), 403, 'forbidden');
  });
});

describe('earlier-variant coarse scopes', () => {
  let owner: TestUser;
  let org: string;
  beforeAll(async () => {
    owner = await s.newUser();
    org = await s.newOrg(owner);
  });

  test('when a token has the write scope, then it creates a repository (201)', async () => {
    const c = await tokenOf(owner, { scopes: ['write'] });
    expect((await c.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo') })).status).toBe(201);
  });

  test('when a token has only the read scope, then creating a repository answers 403 but reading works', async () => {
    const c = await tokenOf(owner, { scopes: ['read'] });
    expectError(await c.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo') }), 403, 'forbidden');
    const name = await createRepo(owner.client, org, { isPrivate: true });
    expect((await c.get(`/api/v1/repos/${org}/${name}`)).status).toBe(200);
  });

  test('when a token has the admin scope, then it creates a repository (201)', async () => {
    const c = await tokenOf(owner, { scopes: ['admin'] });
    expect((await c.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo') })).status).toBe(201);
  });
});

describe('token levels', () => {
  let user: TestUser;
  let orgA: string;
  let orgB: string;
  let privA: string;
  let privA2: string;
  beforeAll(async () => {
    user = await s.newUser();
    orgA = await s.newOrg(user);
    orgB = await s.newOrg(user);
    privA = await createRepo(user.client, orgA, { isPrivate: true });
    privA2 = await createRepo(user.client, orgA, { isPrivate: true });
  });

  test('when an org token is used in its org, then it creates repositories there (201)', async () => {
    const c = await tokenOf(user, { scopes: ['repo:write'], level: 'org', target: orgA });
    const r = await c.post(`/api/v1/orgs/${orgA}/repos`, { name: uniq('repo') });
    expect(r.status).toBe(201);
    expect((await c.get(`/api/v1/repos/${orgA}/${privA}`)).status).toBe(200);
  });

  test('when an org token is used in another org of the user, then creating a repository answers 403', async () => {
    const c = await tokenOf(user, { scopes: ['repo:write'], level: 'org', target: orgA });
    expectError(await c.post(`/api/v1/orgs/${orgB}/repos`, { name: uniq('repo') }), 403, 'forbidden');
    // The personal token of the same user can.
    expect((await user.client.post(`/api/v1/orgs/${orgB}/repos`, { name: uniq('repo') })).status).toBe(201);
  });

  test('when an org token is listed, then it shows level "org" and its target', async () => {
    const r = await user.client.post('/api/v1/user/tokens', {
      name: 'org-tok',
      scopes: ['repo:read'],
      level: 'org',
      target: orgA,
    });
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ level: 'org', target: orgA });
    const list = await user.client.get('/api/v1/user/tokens');
    expect(list.body.data.find((t: { id: number }) => t.id === r.body.data.id)).toMatchObject({
      level: 'org',
      target: orgA,
    });
  });

  test('when a repo token reads its private repository, then it answers 200', async () => {
    const c = await tokenOf(user, { scopes: ['repo:read'], level: 'repo', target: `${orgA}/${privA}` });
    const r = await c.get(`/api/v1/repos/${orgA}/${privA}`);
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ name: privA, org: orgA, is_private: true });
  });

  test('when a repo token reads another private repository the user can see, then it answers 404', async () => {
    const c = await tokenOf(user, { scopes: ['repo:read'], level: 'repo', target: `${orgA}/${privA}` });
    expectError(await c.get(`/api/v1/repos/${orgA}/${privA2}`), 404, 'not_found');
    expect((await user.client.get(`/api/v1/repos/${orgA}/${privA2}`)).status).toBe(200);
    const list = await c.get(`/api/v1/orgs/${orgA}/repos`);
    expect(list.status).toBe(200);
    const names = list.body.data.map((r: { name: string }) => r.name);
    expect(names).toContain(privA);
    expect(names).not.toContain(privA2);
  });

  test('when a repo token makes an org-level write, then it answers 403', async () => {
    const c = await tokenOf(user, { scopes: ['repo:write'], level: 'repo', target: `${orgA}/${privA}` });
    expectError(await c.post(`/api/v1/orgs/${orgA}/repos`, { name: uniq('repo') }), 403, 'forbidden');
  });

  test('when level and target do not fit together, then create answers 400', async () => {
    for (const body of [
      { level: 'personal', target: orgA },
      { level: 'org' },
      { level: 'repo' },
      { level: 'repo', target: orgA },
      { level: 'org', target: `${orgA}/${privA}` },
      { level: 'repo', target: `${orgA}/${privA}/extra` },
      { level: 'team', target: orgA },
    ]) {
      const r = await user.client.post('/api/v1/user/tokens', {
        name: 'bad',
        scopes: ['repo:read'],
        ...body,
      });
      expectError(r, 400, 'validation_failed');
    }
  });

  test('when the target is an org the user is not a member of (or unknown), then create answers 404', async () => {
    const stranger = await s.newUser();
    const foreign = await s.newOrg(stranger);
    for (const body of [
      { level: 'org', target: foreign },
      { level: 'org', target: 'no-such-org-here' },
      { level: 'repo', target: `${orgA}/no-such-repo` },
    ]) {
      const r = await user.client.post('/api/v1/user/tokens', {
        name: 'bad',
        scopes: ['repo:read'],
        ...body,
      });
      expectError(r, 404, 'not_found');
    }
  });
});

describe('admin endpoints', () => {
  test('when a non-admin user calls them, then they answer 403', async () => {
    const u = await s.newUser();
    const other = await s.newUser();
    const name = uniq('user');
    expectError(
      await u.client.post('/api/v1/admin/users', { username: name, email: `${name}@example.test` }),
      403,
      'forbidden',
    );
    expectError(
      await u.client.post(`/api/v1/admin/users/${other.username}/tokens`, { name: 'x', scopes: ['admin'] }),
      403,
      'forbidden',
    );
  });

  test("when an admin's token lacks the admin scope, then they answer 403", async () => {
    const a = await s.newUser(undefined, { admin: true, scopes: ['repo:read', 'repo:write', 'write'] });
    const other = await s.newUser();
    const name = uniq('user');
    expectError(
      await a.client.post('/api/v1/admin/users', { username: name, email: `${name}@example.test` }),
      403,
      'forbidden',
    );
    expectError(
      await a.client.post(`/api/v1/admin/users/${other.username}/tokens`, { name: 'x', scopes: ['read'] }),
      403,
      'forbidden',
    );
  });

  test('when anonymous calls them, then they answer 401', async () => {
    expectError(
      await s.anon.post('/api/v1/admin/users', { username: 'x', email: 'x@example.test' }),
      401,
      'unauthorized',
    );
  });

  test('when an admin creates a user and a token for it, then both answer 201 and the token works', async () => {
    const a = await s.newUser(undefined, { admin: true });
    const name = uniq('user');
    const u = await a.client.post('/api/v1/admin/users', {
      username: name,
      email: `${name}@example.test`,
      display_name: 'Grace Hopper',
    });
    expect(u.status).toBe(201);
    expect(u.body.data).toEqual({
      id: expect.any(Number),
      username: name,
      email: `${name}@example.test`,
      display_name: 'Grace Hopper',
      is_admin: false,
      avatar_url: '',
      created_at: expect.any(String),
    });
    const t = await a.client.post(`/api/v1/admin/users/${name}/tokens`, { name: 'given', scopes: ['read'] });
    expect(t.status).toBe(201);
    expect(t.body.data).toMatchObject({ name: 'given', scopes: ['read'], token: expect.any(String) });
    const me = await s.anon.as(t.body.data.token).get('/api/v1/user');
    expect(me.status).toBe(200);
    expect(me.body.data).toMatchObject({ id: u.body.data.id, username: name, is_admin: false });
  });

  test('when a token is requested for an unknown user, then it answers 404', async () => {
    expectError(
      await s.admin.post('/api/v1/admin/users/nobody-here/tokens', { name: 'x', scopes: ['read'] }),
      404,
      'not_found',
    );
  });

  test('when the username is taken (case-insensitively), then it answers 409', async () => {
    const u = await s.newUser();
    for (const username of [u.username, u.username.toUpperCase()]) {
      const r = await s.admin.post('/api/v1/admin/users', { username, email: 'dup@example.test' });
      expectError(r, 409, 'conflict');
    }
  });

  test('when the user body is invalid, then it answers 400', async () => {
    for (const body of [
      { username: 'a b', email: 'x@example.test' },
      { username: 'ok', email: 'not-an-email' },
      { email: 'x@example.test' },
    ]) {
      expectError(await s.admin.post('/api/v1/admin/users', body), 400, 'validation_failed');
    }
  });

  test('when the server started with TRIAD_ADMIN_TOKEN, then that token is the admin "root"', async () => {
    const r = await s.admin.get('/api/v1/user');
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ username: 'root', is_admin: true });
  });
});

describe('credentials are checked before the body', () => {
  test('when anonymous sends an invalid or missing body to a token route, then it answers 401, not 400', async () => {
    expectError(await s.anon.post('/api/v1/user/tokens', { scopes: ['nope'] }), 401, 'unauthorized');
    expectError(await s.anon.request('POST', '/api/v1/user/tokens'), 401, 'unauthorized');
    expectError(
      await s.anon.request('POST', '/api/v1/orgs', '{"name": ', { 'content-type': 'application/json' }),
      401,
      'unauthorized',
    );
  });

  test('when a non-admin sends an invalid body to an admin route, then it answers 403, not 400', async () => {
    const u = await s.newUser();
    expectError(await u.client.post('/api/v1/admin/users', { username: 'a b' }), 403, 'forbidden');
    expectError(await u.client.post('/api/v1/admin/users/someone/tokens', {}), 403, 'forbidden');
  });

  test('when an admin sends an invalid body, then it answers 400', async () => {
    expectError(await s.admin.post('/api/v1/admin/users', { username: 'a b' }), 400, 'validation_failed');
  });
});

describe('hostile input is a 4xx, never a 500', () => {
  test('when a string in the body contains NUL, then it answers 400 and nothing is written', async () => {
    const u = await s.newUser();
    const r = await u.client.post('/api/v1/user/tokens', { name: 'nul\u0000name', scopes: ['read'] });
    expectError(r, 400, 'validation_failed');
    expect(r.body.error.message).toContain('body.name');
    expect((await u.client.get('/api/v1/user/tokens')).body.data).toHaveLength(1);
    const name = uniq('user');
    const created = await s.admin.post('/api/v1/admin/users', {
      username: name,
      email: `${name}@example.test`,
      display_name: 'a\u0000b',
    });
    expectError(created, 400, 'validation_failed');
    const target = await u.client.post('/api/v1/user/tokens', {
      name: 't',
      scopes: ['read'],
      level: 'org',
      target: '\u0000',
    });
    expectError(target, 400, 'validation_failed');
  });

  test('when a path segment contains NUL, then it answers 404', async () => {
    expectError(
      await s.admin.post('/api/v1/admin/users/x%00y/tokens', { name: 't', scopes: ['read'] }),
      404,
      'not_found',
    );
    expectError(await s.anon.get('/api/v1/repos/some-org/%00'), 404, 'not_found');
  });

  test('when the body is nested very deeply, then it answers 400', async () => {
    const u = await s.newUser();
    const deep = `{"name":"x","scopes":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const r = await u.client.request('POST', '/api/v1/user/tokens', deep, {
      'content-type': 'application/json',
    });
    expectError(r, 400, 'validation_failed');
  });
});

describe('private repository visibility', () => {
  let owner: TestUser;
  let member: TestUser;
  let org: string;
  let priv: string;
  beforeAll(async () => {
    ({ owner, member, org } = await newTeam(s));
    priv = await createRepo(owner.client, org, { isPrivate: true });
  });

  test('when anonymous reads a private repository, then it answers 404 (not 403)', async () => {
    expectError(await s.anon.get(`/api/v1/repos/${org}/${priv}`), 404, 'not_found');
  });

  test('when an outsider reads a private repository, then it answers 404 like an unknown one', async () => {
    const outsider = await s.newUser();
    const hidden = await outsider.client.get(`/api/v1/repos/${org}/${priv}`);
    const missing = await outsider.client.get(`/api/v1/repos/${org}/does-not-exist`);
    expectError(hidden, 404, 'not_found');
    expect(hidden.body).toEqual(missing.body);
  });

  test('when a member reads a private repository, then it answers 200', async () => {
    const r = await member.client.get(`/api/v1/repos/${org}/${priv}`);
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ name: priv, org, is_private: true });
  });
});

describe('tokens cannot mint more than they hold', () => {
  test('when a narrow token creates a token with a scope it lacks, then 403; within its scopes, 201', async () => {
    const u = await s.newUser();
    const narrow = await tokenOf(u, { scopes: ['issues:read'] });
    expectError(await narrow.post('/api/v1/user/tokens', { name: 'x', scopes: ['admin'] }), 403, 'forbidden');
    expectError(
      await narrow.post('/api/v1/user/tokens', { name: 'x', scopes: ['issues:write'] }),
      403,
      'forbidden',
    );
    expect((await narrow.post('/api/v1/user/tokens', { name: 'x', scopes: ['issues:read'] })).status).toBe(
      201,
    );
    const writer = await tokenOf(u, { scopes: ['repo:write'] });
    expect((await writer.post('/api/v1/user/tokens', { name: 'x', scopes: ['repo:read'] })).status).toBe(201);
    const coarse = await tokenOf(u, { scopes: ['write'] });
    expect(
      (await coarse.post('/api/v1/user/tokens', { name: 'x', scopes: ['read', 'ci:write'] })).status,
    ).toBe(201);
    expectError(await coarse.post('/api/v1/user/tokens', { name: 'x', scopes: ['admin'] }), 403, 'forbidden');
  });

  test('when an org or repo token creates a token reaching further, then 403', async () => {
    const u = await s.newUser();
    const org = await s.newOrg(u);
    const other = await s.newOrg(u);
    const repo = await createRepo(u.client, org);
    const orgTok = await tokenOf(u, { scopes: ['repo:read'], level: 'org', target: org });
    expectError(
      await orgTok.post('/api/v1/user/tokens', { name: 'x', scopes: ['repo:read'] }),
      403,
      'forbidden',
    );
    expectError(
      await orgTok.post('/api/v1/user/tokens', {
        name: 'x',
        scopes: ['repo:read'],
        level: 'org',
        target: other,
      }),
      403,
      'forbidden',
    );
    const sub = { name: 'x', scopes: ['repo:read'], level: 'repo', target: `${org}/${repo}` };
    expect((await orgTok.post('/api/v1/user/tokens', sub)).status).toBe(201);
    const repoTok = await tokenOf(u, { scopes: ['repo:read'], level: 'repo', target: `${org}/${repo}` });
    expect((await repoTok.post('/api/v1/user/tokens', sub)).status).toBe(201);
    const org2 = { name: 'x', scopes: ['repo:read'], level: 'org', target: org };
    expectError(await repoTok.post('/api/v1/user/tokens', org2), 403, 'forbidden');
  });

  test('when an owner manages members with a token lacking the admin scope, then 403', async () => {
    const u = await s.newUser();
    const org = await s.newOrg(u);
    const m = await s.newUser();
    const noAdmin = await tokenOf(u, { scopes: ['repo:write', 'issues:write'] });
    expectError(
      await noAdmin.put(`/api/v1/orgs/${org}/members/${m.username}`, { role: 'member' }),
      403,
      'forbidden',
    );
    expect((await u.client.put(`/api/v1/orgs/${org}/members/${m.username}`, { role: 'member' })).status).toBe(
      200,
    );
    expectError(await noAdmin.delete(`/api/v1/orgs/${org}/members/${m.username}`), 403, 'forbidden');
  });
});
