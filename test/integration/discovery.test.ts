import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type Res, type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, mintedClient } from '../helpers/factories.ts';

/**
 * The lists of organizations, of the caller's organizations and repositories, and public
 * profiles: `GET /api/v1/orgs`, `/user/orgs`, `/user/repos`, `/users/:username`.
 */

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let stranger: TestUser;
/** `owner` owns both; `member` is a member of `alpha` only. */
let alpha: string;
let beta: string;

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

async function createRepo(org: string, name: string, isPrivate: boolean): Promise<void> {
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, is_private: isPrivate, vcs: 'git' });
  expect(r.status).toBe(201);
}

const mint = (user: TestUser, body: Record<string, unknown>) => mintedClient(s, user, body);

const fullNames = (r: Res) => r.body.data.map((x: { org: string; name: string }) => `${x.org}/${x.name}`);

beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  member = await s.newUser();
  stranger = await s.newUser();
  // names chosen so that the case-insensitive order is alpha before beta
  alpha = `A${uniq('alpha')}`;
  beta = uniq('beta');
  await s.newOrg(owner, alpha);
  await s.newOrg(owner, beta);
  await s.addMember(alpha, member);
  await createRepo(alpha, 'pub', false);
  await createRepo(alpha, 'Priv', true);
  await createRepo(beta, 'b-pub', false);
  await createRepo(beta, 'b-priv', true);
});
afterAll(async () => {
  await s.close();
});

describe('GET /api/v1/orgs', () => {
  test('when anyone lists organizations, then every one is shown with its public fields, by name', async () => {
    const r = await s.anon.get('/api/v1/orgs?per_page=100');
    expect(r.status).toBe(200);
    const names: string[] = r.body.data.map((o: { name: string }) => o.name);
    expect(names).toEqual(expect.arrayContaining([alpha, beta]));
    expect(names).toEqual([...names].sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())));
    expect(r.body.data.find((o: { name: string }) => o.name === alpha)).toEqual({
      id: expect.any(Number),
      name: alpha,
      description: `${alpha} description`,
      created_at: expect.stringMatching(TIMESTAMP),
    });
    expect(r.body.pagination).toEqual({ page: 1, per_page: 100, total: names.length });
    expect(r.headers.get('x-total-count')).toBe(String(names.length));
  });

  test('when the list is paged, then the pages follow each other and Link names them', async () => {
    const all = (await s.anon.get('/api/v1/orgs?per_page=100')).body.data as { name: string }[];
    const first = await s.anon.get('/api/v1/orgs?per_page=1');
    const second = await s.anon.get('/api/v1/orgs?per_page=1&page=2');
    expect(first.body.data).toEqual([all[0]]);
    expect(second.body.data).toEqual([all[1]]);
    expect(first.headers.get('link')).toContain('rel="next"');
    expect(first.headers.get('link')).toContain('page=2');
  });

  test('when the page is not a number, then it answers 400', async () => {
    expectError(await s.anon.get('/api/v1/orgs?page=x'), 400, 'validation_failed');
  });
});

describe('GET /api/v1/user/orgs', () => {
  test("when a member lists their organizations, then only theirs are shown with the caller's role", async () => {
    const r = await member.client.get('/api/v1/user/orgs');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      data: [
        {
          id: expect.any(Number),
          name: alpha,
          description: `${alpha} description`,
          created_at: expect.stringMatching(TIMESTAMP),
          role: 'member',
        },
      ],
      pagination: { page: 1, per_page: 30, total: 1 },
    });
    const mine = await owner.client.get('/api/v1/user/orgs');
    expect(mine.body.data.map((o: { name: string; role: string }) => [o.name, o.role])).toEqual([
      [alpha, 'owner'],
      [beta, 'owner'],
    ]);
  });

  test('when the caller belongs to no organization, then the list is empty', async () => {
    const r = await stranger.client.get('/api/v1/user/orgs');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
  });

  test('when an organization or repository token lists, then only its organization is shown', async () => {
    const orgToken = await mint(owner, { scopes: ['repo:read'], level: 'org', target: beta });
    const repoToken = await mint(owner, { scopes: ['repo:read'], level: 'repo', target: `${alpha}/pub` });
    expect((await orgToken.get('/api/v1/user/orgs')).body.data.map((o: { name: string }) => o.name)).toEqual([
      beta,
    ]);
    expect((await repoToken.get('/api/v1/user/orgs')).body.data.map((o: { name: string }) => o.name)).toEqual(
      [alpha],
    );
  });

  test('when nobody is authenticated, then it answers 401', async () => {
    expectError(await s.anon.get('/api/v1/user/orgs'), 401, 'unauthorized');
  });
});

describe('GET /api/v1/user/repos', () => {
  test("when a member lists, then the repositories of the caller's organizations are shown, private ones too", async () => {
    const r = await member.client.get('/api/v1/user/repos');
    expect(r.status).toBe(200);
    expect(fullNames(r)).toEqual([`${alpha}/Priv`, `${alpha}/pub`]);
    expect(r.body.data[0]).toEqual({
      id: expect.any(Number),
      name: 'Priv',
      org: alpha,
      description: '',
      is_private: true,
      vcs: 'git',
      default_branch: 'main',
      clone_url: `${s.url}/${alpha}/Priv`,
      created_at: expect.stringMatching(TIMESTAMP),
      updated_at: expect.stringMatching(TIMESTAMP),
    });
    expect(r.headers.get('x-total-count')).toBe('2');
    const all = await owner.client.get('/api/v1/user/repos');
    expect(fullNames(all)).toEqual([`${alpha}/Priv`, `${alpha}/pub`, `${beta}/b-priv`, `${beta}/b-pub`]);
  });

  test('when filtered by organization and visibility, then only those are shown', async () => {
    const r = await owner.client.get(`/api/v1/user/repos?org=${beta.toUpperCase()}&visibility=private`);
    expect(fullNames(r)).toEqual([`${beta}/b-priv`]);
    const pub = await owner.client.get('/api/v1/user/repos?visibility=public');
    expect(fullNames(pub)).toEqual([`${alpha}/pub`, `${beta}/b-pub`]);
  });

  test('when the organization filter names one the caller is not in, then the list is empty', async () => {
    const r = await member.client.get(`/api/v1/user/repos?org=${beta}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
  });

  test('when the token lacks repo:read, then private repositories are left out', async () => {
    const t = await mint(member, { scopes: ['issues:read'] });
    expect(fullNames(await t.get('/api/v1/user/repos'))).toEqual([`${alpha}/pub`]);
  });

  test('when an organization or repository token lists, then only what it reaches is shown', async () => {
    const orgToken = await mint(owner, { scopes: ['repo:read'], level: 'org', target: beta });
    expect(fullNames(await orgToken.get('/api/v1/user/repos'))).toEqual([`${beta}/b-priv`, `${beta}/b-pub`]);
    const repoToken = await mint(owner, { scopes: ['repo:read'], level: 'repo', target: `${alpha}/Priv` });
    expect(fullNames(await repoToken.get('/api/v1/user/repos'))).toEqual([`${alpha}/Priv`]);
  });

  test('when the filters are bad or name nothing, then it answers 400 or 404', async () => {
    expectError(await owner.client.get('/api/v1/user/repos?visibility=secret'), 400, 'validation_failed');
    expectError(await owner.client.get('/api/v1/user/repos?org='), 400, 'validation_failed');
    expectError(await owner.client.get(`/api/v1/user/repos?org=${uniq('none')}`), 404, 'not_found');
  });

  test('when nobody is authenticated, then it answers 401', async () => {
    expectError(await s.anon.get('/api/v1/user/repos'), 401, 'unauthorized');
  });
});

describe('GET /api/v1/users/:username', () => {
  test('when anyone reads a profile, then it shows the public fields and no e-mail address', async () => {
    const r = await s.anon.get(`/api/v1/users/${member.username.toUpperCase()}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      data: {
        id: member.id,
        username: member.username,
        display_name: `${member.username} Display`,
        avatar_url: '',
        created_at: expect.stringMatching(TIMESTAMP),
      },
    });
  });

  test('when the user does not exist, then it answers 404', async () => {
    expectError(await s.anon.get(`/api/v1/users/${uniq('ghost')}`), 404, 'not_found');
  });
});
