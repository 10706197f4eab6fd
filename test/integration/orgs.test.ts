import fs from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type Res, type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, newTeam } from '../helpers/factories.ts';

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => {
  await s.close();
});

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

async function roleOf(org: string, username: string): Promise<string | undefined> {
  const r = await s.admin.get(`/api/v1/orgs/${org}/members?per_page=100`);
  expect(r.status).toBe(200);
  return r.body.data.find((m: { user: { username: string } }) => m.user.username === username)?.role;
}

describe('POST /api/v1/orgs', () => {
  test('when a user creates an organization, then it answers 201 and the creator is its owner', async () => {
    const u = await s.newUser();
    const name = uniq('org');
    const r = await u.client.post('/api/v1/orgs', { name, description: 'Analytical engines' });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      data: {
        id: expect.any(Number),
        name,
        description: 'Analytical engines',
        created_at: expect.stringMatching(TIMESTAMP),
      },
    });
    const members = await u.client.get(`/api/v1/orgs/${name}/members`);
    expect(members.status).toBe(200);
    expect(members.body.data).toEqual([
      { user: expect.objectContaining({ id: u.id, username: u.username }), role: 'owner' },
    ]);
  });

  test('when the description is omitted, then it is an empty string', async () => {
    const u = await s.newUser();
    const name = uniq('org');
    const r = await u.client.post('/api/v1/orgs', { name });
    expect(r.status).toBe(201);
    expect(r.body.data.description).toBe('');
  });

  test('when the name is taken, even in another case, then it answers 409 and nothing changes', async () => {
    const u = await s.newUser();
    const other = await s.newUser();
    const name = await s.newOrg(u);
    for (const taken of [name, name.toUpperCase()]) {
      expectError(await other.client.post('/api/v1/orgs', { name: taken }), 409, 'conflict');
    }
    expect(await roleOf(name, other.username)).toBeUndefined();
  });

  test('when many creates of one name race, then exactly one answers 201 and the rest 409', async () => {
    const u = await s.newUser();
    const name = uniq('race');
    const results = await Promise.all(
      Array.from({ length: 20 }, () => u.client.post('/api/v1/orgs', { name })),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'conflict');
  });

  test('when the name is reserved (any case), then it answers 400', async () => {
    const u = await s.newUser();
    for (const name of ['api', 'healthz', 'readyz', 'metrics', 'API', 'Metrics']) {
      expectError(await u.client.post('/api/v1/orgs', { name }), 400, 'validation_failed');
    }
  });

  test('when the name is malformed, then it answers 400', async () => {
    const u = await s.newUser();
    for (const name of ['', 'a b', '-lead', 'trail-', '../x', 'x/y', 'ø', 'a'.repeat(65)]) {
      expectError(await u.client.post('/api/v1/orgs', { name }), 400, 'validation_failed');
    }
  });

  test('when a string contains a NUL character, then it answers 400 instead of failing the write', async () => {
    const u = await s.newUser();
    const name = uniq('org');
    const r = await u.client.post('/api/v1/orgs', { name, description: 'a\u0000b' });
    expectError(r, 400, 'validation_failed');
    expectError(await s.anon.get(`/api/v1/orgs/${name}`), 404, 'not_found');
  });

  test('when anonymous creates an organization, then it answers 401 (even with a bad body)', async () => {
    expectError(await s.anon.post('/api/v1/orgs', { name: uniq('org') }), 401, 'unauthorized');
    expectError(await s.anon.post('/api/v1/orgs', { name: 'bad name!' }), 401, 'unauthorized');
  });
});

describe('GET /api/v1/orgs/:org', () => {
  test('when the organization exists, then anyone can read it (also by another case)', async () => {
    const u = await s.newUser();
    const name = await s.newOrg(u);
    for (const path of [name, name.toUpperCase()]) {
      const r = await s.anon.get(`/api/v1/orgs/${path}`);
      expect(r.status).toBe(200);
      expect(r.body.data).toEqual({
        id: expect.any(Number),
        name,
        description: `${name} description`,
        created_at: expect.stringMatching(TIMESTAMP),
      });
    }
  });

  test('when the organization is unknown, then it answers 404 not_found', async () => {
    expectError(await s.anon.get('/api/v1/orgs/no-such-org'), 404, 'not_found');
    expectError(await s.anon.get('/api/v1/orgs/nul%00byte'), 404, 'not_found');
  });
});

describe('organization members', () => {
  let owner: TestUser;
  let member: TestUser;
  let org: string;
  beforeAll(async () => {
    ({ owner, member, org } = await newTeam(s));
  });

  test('when anonymous lists members, then it answers 401', async () => {
    expectError(await s.anon.get(`/api/v1/orgs/${org}/members`), 401, 'unauthorized');
  });

  test('when a non-member lists members, then it answers 403', async () => {
    const outsider = await s.newUser();
    expectError(await outsider.client.get(`/api/v1/orgs/${org}/members`), 403, 'forbidden');
  });

  test('when a member lists members, then it answers the list envelope of {user, role}', async () => {
    const r = await member.client.get(`/api/v1/orgs/${org}/members`);
    expect(r.status).toBe(200);
    expect(r.body.pagination).toEqual({ page: 1, per_page: 30, total: 2 });
    expect(r.body.data).toHaveLength(2);
    const byName = new Map(r.body.data.map((m: { user: { username: string } }) => [m.user.username, m]));
    expect(byName.get(owner.username)).toEqual({
      user: expect.objectContaining({ id: owner.id, username: owner.username }),
      role: 'owner',
    });
    expect(byName.get(member.username)).toEqual({
      user: expect.objectContaining({ id: member.id, username: member.username }),
      role: 'member',
    });
  });

  test('when the owner adds a user, then PUT answers 200 with {user, role} and the list shows it', async () => {
    const newcomer = await s.newUser();
    const r = await owner.client.put(`/api/v1/orgs/${org}/members/${newcomer.username}`, { role: 'member' });
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      user: expect.objectContaining({ id: newcomer.id, username: newcomer.username }),
      role: 'member',
    });
    expect(await roleOf(org, newcomer.username)).toBe('member');
    const listed = await owner.client.get(`/api/v1/orgs/${org}/members?per_page=100`);
    expect(listed.body.data).toContainEqual(r.body.data);
    const promoted = await owner.client.put(`/api/v1/orgs/${org}/members/${newcomer.username}`, {
      role: 'owner',
    });
    expect(promoted.status).toBe(200);
    expect(promoted.body.data.role).toBe('owner');
    expect(await roleOf(org, newcomer.username)).toBe('owner');
  });

  test('when a plain member sets a role, then it answers 403 and nothing changes', async () => {
    const target = await s.newUser();
    const r = await member.client.put(`/api/v1/orgs/${org}/members/${target.username}`, { role: 'owner' });
    expectError(r, 403, 'forbidden');
    expect(await roleOf(org, target.username)).toBeUndefined();
    const self = await member.client.put(`/api/v1/orgs/${org}/members/${member.username}`, { role: 'owner' });
    expectError(self, 403, 'forbidden');
    expect(await roleOf(org, member.username)).toBe('member');
  });

  test('when the user is unknown, then PUT answers 404', async () => {
    const r = await owner.client.put(`/api/v1/orgs/${org}/members/nobody-at-all`, { role: 'member' });
    expectError(r, 404, 'not_found');
  });

  test('when the role is not owner or member, then PUT answers 400', async () => {
    const target = await s.newUser();
    for (const body of [{ role: 'admin' }, { role: '' }, {}, { role: 'OWNER' }]) {
      const r = await owner.client.put(`/api/v1/orgs/${org}/members/${target.username}`, body);
      expectError(r, 400, 'validation_failed');
    }
    expect(await roleOf(org, target.username)).toBeUndefined();
  });

  test('when the organization is unknown, then PUT answers 404', async () => {
    const target = await s.newUser();
    const r = await owner.client.put(`/api/v1/orgs/no-such-org/members/${target.username}`, {
      role: 'member',
    });
    expectError(r, 404, 'not_found');
  });
});

describe('removing members', () => {
  test('when the owner removes a member, then DELETE answers 204 and the member loses access', async () => {
    const { owner, member, org } = await newTeam(s);
    expect((await member.client.get(`/api/v1/orgs/${org}/members`)).status).toBe(200);
    const r = await owner.client.delete(`/api/v1/orgs/${org}/members/${member.username}`);
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(await roleOf(org, member.username)).toBeUndefined();
    expectError(await member.client.get(`/api/v1/orgs/${org}/members`), 403, 'forbidden');
    expectError(
      await owner.client.delete(`/api/v1/orgs/${org}/members/${member.username}`),
      404,
      'not_found',
    );
  });

  test('when the last owner is removed or demoted, then it answers 409 and stays owner', async () => {
    const owner = await s.newUser();
    const org = await s.newOrg(owner);
    expectError(await owner.client.delete(`/api/v1/orgs/${org}/members/${owner.username}`), 409, 'conflict');
    expectError(
      await owner.client.put(`/api/v1/orgs/${org}/members/${owner.username}`, { role: 'member' }),
      409,
      'conflict',
    );
    expect(await roleOf(org, owner.username)).toBe('owner');
  });

  test('when another owner exists, then an owner can leave (204)', async () => {
    const owner = await s.newUser();
    const second = await s.newUser();
    const org = await s.newOrg(owner);
    await s.addMember(org, second, 'owner');
    const r = await owner.client.delete(`/api/v1/orgs/${org}/members/${owner.username}`);
    expect(r.status).toBe(204);
    expect(await roleOf(org, owner.username)).toBeUndefined();
    expect(await roleOf(org, second.username)).toBe('owner');
  });

  test('when a non-owner removes a member, then it answers 403 and nothing changes', async () => {
    const owner = await s.newUser();
    const a = await s.newUser();
    const b = await s.newUser();
    const org = await s.newOrg(owner);
    await s.addMember(org, a);
    await s.addMember(org, b);
    expectError(await a.client.delete(`/api/v1/orgs/${org}/members/${b.username}`), 403, 'forbidden');
    expectError(await a.client.delete(`/api/v1/orgs/${org}/members/${owner.username}`), 403, 'forbidden');
    expect(await roleOf(org, b.username)).toBe('member');
    expectError(await s.anon.delete(`/api/v1/orgs/${org}/members/${b.username}`), 401, 'unauthorized');
  });
});

describe('GET /api/v1/orgs/:org/repos visibility', () => {
  let owner: TestUser;
  let member: TestUser;
  let org: string;
  let pub: string;
  let priv: string;
  beforeAll(async () => {
    ({ owner, member, org } = await newTeam(s));
    pub = `a-${uniq('pub')}`;
    priv = `b-${uniq('priv')}`;
    expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: pub })).status).toBe(201);
    expect(
      (await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: priv, is_private: true })).status,
    ).toBe(201);
  });

  const names = (r: Res) => r.body.data.map((x: { name: string }) => x.name);

  test('when anonymous lists, then only public repositories are shown', async () => {
    const r = await s.anon.get(`/api/v1/orgs/${org}/repos`);
    expect(r.status).toBe(200);
    expect(names(r)).toEqual([pub]);
    expect(r.body.pagination).toEqual({ page: 1, per_page: 30, total: 1 });
  });

  test('when an outsider lists, then only public repositories are shown', async () => {
    const outsider = await s.newUser();
    const r = await outsider.client.get(`/api/v1/orgs/${org}/repos`);
    expect(r.status).toBe(200);
    expect(names(r)).toEqual([pub]);
    expect(r.body.pagination.total).toBe(1);
  });

  test('when a member lists, then private repositories are shown too', async () => {
    const r = await member.client.get(`/api/v1/orgs/${org}/repos`);
    expect(r.status).toBe(200);
    expect(names(r)).toEqual([pub, priv]);
    expect(r.body.pagination).toEqual({ page: 1, per_page: 30, total: 2 });
  });

  test('when paginated, then the envelope carries page, per_page and total', async () => {
    const r = await member.client.get(`/api/v1/orgs/${org}/repos?per_page=1&page=2`);
    expect(r.status).toBe(200);
    expect(names(r)).toEqual([priv]);
    expect(r.body.pagination).toEqual({ page: 2, per_page: 1, total: 2 });
    expect(r.headers.get('x-total-count')).toBe('2');
  });

  test('when the organization is unknown, then it answers 404', async () => {
    expectError(await s.anon.get('/api/v1/orgs/no-such-org/repos'), 404, 'not_found');
  });
});

describe('repository create, update and delete', () => {
  let owner: TestUser;
  let member: TestUser;
  let org: string;
  beforeAll(async () => {
    ({ owner, member, org } = await newTeam(s));
  });

  test('when a repository is created, then it answers 201 with the documented fields and hg by default', async () => {
    const name = uniq('repo');
    const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, description: 'Notes' });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      name,
      org,
      description: 'Notes',
      is_private: false,
      vcs: 'hg',
      clone_url: `${s.url}/${org}/${name}`,
      default_branch: expect.any(String),
      created_at: expect.stringMatching(TIMESTAMP),
      updated_at: expect.stringMatching(TIMESTAMP),
    });
    const got = await s.anon.get(`/api/v1/repos/${org}/${name}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual(r.body.data);
    await expect(
      fs.stat(s.running.services.repos.path({ id: r.body.data.id, vcs: 'hg' })),
    ).resolves.toBeDefined();
  });

  test('when the name is taken (any case), then it answers 409', async () => {
    const name = uniq('repo');
    expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name })).status).toBe(201);
    for (const taken of [name, name.toUpperCase()]) {
      expectError(await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: taken }), 409, 'conflict');
    }
  });

  test('when the name is malformed, then it answers 400', async () => {
    for (const name of ['../x', 'a b', 'x.git', 'X.GIT', '.', '..', '.hidden', '', 'a/b', 'a'.repeat(101)]) {
      expectError(await owner.client.post(`/api/v1/orgs/${org}/repos`, { name }), 400, 'validation_failed');
    }
    expectError(
      await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: uniq('repo'), vcs: 'svn' }),
      400,
      'validation_failed',
    );
  });

  test('when the owner patches a repository, then it answers 200 with the change applied', async () => {
    const name = uniq('repo');
    const created = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name });
    expect(created.status).toBe(201);
    const r = await owner.client.patch(`/api/v1/repos/${org}/${name}`, {
      description: 'new',
      is_private: true,
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toMatchObject({ name, description: 'new', is_private: true });
    expect(Date.parse(r.body.data.updated_at)).toBeGreaterThanOrEqual(
      Date.parse(created.body.data.updated_at),
    );
    expectError(await s.anon.get(`/api/v1/repos/${org}/${name}`), 404, 'not_found');
    expect((await member.client.get(`/api/v1/repos/${org}/${name}`)).body.data.description).toBe('new');
  });

  test('when a plain member patches a repository, then it answers 403 and nothing changes', async () => {
    const name = uniq('repo');
    expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name })).status).toBe(201);
    expectError(
      await member.client.patch(`/api/v1/repos/${org}/${name}`, { description: 'x' }),
      403,
      'forbidden',
    );
    expect((await s.anon.get(`/api/v1/repos/${org}/${name}`)).body.data.description).toBe('');
  });

  test('when the owner deletes with the admin scope, then it answers 204 and the storage is gone', async () => {
    const name = uniq('repo');
    const created = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name });
    expect(created.status).toBe(201);
    const dir = s.running.services.repos.path({ id: created.body.data.id, vcs: created.body.data.vcs });
    await expect(fs.stat(dir)).resolves.toBeDefined();
    const r = await owner.client.delete(`/api/v1/repos/${org}/${name}`);
    expect(r.status).toBe(204);
    expectError(await owner.client.get(`/api/v1/repos/${org}/${name}`), 404, 'not_found');
    await expect(fs.stat(dir)).rejects.toThrow();
    expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name })).status).toBe(201);
  });

  test('when the deleter lacks the admin scope or is not an owner, then it answers 403 and the repo stays', async () => {
    const name = uniq('repo');
    expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name })).status).toBe(201);
    const noAdmin = await owner.client.post('/api/v1/user/tokens', { name: 'w', scopes: ['repo:write'] });
    expect(noAdmin.status).toBe(201);
    expectError(
      await s.anon.as(noAdmin.body.data.token).delete(`/api/v1/repos/${org}/${name}`),
      403,
      'forbidden',
    );
    expectError(await member.client.delete(`/api/v1/repos/${org}/${name}`), 403, 'forbidden');
    expect((await s.anon.get(`/api/v1/repos/${org}/${name}`)).status).toBe(200);
  });
});
