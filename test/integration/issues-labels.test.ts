import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, newTeam } from '../helpers/factories.ts';

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let org: string;

const repoOf = async (o = org, by = owner) => (await newRepo(by, o)).api;

beforeAll(async () => {
  // Admin labels are site-wide: a server of its own keeps other files' catalogs untouched.
  s = await startTestServer();
  ({ owner, member, org } = await newTeam(s));
});
afterAll(async () => {
  await s.close();
});

describe('label catalog', () => {
  test('create at each scope answers 201 data: label with scope and description', async () => {
    const repo = await repoOf();
    const admin = await s.admin.post('/api/v1/admin/labels', { name: 'security', color: '#FF0000' });
    expect(admin.status).toBe(201);
    expect(admin.body.data).toEqual({
      id: expect.any(Number),
      name: 'security',
      color: '#ff0000',
      scope: 'admin',
      description: '',
    });
    const o = await owner.client.post(`/api/v1/orgs/${org}/labels`, {
      name: 'team-a',
      color: '#00ff00',
      description: 'Team A',
    });
    expect(o.status).toBe(201);
    expect(o.body.data).toMatchObject({ scope: 'org', name: 'team-a', description: 'Team A' });
    const r = await owner.client.post(`${repo}/labels`, { name: 'local', color: '#0000ff' });
    expect(r.status).toBe(201);
    expect(r.body.data.scope).toBe('repo');

    const catalog = await s.anon.get(`${repo}/issues/labels`);
    expect(catalog.status).toBe(200);
    const mine = catalog.body.data.filter((l: any) => ['security', 'team-a', 'local'].includes(l.name));
    expect(mine).toEqual([
      { id: r.body.data.id, name: 'local', color: '#0000ff', scope: 'repo', description: '' },
      admin.body.data,
      o.body.data,
    ]);
  });

  test('the same name at several scopes: repo over org over admin, in the catalog and on issues', async () => {
    const name = uniq('dup');
    const repoA = await repoOf();
    const repoB = await repoOf();
    const otherOwner = await s.newUser();
    const otherOrg = await s.newOrg(otherOwner);
    const repoC = await repoOf(otherOrg, otherOwner);
    await s.admin.post('/api/v1/admin/labels', { name, color: '#000001', description: 'admin' });
    await owner.client.post(`/api/v1/orgs/${org}/labels`, { name, color: '#000002', description: 'org' });
    await owner.client.post(`${repoA}/labels`, { name: name.toUpperCase(), color: '#000003' });
    const pick = async (repo: string) =>
      (await s.anon.get(`${repo}/issues/labels`)).body.data.filter(
        (l: any) => l.name.toLowerCase() === name.toLowerCase(),
      );
    expect((await pick(repoA)).map((l: any) => l.scope)).toEqual(['repo']);
    expect((await pick(repoB)).map((l: any) => [l.scope, l.description])).toEqual([['org', 'org']]);
    expect((await pick(repoC)).map((l: any) => l.scope)).toEqual(['admin']);

    const onA = await member.client.post(`${repoA}/issues`, { title: 'x', labels: [name] });
    expect(onA.body.data.labels).toEqual([
      { id: expect.any(Number), name: name.toUpperCase(), color: '#000003', scope: 'repo' },
    ]);
    const onB = await member.client.post(`${repoB}/issues`, { title: 'x', labels: [name] });
    expect(onB.body.data.labels[0].scope).toBe('org');
    const onC = await otherOwner.client.post(`${repoC}/issues`, { title: 'x', labels: [name] });
    expect(onC.body.data.labels[0].scope).toBe('admin');
    // A repository never sees another org's or repository's labels.
    const foreign = await otherOwner.client.post(`${repoC}/issues`, { title: 'x', labels: ['team-a'] });
    expect(foreign.status).toBe(404);
    // Filtering by the name uses the same resolution.
    const listed = await s.anon.get(`${repoA}/issues?state=all&label=${name}`);
    expect(listed.body.data.map((i: any) => i.number)).toEqual([1]);
  });

  test('color must be # and 6 hex digits; name required -> 400', async () => {
    const repo = await repoOf();
    for (const body of [
      { name: 'x', color: 'ff0000' },
      { name: 'x', color: '#ff00' },
      { name: 'x', color: '#gg0000' },
      { name: 'x', color: '#ff00000' },
      { name: 'x' },
      { name: '', color: '#ff0000' },
      { color: '#ff0000' },
    ]) {
      const r = await owner.client.post(`${repo}/labels`, body);
      expect([JSON.stringify(body), r.status]).toEqual([JSON.stringify(body), 400]);
      expect(r.body.error.code).toBe('validation_failed');
    }
  });

  test('a duplicate name at the same scope (case-insensitive) -> 409; at another scope or repo it is fine', async () => {
    const repo = await repoOf();
    const other = await repoOf();
    const name = uniq('same');
    expect((await owner.client.post(`${repo}/labels`, { name, color: '#111111' })).status).toBe(201);
    const dup = await owner.client.post(`${repo}/labels`, { name: name.toUpperCase(), color: '#222222' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('conflict');
    expect((await owner.client.post(`${other}/labels`, { name, color: '#111111' })).status).toBe(201);
    expect((await owner.client.post(`/api/v1/orgs/${org}/labels`, { name, color: '#111111' })).status).toBe(
      201,
    );
    expect((await owner.client.post(`/api/v1/orgs/${org}/labels`, { name, color: '#111111' })).status).toBe(
      409,
    );
    expect((await s.admin.post('/api/v1/admin/labels', { name, color: '#111111' })).status).toBe(201);
    expect((await s.admin.post('/api/v1/admin/labels', { name, color: '#111111' })).status).toBe(409);
  });

  test('who may create labels: admin labels need a site admin; org and repo labels an org owner', async () => {
    const repo = await repoOf();
    const outsider = await s.newUser();
    const body = { name: uniq('perm'), color: '#abcdef' };
    expect((await s.anon.post('/api/v1/admin/labels', body)).status).toBe(401);
    expect((await owner.client.post('/api/v1/admin/labels', body)).status).toBe(403);
    expect((await s.anon.post(`/api/v1/orgs/${org}/labels`, body)).status).toBe(401);
    expect((await member.client.post(`/api/v1/orgs/${org}/labels`, body)).status).toBe(403);
    expect((await outsider.client.post(`/api/v1/orgs/${org}/labels`, body)).status).toBe(403);
    expect((await member.client.post(`${repo}/labels`, body)).status).toBe(403);
    expect((await outsider.client.post(`${repo}/labels`, body)).status).toBe(403);
    expect((await s.anon.post(`${repo}/labels`, body)).status).toBe(401);
    expect((await owner.client.post('/api/v1/orgs/no-such-org/labels', body)).status).toBe(404);
    const privateName = uniq('priv');
    await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: privateName, is_private: true });
    expect((await outsider.client.post(`/api/v1/repos/${org}/${privateName}/labels`, body)).status).toBe(404);
  });
});
