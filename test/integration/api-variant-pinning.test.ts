/**
 * Which API variant a request is answered in (docs/api-variants.md): the `X-Svc-Api-Variant`
 * header over the token's pinned `api_variant` over the server's `TRIAD_API_VARIANT`; every answer
 * under /api/ names the variant used; an unknown value is 400. Each variant has its OpenAPI
 * document, and the responses of this file are checked against the one of their variant.
 */
import { describe, expect, test } from '@jest/globals';
import { Validator } from '@seriousme/openapi-schema-validator';
import { expectError, mintedClient, withOrgServer, type OrgServer } from '../helpers/factories.ts';
import { commitFiles, gitRepo, TWO_STEPS } from '../helpers/ci.ts';
import { PrRepo, settled } from '../helpers/pulls.ts';
import { uniq, type Client } from '../helpers/server.ts';
import { checkedEarlierResponses } from '../helpers/validate-responses.ts';

const variantOf = (r: { headers: Headers }) => r.headers.get('x-svc-api-variant');

/** A token of `w.owner` pinned to `pin` (or not pinned), with the earlier names when pinned earlier. */
async function pinned(w: OrgServer, pin: 'current' | 'earlier' | null): Promise<Client> {
  const scopes = pin === 'earlier' ? ['read', 'write'] : ['repo:read', 'issues:write'];
  const headers = { 'X-Svc-Api-Variant': pin === 'earlier' ? 'earlier' : 'current' };
  const r = await w.owner.client.post(
    '/api/v1/user/tokens',
    { name: uniq('t'), scopes, ...(pin === null ? {} : { api_variant: pin }) },
    headers,
  );
  expect(r.status).toBe(201);
  expect(r.body.data.api_variant).toBe(pin);
  return w.s.anon.as(r.body.data.token);
}

describe('a server whose default is the current variant', () => {
  let w: OrgServer;
  withOrgServer({}, (x) => (w = x));

  test('every /api/ answer names its variant, errors and unknown routes included', async () => {
    expect(variantOf(await w.owner.client.get('/api/v1/user'))).toBe('current');
    expect(variantOf(await w.s.anon.get('/api/v1/user'))).toBe('current'); // 401
    expect(variantOf(await w.s.anon.get('/api/v1/nothing-here'))).toBe('current'); // 404
    const bad = await w.s.anon.as('triad_nope').get('/api/v1/user', { 'X-Svc-Api-Variant': 'earlier' });
    expect(bad.status).toBe(401);
    expect(variantOf(bad)).toBe('earlier');
    // outside /api/ (the web interface, clone URLs, health) there is no variant
    expect((await w.s.anon.get('/healthz')).headers.has('x-svc-api-variant')).toBe(false);
  });

  test('an unknown variant is 400 with the error envelope, before the token is looked at', async () => {
    for (const value of ['older', '', 'v1', 'current,earlier']) {
      const r = await w.owner.client.get('/api/v1/user', { 'X-Svc-Api-Variant': value });
      expectError(r, 400, 'bad_request');
      expect(r.body.error.message).toMatch(/X-Svc-Api-Variant/);
      expect(variantOf(r)).toBe('current');
    }
    // the value is read ignoring letter case and surrounding spaces
    const r = await w.owner.client.get('/api/v1/user', { 'X-Svc-Api-Variant': ' Earlier ' });
    expect(r.status).toBe(200);
    expect(variantOf(r)).toBe('earlier');
  });

  test('header over token over server default', async () => {
    const unpinned = await pinned(w, null);
    const early = await pinned(w, 'earlier');
    const late = await pinned(w, 'current');
    expect(variantOf(await unpinned.get('/api/v1/user'))).toBe('current');
    expect(variantOf(await early.get('/api/v1/user'))).toBe('earlier');
    expect(variantOf(await late.get('/api/v1/user'))).toBe('current');
    const asked = (c: Client, v: string) => c.get('/api/v1/user', { 'X-Svc-Api-Variant': v });
    expect(variantOf(await asked(early, 'current'))).toBe('current');
    expect(variantOf(await asked(unpinned, 'earlier'))).toBe('earlier');
    expect(variantOf(await asked(late, 'earlier'))).toBe('earlier');
  });

  test('the token list shows each token’s pinned variant; create refuses an unknown one', async () => {
    const name = uniq('pin');
    const made = await w.owner.client.post('/api/v1/user/tokens', {
      name,
      scopes: ['repo:read'],
      api_variant: 'earlier',
    });
    expect(made.status).toBe(201);
    const list = await w.owner.client.get('/api/v1/user/tokens?per_page=100');
    const mine = list.body.data.find((t: { name: string }) => t.name === name);
    expect(mine).toMatchObject({ name, scopes: ['repo:read'], api_variant: 'earlier' });
    const test = list.body.data.find((t: { name: string }) => t.name === 'test');
    expect(test.api_variant).toBeNull();
    const bad = await w.owner.client.post('/api/v1/user/tokens', {
      name: uniq('t'),
      scopes: ['repo:read'],
      api_variant: 'older',
    });
    expectError(bad, 400, 'validation_failed');
    expect(bad.body.error.message).toMatch(/api_variant/);
  });

  test('scope names follow the variant of the create request', async () => {
    const early = { 'X-Svc-Api-Variant': 'earlier' };
    const refused = await w.owner.client.post(
      '/api/v1/user/tokens',
      { name: uniq('t'), scopes: ['issues:read'] },
      early,
    );
    expectError(refused, 400, 'validation_failed');
    expect(refused.body.error.message).toMatch(/scopes/);
    const coarse = await w.owner.client.post(
      '/api/v1/user/tokens',
      { name: uniq('t'), scopes: ['read', 'write'] },
      early,
    );
    expect(coarse.status).toBe(201);
    // the current variant takes its own names, and the earlier ones as it always did
    const both = await w.owner.client.post('/api/v1/user/tokens', {
      name: uniq('t'),
      scopes: ['read', 'pulls:write'],
    });
    expect(both.status).toBe(201);
  });

  test('the earlier variant needs read for the user and token endpoints and the member list', async () => {
    const narrow = await mintedClient(w.s, w.owner, { scopes: ['issues:write'] });
    const early = { 'X-Svc-Api-Variant': 'earlier' };
    for (const path of ['/api/v1/user', '/api/v1/user/tokens', `/api/v1/orgs/${w.org}/members`]) {
      expect((await narrow.get(path)).status).toBe(200);
      const r = await narrow.get(path, early);
      expectError(r, 403, 'forbidden');
      expect(r.body.error.message).toMatch(/read scope/);
    }
    const create = await narrow.post('/api/v1/user/tokens', { name: uniq('t'), scopes: ['read'] }, early);
    expectError(create, 403, 'forbidden');
    // `read` is every *:read: a token holding them all (or `write`, or `admin`) has it
    const reader = await mintedClient(w.s, w.owner, { scopes: ['read'] });
    expect((await reader.get('/api/v1/user/tokens', early)).status).toBe(200);
    const fine = await mintedClient(w.s, w.owner, {
      scopes: ['repo:read', 'issues:read', 'pulls:read', 'releases:read', 'ci:read'],
    });
    expect((await fine.get('/api/v1/user', early)).status).toBe(200);
  });
});

describe('a token pinned to the earlier variant on a server of the current one (issue 31 “done when”)', () => {
  let w: OrgServer;
  withOrgServer({}, (x) => (w = x));

  test('the changeset names node, short_node and rev; the header current gives id and short_id back', async () => {
    const early = await pinned(w, 'earlier');
    const repo = await PrRepo.create(w.owner, w.org, 'hg');
    const tip = await early.get(`${repo.api}/changeset/tip`);
    expect(tip.status).toBe(200);
    expect(tip.body.data).toMatchObject({ node: expect.any(String), short_node: expect.any(String), rev: 0 });
    expect(tip.body.data).not.toHaveProperty('id');
    const current = await early.get(`${repo.api}/changeset/tip`, { 'X-Svc-Api-Variant': 'current' });
    expect(current.body.data).toMatchObject({ id: tip.body.data.node, short_id: tip.body.data.short_node });
    expect(current.body.data).not.toHaveProperty('rev');
    // an issue with severity is refused, as documented; without it, it is created without one
    const api = `/api/v1/repos/${w.org}/${repo.name}`;
    const severe = await early.post(`${api}/issues`, { title: 'bad', severity: 'high' });
    expectError(severe, 400, 'validation_failed');
    expect(severe.body.error.message).toMatch(/severity/);
    const made = await early.post(`${api}/issues`, { title: 'fine' });
    expect(made.status).toBe(201);
    expect(made.body.data).not.toHaveProperty('severity');
  });

  test('read+write: a pull request from source_bookmark into `default`, pipelines without tag, events, error_message, no step log', async () => {
    const early = await pinned(w, 'earlier');
    const hg = await PrRepo.create(w.owner, w.org, 'hg');
    await hg.commitOn('feat', { 'f.txt': 'f\n' }, 'feat');
    const pr = await early.post(`${hg.api}/pulls`, { title: 'pr', source_bookmark: 'feat' });
    expect(pr.status).toBe(201);
    expect(pr.body.data).toMatchObject({ source_bookmark: 'feat', target_branch: 'default' });
    expect(pr.body.data).not.toHaveProperty('ref_type');
    // the bookmark's commit is on the `default` named branch already: nothing to merge
    expect((await settled(early, `${hg.api}/pulls/${pr.body.data.number}`)).mergeable_state).toBe('behind');

    const git = await gitRepo(w.s, w.owner, w.org);
    await commitFiles(git, { '.pipeline.yml': TWO_STEPS });
    await git.push();
    const api = `/api/v1/repos/${w.org}/${git.name}`;
    const list = await early.get(`${api}/pipelines`);
    expect(list.status).toBe(200);
    for (const field of ['tag', 'events', 'error_message'])
      expect(list.body.pipelines[0]).not.toHaveProperty(field);
    const one = await early.get(`${api}/pipelines/1`);
    expect(one.body).not.toHaveProperty('events');
    expectError(await early.get(`${api}/pipelines/1/steps/1/log`), 404, 'not_found');
    // the same token asking for the current variant finds the endpoint (the step has not started)
    const current = await early.get(`${api}/pipelines/1/steps/1/log`, { 'X-Svc-Api-Variant': 'current' });
    expectError(current, 404, 'not_found');
    expect(current.body.error.message).not.toMatch(/earlier API variant/);
  });
});

describe('a server whose default is the earlier variant', () => {
  let w: OrgServer;
  withOrgServer({ TRIAD_API_VARIANT: 'earlier' }, (x) => (w = x));

  test('unpinned tokens and anonymous callers get the earlier variant; a pin or a header wins', async () => {
    expect(variantOf(await w.s.anon.get(`/api/v1/orgs/${w.org}`))).toBe('earlier');
    const unpinned = await pinned(w, null);
    expect(variantOf(await unpinned.get('/api/v1/user'))).toBe('earlier');
    const late = await pinned(w, 'current');
    expect(variantOf(await late.get('/api/v1/user'))).toBe('current');
    const asked = await late.get('/api/v1/user', { 'X-Svc-Api-Variant': 'earlier' });
    expect(variantOf(asked)).toBe('earlier');
  });

  test('the OpenAPI document is the variant’s own unless `variant` names one', async () => {
    const own = await w.s.anon.get('/api/v1/openapi.json');
    expect(own.body.info['x-api-variant']).toBe('earlier');
    const current = await w.s.anon.get('/api/v1/openapi.json?variant=current');
    expect(current.body.info['x-api-variant']).toBe('current');
    expectError(await w.s.anon.get('/api/v1/openapi.json?variant=older'), 400, 'validation_failed');
  });
});

describe('the OpenAPI document of each variant', () => {
  let w: OrgServer;
  withOrgServer({}, (x) => (w = x));

  test('both are valid OpenAPI 3.1 documents; every answer of both lists X-Svc-Api-Variant', async () => {
    for (const variant of ['current', 'earlier']) {
      const doc = (await w.s.anon.get(`/api/v1/openapi.json?variant=${variant}`)).body;
      const v = new Validator();
      const r = await v.validate(doc);
      expect({ variant, errors: r.errors }).toEqual({ variant, errors: undefined });
      expect(doc.info['x-api-variant']).toBe(variant);
      for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
        if (!path.startsWith('/api/')) continue;
        for (const [method, op] of Object.entries(ops)) {
          for (const [status, res] of Object.entries(op.responses as Record<string, any>)) {
            const where = `${variant} ${method} ${path} ${status}`;
            expect({ where, header: res.headers?.['X-Svc-Api-Variant'] !== undefined }).toEqual({
              where,
              header: true,
            });
          }
        }
      }
    }
  });

  test('earlier answers in this file were checked against the earlier document', () => {
    expect(checkedEarlierResponses()).toBeGreaterThan(0);
  });
});
