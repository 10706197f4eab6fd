import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, mintedClient, newRepo, withOrgServer, type NewRepo } from '../helpers/factories.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

let member: TestUser;
let outsider: TestUser;
let repo: NewRepo;
const api = (rest = '') => `${repo.api}/protections${rest}`;

beforeAll(async () => {
  member = await s.newUser();
  outsider = await s.newUser();
  await s.addMember(org, member);
  repo = await newRepo(owner, org, { vcs: 'git' });
});

describe('protections API', () => {
  test('when an owner creates a rule, then it is answered with defaults, listed, read and located', async () => {
    const r = await owner.client.post(api(), { pattern: 'main' });
    expect(r.status).toBe(201);
    const rule = r.body.data;
    expect(rule).toEqual({
      id: expect.any(Number),
      pattern: 'main',
      fast_forward_only: true,
      allow_deletion: false,
      push: 'members',
      require_pipeline: false,
      required_contexts: [],
      created_at: expect.stringMatching(/Z$/),
    });
    expect(r.headers.get('location')).toBe(`${s.url}${api(`/${rule.id}`)}`);
    const list = await member.client.get(api());
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [rule], pagination: { page: 1, per_page: 30, total: 1 } });
    expect((await member.client.get(api(`/${rule.id}`))).body.data).toEqual(rule);
  });

  test('when an owner changes a rule, then only the fields given change and users are stored as spelled', async () => {
    const created = (await owner.client.post(api(), { pattern: 'release/*', required_contexts: ['ci/lint'] }))
      .body.data;
    const r = await owner.client.patch(api(`/${created.id}`), {
      push: { users: [member.username.toUpperCase(), member.username] },
      require_pipeline: true,
    });
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual({
      ...created,
      push: { users: [member.username] },
      require_pipeline: true,
    });
    expect((await owner.client.delete(api(`/${created.id}`))).status).toBe(204);
    expectError(await owner.client.get(api(`/${created.id}`)), 404, 'not_found');
    expectError(await owner.client.delete(api(`/${created.id}`)), 404, 'not_found');
  });

  test('when the request is wrong, then each error answers its status and code', async () => {
    expectError(await s.anon.get(api()), 401, 'unauthorized');
    expectError(await s.anon.post(api(), { pattern: 'x' }), 401, 'unauthorized');
    expectError(await outsider.client.get(api()), 403, 'forbidden');
    expectError(await member.client.post(api(), { pattern: 'x' }), 403, 'forbidden');
    const readOnly = await mintedClient(s, owner, { scopes: ['repo:read', 'repo:write'] });
    expectError(await readOnly.post(api(), { pattern: 'x' }), 403, 'forbidden');
    expectError(await owner.client.post(api(), { pattern: '' }), 400, 'validation_failed');
    expectError(await owner.client.post(api(), { pattern: 'x', push: 'everyone' }), 400, 'validation_failed');
    expectError(await owner.client.post(api(), { pattern: 'x', colour: 'red' }), 400, 'validation_failed');
    expectError(await owner.client.post(api(), { pattern: 'main' }), 409, 'conflict');
    expectError(
      await owner.client.post(api(), { pattern: 'y', push: { users: ['nobody-at-all-here'] } }),
      422,
      'unprocessable',
    );
    const other = (await owner.client.post(api(), { pattern: 'other' })).body.data;
    expectError(await owner.client.patch(api(`/${other.id}`), { pattern: 'main' }), 409, 'conflict');
    expectError(await owner.client.get(api('/999999')), 404, 'not_found');
    expectError(await owner.client.get(`/api/v1/repos/${org}/no-such-repo/protections`), 404, 'not_found');
  });

  test('when the earlier API variant is asked, then the same endpoints answer', async () => {
    const r = await owner.client.get(api(), { 'X-Svc-Api-Variant': 'earlier' });
    expect(r.status).toBe(200);
    expect(r.body.data.map((x: { pattern: string }) => x.pattern)).toContain('main');
    const doc = await s.anon.get('/api/v1/openapi.json?variant=earlier');
    expect(doc.status).toBe(200);
    expect(Object.keys(doc.body.paths)).toContain('/api/v1/repos/{org}/{repo}/protections/{id}');
  });
});
