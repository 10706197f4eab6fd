import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { CURRENT_SCOPES } from '../../src/domain/access.ts';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, serverWithOrg } from '../helpers/factories.ts';

// The default policy (`external`) plus one host name allowed by name. No test here makes the
// server deliver anything: the records point at names that are never resolved.
let s: TestServer;
let owner: TestUser;
let org: string;
let repo: string;
let base: string;
const URL_OK = 'http://receiver.test/hook';

beforeAll(async () => {
  ({ s, owner, org } = await serverWithOrg({ TRIAD_WEBHOOK_ALLOWED_HOSTS: 'external,receiver.test' }));
  repo = await repoOf();
  base = `/api/v1/repos/${org}/${repo}/webhooks`;
});
afterAll(async () => {
  await s.close();
});

const repoOf = async (isPrivate = false) => (await newRepo(owner, org, { isPrivate })).name;

describe('webhook records', () => {
  test('when a webhook is created, read, listed, changed and deleted, then the record has the documented fields and never the secret', async () => {
    const c = await owner.client.post(base, {
      url: URL_OK,
      secret: 'top-secret',
      events: ['push', 'issue.opened', 'push'],
    });
    expect(c.status).toBe(201);
    const id = c.body.data.id;
    expect(c.headers.get('location')).toBe(`${s.url}${base}/${id}`);
    expect(c.body.data).toEqual({
      id: expect.any(Number),
      url: URL_OK,
      events: ['push', 'issue.opened'],
      api_variant: 'current',
      is_active: true,
      has_secret: true,
      disabled_reason: null,
      created_at: expect.stringMatching(/Z$/),
      updated_at: expect.stringMatching(/Z$/),
      last_delivery: null,
    });
    const one = await owner.client.get(`${base}/${id}`);
    expect(one.body.data).toEqual(c.body.data);
    const list = await owner.client.get(base);
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [c.body.data], pagination: { page: 1, per_page: 30, total: 1 } });
    expect(list.headers.get('x-total-count')).toBe('1');
    for (const r of [c, one, list]) expect(r.text).not.toContain('top-secret');

    const p1 = await owner.client.patch(`${base}/${id}`, {
      events: ['tag'],
      url: 'http://receiver.test/other#frag',
      secret: '',
    });
    expect(p1.status).toBe(200);
    expect(p1.body.data).toMatchObject({
      events: ['tag'],
      url: 'http://receiver.test/other',
      has_secret: false,
    });
    const p2 = await owner.client.patch(`${base}/${id}`, { secret: 'again', is_active: false });
    expect(p2.body.data).toMatchObject({ has_secret: true, is_active: false, disabled_reason: null });
    const p3 = await owner.client.patch(`${base}/${id}`, { is_active: true });
    expect(p3.body.data.is_active).toBe(true);
    expect((await owner.client.patch(`${base}/${id}`, {})).status).toBe(200);

    expect((await owner.client.get(`${base}/${id}/deliveries`)).body).toEqual({ data: [] });
    const del = await owner.client.delete(`${base}/${id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await owner.client.get(`${base}/${id}`)).status).toBe(404);
    expect((await owner.client.get(`${base}/${id}/deliveries`)).status).toBe(404);
    expect((await owner.client.delete(`${base}/${id}`)).status).toBe(404);
  });

  test('when a request is malformed, then it is a 400 naming the problem and nothing is written', async () => {
    const bad = async (body: unknown, pattern: RegExp) => {
      const r = await owner.client.post(base, body);
      expect(r.status).toBe(400);
      expect(r.body.error).toEqual({ code: 'validation_failed', message: expect.stringMatching(pattern) });
    };
    await bad(
      { url: URL_OK, events: ['push', 'issue.edited'] },
      /body\.events\.1: unknown event type "issue\.edited"/,
    );
    await bad({ url: URL_OK, events: ['issue'] }, /unknown event type "issue"/);
    await bad({ url: URL_OK, events: [] }, /body\.events: subscribe to at least one event/);
    await bad({ events: ['push'] }, /body\.url/);
    await bad({ url: 'ftp://receiver.test/', events: ['push'] }, /body\.url: must be an http or https URL/);
    await bad({ url: 'not a url', events: ['push'] }, /body\.url: must be an absolute/);
    await bad({ url: 'http://u:p@receiver.test/', events: ['push'] }, /must not contain credentials/);
    await bad({ url: URL_OK, events: ['push'], content_type: 'json' }, /content_type/);
    await bad({ url: URL_OK, events: ['push'], secret: 5 }, /body\.secret/);
    const j = await owner.client.post(base, '{"url":', { 'content-type': 'application/json' });
    expect(j.status).toBe(400);
    expect((await owner.client.get(base)).body.pagination.total).toBe(0);

    const c = await owner.client.post(base, { url: URL_OK, events: ['push'] });
    const p = await owner.client.patch(`${base}/${c.body.data.id}`, { events: ['nope'] });
    expect(p.status).toBe(400);
    expect((await owner.client.get(`${base}/${c.body.data.id}`)).body.data.events).toEqual(['push']);
    await owner.client.delete(`${base}/${c.body.data.id}`);
  });

  test('when a webhook id names nothing here, then it is a 404', async () => {
    const other = await repoOf();
    const c = await owner.client.post(`/api/v1/repos/${org}/${other}/webhooks`, {
      url: URL_OK,
      events: ['push'],
    });
    const orgHook = await owner.client.post(`/api/v1/orgs/${org}/webhooks`, {
      url: URL_OK,
      events: ['push'],
    });
    expect(orgHook.status).toBe(201);
    expect(orgHook.headers.get('location')).toBe(
      `${s.url}/api/v1/orgs/${org}/webhooks/${orgHook.body.data.id}`,
    );
    for (const id of [c.body.data.id, orgHook.body.data.id, 'abc', '0', '99999999999']) {
      const r = await owner.client.get(`${base}/${id}`);
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe('not_found');
      expect((await owner.client.post(`${base}/${id}/ping`)).status).toBe(404);
    }
    expect((await owner.client.get(`/api/v1/orgs/${org}/webhooks/${c.body.data.id}`)).status).toBe(404);
    expect((await owner.client.get(`/api/v1/orgs/${org}/webhooks`)).body.data.map((h: any) => h.id)).toEqual([
      orgHook.body.data.id,
    ]);
  });

  test('when a repository has 50 webhooks, then the 51st is refused with limit_exceeded', async () => {
    const r = await repoOf();
    const b = `/api/v1/repos/${org}/${r}/webhooks`;
    for (let i = 0; i < 50; i++)
      expect((await owner.client.post(b, { url: URL_OK, events: ['push'] })).status).toBe(201);
    const over = await owner.client.post(b, { url: URL_OK, events: ['push'] });
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe('limit_exceeded');
  });
});

describe('permissions', () => {
  test('when callers other than an org owner with the admin scope ask, then they get 401, 403 or 404 as the project rules say', async () => {
    const priv = await repoOf(true);
    const privBase = `/api/v1/repos/${org}/${priv}/webhooks`;
    const body = { url: URL_OK, events: ['push'] };
    const member = await s.newUser();
    await s.addMember(org, member, 'member');
    const outsider = await s.newUser();
    const noAdmin = await s.newUser(undefined, { scopes: CURRENT_SCOPES.filter((x) => x !== 'admin') });
    await s.addMember(org, noAdmin, 'owner');

    expect((await s.anon.get(base)).status).toBe(401);
    expect((await s.anon.post(base, body)).status).toBe(401);
    const forbidden = async (u: TestUser, path: string) => {
      const r = await u.client.post(path, body);
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe('forbidden');
      expect((await u.client.get(path)).status).toBe(403);
    };
    await forbidden(member, base);
    await forbidden(member, privBase);
    await forbidden(outsider, base);
    await forbidden(noAdmin, base);
    await forbidden(member, `/api/v1/orgs/${org}/webhooks`);
    await forbidden(outsider, `/api/v1/orgs/${org}/webhooks`);
    await forbidden(noAdmin, `/api/v1/orgs/${org}/webhooks`);
    // A private repository the caller cannot see does not exist for them.
    expect((await outsider.client.post(privBase, body)).status).toBe(404);
    expect((await outsider.client.get(privBase)).status).toBe(404);
    expect((await owner.client.get(`/api/v1/orgs/${uniq('none')}/webhooks`)).status).toBe(404);

    // The owner's repository-level token with admin reaches this repository's webhooks only.
    const t = await owner.client.post('/api/v1/user/tokens', {
      name: 'repo-admin',
      scopes: ['admin'],
      level: 'repo',
      target: `${org}/${priv}`,
    });
    expect(t.status).toBe(201);
    const repoToken = owner.client.as(t.body.data.token);
    const created = await repoToken.post(privBase, body);
    expect(created.status).toBe(201);
    expect((await repoToken.post(base, body)).status).toBe(403);
    expect((await repoToken.get(`/api/v1/orgs/${org}/webhooks`)).status).toBe(403);
    // A member cannot reach a hook by id either, nor its history.
    const hookPath = `${privBase}/${created.body.data.id}`;
    expect((await member.client.get(`${hookPath}/deliveries`)).status).toBe(403);
    expect((await member.client.patch(hookPath, { is_active: false })).status).toBe(403);
    expect((await member.client.delete(hookPath)).status).toBe(403);
    expect((await outsider.client.delete(hookPath)).status).toBe(404);
    // A site administrator counts as an owner.
    expect((await s.admin.get(hookPath)).status).toBe(200);
  });
});

describe('allowed targets (TRIAD_WEBHOOK_ALLOWED_HOSTS=external)', () => {
  test.each([
    ['http://127.0.0.1:8080/', /127\.0\.0\.1 is in 127\.0\.0\.0\/8 \(loopback\)/],
    [
      'http://localhost:8080/',
      /host localhost resolves to (127\.0\.0\.1|::1) is in (127\.0\.0\.0\/8|::1\/128) \(loopback\)/,
    ],
    ['http://[::ffff:127.0.0.1]/', /::ffff:7f00:1 is in ::ffff:0:0\/96 \(IPv4-mapped\)/],
    [
      'http://169.254.169.254/latest/meta-data/',
      /169\.254\.0\.0\/16 \(link-local, cloud metadata services\)/,
    ],
    ['http://100.64.0.1/', /100\.64\.0\.0\/10 \(shared address space \(carrier-grade NAT\)\)/],
    ['http://[64:ff9b::7f00:1]/', /64:ff9b::\/96 \(IPv4\/IPv6 translation \(NAT64\)\)/],
    ['http://[2002:7f00:1::1]/', /2002::\/16 \(6to4\)/],
    ['http://10.1.2.3/', /10\.0\.0\.0\/8 \(private-use\)/],
    ['http://192.168.1.1/', /192\.168\.0\.0\/16/],
    ['http://172.31.255.255/', /172\.16\.0\.0\/12/],
    ['http://0.0.0.0/', /0\.0\.0\.0\/8/],
    ['http://2130706433/', /127\.0\.0\.1 is in 127\.0\.0\.0\/8/],
    ['http://0x7f.1/', /127\.0\.0\.1 is in 127\.0\.0\.0\/8/],
    ['http://198.18.0.1/', /198\.18\.0\.0\/15 \(benchmarking\)/],
    ['http://224.0.0.251/', /224\.0\.0\.0\/4 \(multicast\)/],
    ['http://[::1]/', /::1\/128 \(loopback\)/],
    ['http://[fd12:3456::1]/', /fc00::\/7 \(unique local\)/],
    ['http://[fe80::1]/', /fe80::\/10 \(link-local\)/],
    ['http://[2001:db8::1]/', /2001:db8::\/32 \(documentation\)/],
  ])('when the URL is %s, then creation is refused with 400 naming the range', async (url, reason) => {
    const r = await owner.client.post(base, { url, events: ['push'] });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('validation_failed');
    expect(r.body.error.message).toMatch(/^body\.url: refused: /);
    expect(r.body.error.message).toMatch(reason);
  });

  test('when an existing webhook is pointed at a refused address, then the change is refused and the record unchanged; a public address is accepted', async () => {
    const c = await owner.client.post(base, { url: URL_OK, events: ['push'] });
    const id = c.body.data.id;
    const r = await owner.client.patch(`${base}/${id}`, { url: 'http://169.254.169.254/', is_active: false });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(/link-local/);
    expect((await owner.client.get(`${base}/${id}`)).body.data).toMatchObject({
      url: URL_OK,
      is_active: true,
    });
    // An ordinary public address passes the check (no event is raised here, so nothing is sent).
    const pub = await owner.client.patch(`${base}/${id}`, { url: 'https://93.184.215.14/hook' });
    expect(pub.status).toBe(200);
    await owner.client.delete(`${base}/${id}`);
  });
});
