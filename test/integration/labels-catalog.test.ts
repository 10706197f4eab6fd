/**
 * The label catalog's management (the web's label pages, over HTTP as a browser sends them) where
 * the browser test does not go: a rename onto a name of the same scope (409) or of another scope
 * (allowed: it shadows), a label addressed through a page of another scope (404), the issues'
 * labels through the API after a rename and after a deletion, a deletion racing issues that take
 * the label, the form's validation, and who may reach which page.
 */
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import pg from 'pg';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, newTeam } from '../helpers/factories.ts';

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let org: string;
let repo: { name: string; api: string };
let other: { owner: TestUser; org: string; repo: { name: string; api: string } };
let db: pg.Client;

/** A signed-in browser, spoken to over HTTP: pages by GET, forms by POST with the form token. */
type Web = {
  get: (path: string) => Promise<{ status: number; text: string }>;
  post: (
    path: string,
    fields: Record<string, string>,
  ) => Promise<{ status: number; location: string | null; text: string }>;
};

async function web(user: TestUser): Promise<Web> {
  const password = `pw-${uniq('p')}`;
  expect((await s.admin.patch(`/api/v1/admin/users/${user.username}`, { password })).status).toBe(200);
  const headers = { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' };
  const login = await fetch(`${s.url}/-/login`, {
    method: 'POST',
    redirect: 'manual',
    headers,
    body: new URLSearchParams({ login: user.username, password }).toString(),
  });
  const cookie = /^(triad_session=[\w-]+);/.exec(login.headers.get('set-cookie') ?? '')![1]!;
  const get = async (path: string) => {
    const r = await fetch(`${s.url}${path}`, { headers: { cookie }, redirect: 'manual' });
    return { status: r.status, text: await r.text() };
  };
  const token = /name="_csrf" value="([^"]+)"/.exec((await get('/')).text)![1]!;
  return {
    get,
    post: async (path, fields) => {
      const r = await fetch(`${s.url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { ...headers, cookie },
        body: new URLSearchParams({ _csrf: token, ...fields }).toString(),
      });
      return { status: r.status, location: r.headers.get('location'), text: await r.text() };
    },
  };
}

let ownerWeb: Web;
let otherWeb: Web;
let adminWeb: Web;

/** Creates a label through a page's form; answers its id (from the catalog API of `inRepo`). */
async function create(
  w: Web,
  base: string,
  name: string,
  color = '#123456',
  description = '',
): Promise<void> {
  const r = await w.post(base, { name, color, description });
  expect({ name, status: r.status, location: r.location }).toEqual({
    name,
    status: 303,
    location: `${base}?created=1`,
  });
}

async function catalog(api: string): Promise<any[]> {
  return (await s.anon.get(`${api}/issues/labels`)).body.data;
}

async function labelId(api: string, name: string): Promise<number> {
  const found = (await catalog(api)).find((l) => l.name === name);
  expect(found).toBeDefined();
  return found.id;
}

beforeAll(async () => {
  s = await startTestServer();
  ({ owner, member, org } = await newTeam(s));
  repo = await newRepo(owner, org);
  const o2 = await s.newUser();
  const org2 = await s.newOrg(o2);
  other = { owner: o2, org: org2, repo: await newRepo(o2, org2) };
  const admin = await s.newUser(uniq('root'), { admin: true });
  [ownerWeb, otherWeb, adminWeb] = await Promise.all([web(owner), web(o2), web(admin)]);
  db = new pg.Client({ connectionString: s.dbUrl });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await s?.close();
});

describe('renames', () => {
  test("when a label is renamed onto another of its scope (case-insensitively), then 409 and the form again; onto a broader scope's name, it shadows it", async () => {
    const base = `/${org}/${repo.name}/-/labels`;
    const [a, b] = [uniq('alpha'), uniq('beta')];
    await create(ownerWeb, base, a);
    await create(ownerWeb, base, b);
    const id = await labelId(repo.api, a);
    const clash = await ownerWeb.post(`${base}/${id}`, {
      name: b.toUpperCase(),
      color: '#abcdef',
      description: 'kept',
    });
    expect(clash.status).toBe(409);
    expect(clash.text).toContain(`a repository label named &quot;${b.toUpperCase()}&quot; already exists`);
    expect(clash.text).toContain('value="kept"');
    expect((await catalog(repo.api)).find((l) => l.id === id)).toMatchObject({ name: a, color: '#123456' });

    // the same name in the organization: the repository's label shadows it
    const shared = uniq('shared');
    await create(ownerWeb, `/${org}/-/labels`, shared, '#000000', 'of the org');
    const renamed = await ownerWeb.post(`${base}/${id}`, { name: shared, color: '#ABCDEF', description: '' });
    expect(renamed.status).toBe(303);
    const mine = (await catalog(repo.api)).filter((l) => l.name === shared);
    expect(mine).toEqual([{ id, name: shared, color: '#abcdef', scope: 'repo', description: '' }]);
    expect(await ownerWeb.get(base)).toMatchObject({
      text: expect.stringContaining('shadows the organization label of this name'),
    });
    expect((await s.admin.post('/api/v1/admin/labels', { name: shared, color: '#ffffff' })).status).toBe(201);
    expect(await ownerWeb.get(base)).toMatchObject({
      text: expect.stringContaining('shadows the organization and site labels of this name'),
    });
    // only the case changes: no clash with itself
    expect(
      (await ownerWeb.post(`${base}/${id}`, { name: shared.toUpperCase(), color: '#abcdef' })).status,
    ).toBe(303);
  });

  test('when a label on issues is renamed and recoloured, then the issues show it at once, under the same id, unchanged otherwise', async () => {
    const base = `/${org}/-/labels`;
    const name = uniq('bug');
    await create(ownerWeb, base, name, '#ff0000');
    const id = await labelId(repo.api, name);
    const issue = (await member.client.post(`${repo.api}/issues`, { title: 'broken', labels: [name] })).body
      .data;
    expect(issue.labels).toEqual([{ id, name, color: '#ff0000', scope: 'org' }]);
    const renamed = uniq('defect');
    expect(
      (await ownerWeb.post(`${base}/${id}`, { name: renamed, color: '#00FF00', description: 'd' })).status,
    ).toBe(303);
    const after = (await s.anon.get(`${repo.api}/issues/${issue.number}`)).body.data;
    expect(after.labels).toEqual([{ id, name: renamed, color: '#00ff00', scope: 'org' }]);
    expect(after.updated_at).toBe(issue.updated_at);
    const listed = async (label: string) =>
      (await s.anon.get(`${repo.api}/issues?state=all&label=${label}`)).body.data.map((i: any) => i.number);
    expect(await listed(renamed)).toEqual([issue.number]);
    expect(await listed(name)).toEqual([]);
  });
});

describe('deletions', () => {
  test('when a label in use is deleted, then the confirmation counts its issues, and they lose it and keep the rest', async () => {
    const base = `/${org}/${repo.name}/-/labels`;
    const [gone, kept] = [uniq('gone'), uniq('kept')];
    await create(ownerWeb, base, gone);
    await create(ownerWeb, base, kept);
    const id = await labelId(repo.api, gone);
    const keptId = await labelId(repo.api, kept);
    const issues = [];
    for (const labels of [[gone, kept], [gone], [kept]])
      issues.push((await member.client.post(`${repo.api}/issues`, { title: 't', labels })).body.data);
    const confirm = await ownerWeb.get(`${base}/${id}/delete`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('<strong>2 issues</strong> carry it and will lose it');

    const r = await ownerWeb.post(`${base}/${id}/delete`, {});
    expect({ status: r.status, location: r.location }).toEqual({
      status: 303,
      location: `${base}?deleted=2`,
    });
    expect((await ownerWeb.get(r.location!)).text).toContain('The label was deleted and taken off 2 issues.');
    const read = async (n: number) => (await s.anon.get(`${repo.api}/issues/${n}`)).body.data;
    expect((await read(issues[0].number)).labels.map((l: any) => l.id)).toEqual([keptId]);
    expect((await read(issues[1].number)).labels).toEqual([]);
    expect((await read(issues[1].number)).updated_at).toBe(issues[1].updated_at);
    expect((await read(issues[2].number)).labels.map((l: any) => l.id)).toEqual([keptId]);
    expect((await catalog(repo.api)).some((l) => l.id === id)).toBe(false);
    // the label is gone from the rows too, not only from the answers
    expect(
      (await db.query('select count(*)::int as n from issues where $1 = any(label_ids)', [id])).rows[0].n,
    ).toBe(0);
    // once gone, its pages are not found
    expect((await ownerWeb.get(`${base}/${id}`)).status).toBe(404);
    expect((await ownerWeb.post(`${base}/${id}/delete`, {})).status).toBe(404);
  });

  test('when issues take a label while it is deleted, then none keeps its id', async () => {
    const base = '/-/admin/labels';
    const name = uniq('racy');
    await create(adminWeb, base, name);
    const id = await labelId(repo.api, name);
    const numbers: number[] = [];
    for (let i = 0; i < 12; i++)
      numbers.push((await member.client.post(`${repo.api}/issues`, { title: `r${i}` })).body.data.number);
    const adds = numbers.map((n) => member.client.post(`${repo.api}/issues/${n}/labels`, { name }));
    const [del] = await Promise.all([adminWeb.post(`${base}/${id}/delete`, {}), ...adds]);
    expect(del.status).toBe(303);
    const left = await db.query('select count(*)::int as n from issues where $1 = any(label_ids)', [id]);
    expect(left.rows[0].n).toBe(0);
  });
});

describe('scopes', () => {
  test('when a label is addressed through a page of another scope, then it is not found, and nothing changes', async () => {
    const name = uniq('mine');
    await create(ownerWeb, `/${org}/-/labels`, name);
    const orgLabel = await labelId(repo.api, name);
    const repoName = uniq('local');
    await create(ownerWeb, `/${org}/${repo.name}/-/labels`, repoName);
    const repoLabel = await labelId(repo.api, repoName);
    const siteName = uniq('site');
    await create(adminWeb, '/-/admin/labels', siteName);
    const siteLabel = await labelId(repo.api, siteName);
    const tries: [Web, string, number][] = [
      [otherWeb, `/${other.org}/-/labels`, orgLabel],
      [otherWeb, `/${other.org}/${other.repo.name}/-/labels`, repoLabel],
      [otherWeb, `/${other.org}/-/labels`, siteLabel],
      [ownerWeb, `/${org}/-/labels`, repoLabel],
      [ownerWeb, `/${org}/${repo.name}/-/labels`, orgLabel],
      [adminWeb, '/-/admin/labels', orgLabel],
      [adminWeb, `/${org}/${repo.name}/-/labels`, siteLabel],
    ];
    for (const [w, base, id] of tries) {
      const statuses = [
        (await w.get(`${base}/${id}`)).status,
        (await w.get(`${base}/${id}/delete`)).status,
        (await w.post(`${base}/${id}`, { name: 'taken-over', color: '#000000' })).status,
        (await w.post(`${base}/${id}/delete`, {})).status,
      ];
      expect({ base, id, statuses }).toEqual({ base, id, statuses: [404, 404, 404, 404] });
    }
    for (const bad of ['0', 'abc', '99999999999', '2147483648'])
      expect((await ownerWeb.get(`/${org}/-/labels/${bad}`)).status).toBe(404);
    const names = (await catalog(repo.api)).map((l) => l.name);
    expect(names).toEqual(expect.arrayContaining([name, repoName, siteName]));
    expect(names).not.toContain('taken-over');
  });

  test('when a form is wrong, then it is shown again with the reason and what was typed (400)', async () => {
    const base = `/${org}/-/labels`;
    for (const [fields, reason] of [
      [{ name: 'x', color: 'red' }, 'color'],
      [{ name: '   ', color: '#000000' }, 'name'],
      [{ name: 'y'.repeat(101), color: '#000000' }, 'name'],
      [{ name: 'z', color: '#000000', description: 'd'.repeat(1001) }, 'description'],
    ] as const) {
      const r = await ownerWeb.post(base, fields);
      expect({ fields, status: r.status }).toEqual({ fields, status: 400 });
      expect(r.text).toContain('role="alert"');
      expect(r.text).toContain(reason);
    }
  });

  test('who reaches which page: members read the repository catalog only; strangers and members are refused the rest', async () => {
    const memberWeb = await web(member);
    const orgLabels = `/${org}/-/labels`;
    const repoLabels = `/${org}/${repo.name}/-/labels`;
    expect((await memberWeb.get(orgLabels)).status).toBe(403);
    expect((await memberWeb.get('/-/admin/labels')).status).toBe(403);
    expect((await memberWeb.get('/-/admin')).status).toBe(403);
    const seen = await memberWeb.get(repoLabels);
    expect(seen.status).toBe(200);
    expect(seen.text).not.toContain('Create label');
    expect((await memberWeb.post(repoLabels, { name: 'nope', color: '#000000' })).status).toBe(403);
    expect((await memberWeb.post(orgLabels, { name: 'nope', color: '#000000' })).status).toBe(403);
    expect((await otherWeb.get(orgLabels)).status).toBe(403);
    // signed out: the public repository's catalog; a private one is not found
    expect((await fetch(`${s.url}${repoLabels}`)).status).toBe(200);
    const hidden = await newRepo(owner, org, { isPrivate: true });
    expect((await fetch(`${s.url}/${org}/${hidden.name}/-/labels`)).status).toBe(404);
    expect((await memberWeb.get(`/${org}/${hidden.name}/-/labels`)).status).toBe(200);
    const anon = await fetch(`${s.url}${orgLabels}`, { redirect: 'manual' });
    expect(anon.status).toBe(303);
    expect(anon.headers.get('location')).toBe(`/-/login?return_to=${encodeURIComponent(orgLabels)}`);
  });
});
