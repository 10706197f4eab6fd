import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, withOrgServer } from '../helpers/factories.ts';
import { PrRepo, settled } from '../helpers/pulls.ts';
import { Receiver } from '../helpers/receiver.ts';
import { statusRule } from '../helpers/status-rules.ts';
import { DELIVERY_ENV } from '../helpers/webhook-world.ts';
import { waitFor } from '../helpers/wait.ts';
import { ok } from '../helpers/vcs.ts';

/**
 * Commit statuses through the API (report, list, validation and access), their `status` webhook,
 * and an external required context gating a pull request's merge (protection rule written into
 * the database: the protections API is another slice's).
 */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({ ...DELIVERY_ENV, TRIAD_PULL_CHECK_BUDGET_MS: '60000' }, (w) => ({ s, owner, org } = w));

let repo: PrRepo;
let head: string;
beforeAll(async () => {
  repo = await PrRepo.create(owner, org, 'git');
  head = (await ok('git', ['rev-parse', 'HEAD'], repo.w.dir)).trim();
});

const post = (body: Record<string, unknown>, rev = head, c = owner.client) =>
  c.post(`${repo.api}/statuses/${rev}`, body);

describe('commit statuses', () => {
  test('when statuses are reported, then they list newest first with the latest of each context first, paged', async () => {
    const r = await post({
      state: 'pending',
      context: 'ci/a',
      description: 'queued',
      target_url: 'https://ci.example/1',
    });
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({
      id: expect.any(Number),
      commit: head,
      state: 'pending',
      context: 'ci/a',
      description: 'queued',
      target_url: 'https://ci.example/1',
      creator: expect.objectContaining({ username: owner.username }),
      latest: true,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    // a short id names the same commit
    expect((await post({ state: 'success', context: 'ci/b' }, head.slice(0, 10))).status).toBe(201);
    expect((await post({ state: 'success', context: 'ci/a' })).status).toBe(201);
    expect((await post({ state: 'failure', context: 'ci/c' })).status).toBe(201);
    expect((await post({ state: 'error', context: 'ci/b' })).status).toBe(201);

    const all = await owner.client.get(`${repo.api}/commits/${head}/statuses`);
    expect(all.status).toBe(200);
    expect(all.body.data.map((x: any) => [x.context, x.state, x.latest])).toEqual([
      ['ci/b', 'error', true],
      ['ci/c', 'failure', true],
      ['ci/a', 'success', true],
      ['ci/b', 'success', false],
      ['ci/a', 'pending', false],
    ]);
    const page2 = await s.anon.get(`${repo.api}/commits/main/statuses?per_page=2&page=2`);
    expect(page2.body.pagination).toMatchObject({ page: 2, per_page: 2, total: 5 });
    expect(page2.body.data.map((x: any) => [x.context, x.state])).toEqual([
      ['ci/a', 'success'],
      ['ci/b', 'success'],
    ]);
  });

  test('when the caller or the body is not right, then 401, 403, 404 or 400 and nothing is recorded', async () => {
    const before = (await s.anon.get(`${repo.api}/commits/${head}/statuses`)).body.pagination.total;
    expectError(await post({ state: 'success', context: 'x' }, head, s.anon), 401, 'unauthorized');
    const reader = await s.newUser(undefined, { scopes: ['repo:read', 'pulls:write'] });
    await s.addMember(org, reader);
    expectError(await post({ state: 'success', context: 'x' }, head, reader.client), 403, 'forbidden');
    const outsider = await s.newUser(undefined, { scopes: ['repo:write'] });
    expectError(await post({ state: 'success', context: 'x' }, head, outsider.client), 403, 'forbidden');
    expectError(await post({ state: 'success', context: 'x' }, 'f'.repeat(40)), 404, 'not_found');
    expectError(await owner.client.get(`${repo.api}/commits/${'f'.repeat(40)}/statuses`), 404, 'not_found');
    expectError(
      await owner.client.post(`/api/v1/repos/${org}/nope/statuses/${head}`, {
        state: 'success',
        context: 'x',
      }),
      404,
      'not_found',
    );
    for (const bad of [
      { state: 'done', context: 'x' },
      { state: 'success', context: '' },
      { state: 'success', context: 'x'.repeat(256) },
      { state: 'success', context: 'x', description: 'd'.repeat(1001) },
      { state: 'success', context: 'x', target_url: 'ftp://ci.example/1' },
      { state: 'success', context: 'x', target_url: 'not a url' },
      { state: 'success' },
      // Triad's own pipeline context cannot be reported by others (it would pass a required pipeline)
      { state: 'success', context: 'triad/pipeline' },
    ]) {
      expectError(await post(bad), 400, 'validation_failed');
    }
    expect((await s.anon.get(`${repo.api}/commits/${head}/statuses`)).body.pagination.total).toBe(before);
    // a CI system's token: ci:write is enough
    const ci = await s.newUser(undefined, { scopes: ['ci:write'] });
    await s.addMember(org, ci);
    expect((await post({ state: 'success', context: 'ci/token' }, head, ci.client)).status).toBe(201);
  });

  test('when a status is reported, then a `status` webhook reaches the receiver with the status', async () => {
    const rx = await Receiver.start();
    try {
      const h = await owner.client.post(`${repo.api}/webhooks`, { url: rx.url(), events: ['status'] });
      expect(h.status).toBe(201);
      const created = await post({
        state: 'failure',
        context: 'ci/hooked',
        target_url: 'http://ci.example/9',
      });
      const got = await waitFor('the status delivery', () => rx.requests.find((q) => q.event === 'status'));
      expect(got.body).toMatchObject({
        event: 'status',
        payload: {
          status: created.body.data,
          sender: { username: owner.username },
          repository: { id: repo.id, name: repo.name, org },
        },
      });
    } finally {
      await rx.close();
    }
  });
});

describe('the earlier API variant', () => {
  test('when a `write` token reports in the earlier variant, then it is recorded; an earlier webhook cannot subscribe to `status`', async () => {
    const EARLIER = { 'X-Svc-Api-Variant': 'earlier' };
    const writer = await s.newUser(undefined, { scopes: ['write'] });
    await s.addMember(org, writer);
    const r = await writer.client.post(
      `${repo.api}/statuses/${head}`,
      { state: 'success', context: 'ci/earlier' },
      EARLIER,
    );
    expect(r.status).toBe(201);
    expect(r.body.data).toMatchObject({ commit: head, state: 'success', context: 'ci/earlier' });
    const list = await s.anon.get(`${repo.api}/commits/${head}/statuses`, EARLIER);
    expect(list.body.data[0]).toMatchObject({ context: 'ci/earlier', latest: true });
    expectError(
      await owner.client.post(
        `${repo.api}/webhooks`,
        { url: 'http://127.0.0.1:9/h', events: ['status'] },
        EARLIER,
      ),
      400,
      'validation_failed',
    );
  });
});

describe('an external required context', () => {
  test('when a rule requires `ext/ci` on main, then the merge waits for it: pending, failed, then merged', async () => {
    const r = await PrRepo.create(owner, org, 'git');
    await statusRule(s, r.id, { pattern: 'main', required_contexts: ['ext/ci'] });
    await r.commitOn('feature', { 'f.txt': 'f\n' }, 'feature');
    const pr = (await owner.client.post(`${r.api}/pulls`, { title: 'f', source_ref: 'feature' })).body.data;
    const read = () => settled(owner.client, `${r.api}/pulls/${pr.number}`);
    expect((await read()).checks).toEqual({
      state: 'pending',
      contexts: [{ context: 'ext/ci', state: 'pending', target_url: null }],
    });
    const merge = () => owner.client.post(`${r.api}/pulls/${pr.number}/merge`, {});
    expectError(await merge(), 409, 'checks_pending');
    const at = (state: string, context = 'ext/ci') =>
      owner.client.post(`${r.api}/statuses/${pr.head_commit}`, {
        state,
        context,
        target_url: 'https://ext/1',
      });
    // a context no rule requires shows, and does not gate
    expect((await at('failure', 'lint')).status).toBe(201);
    expect((await at('failure')).status).toBe(201);
    expect((await read()).checks).toEqual({
      state: 'failure',
      contexts: [
        { context: 'ext/ci', state: 'failure', target_url: 'https://ext/1' },
        { context: 'lint', state: 'failure', target_url: 'https://ext/1' },
      ],
    });
    expectError(await merge(), 409, 'checks_failed');
    expect((await read()).status).toBe('open');
    expect((await at('success')).status).toBe(201);
    const list = await owner.client.get(`${r.api}/pulls`);
    expect(list.body.data[0].checks.contexts[0]).toEqual({
      context: 'ext/ci',
      state: 'success',
      target_url: 'https://ext/1',
    });
    // a push to the source brings a new head: its checks start over
    await r.commitOn('feature', { 'g.txt': 'g\n' }, 'more');
    const moved = await read();
    expect(moved.head_commit).not.toBe(pr.head_commit);
    expect(moved.checks.state).toBe('pending');
    expectError(await merge(), 409, 'checks_pending');
    const onNew = await owner.client.post(`${r.api}/statuses/feature`, {
      state: 'success',
      context: 'ext/ci',
    });
    expect(onNew.body.data.commit).toBe(moved.head_commit);
    const merged = await merge();
    expect(merged.status).toBe(200);
    expect(merged.body.data.status).toBe('merged');
  });
});
