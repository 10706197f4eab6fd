import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, uniq, type TestServer, type TestUser } from '../helpers/server.ts';

let s: TestServer;
let owner: TestUser;
let alice: TestUser;
let bob: TestUser;
let org: string;
let path: string;

const numbers = (r: { body: any }) => r.body.data.map((i: any) => i.number as number);

/**
 * Fixture (numbers in creation order):
 *  1 "Crash on start"      alice  new     high      [bug]        -
 *  2 "Slow list"           bob    open    low       [perf]       alice      2 comments
 *  3 "Crash in 100% mode"  alice  closed  critical  [bug, perf]  bob        1 comment
 *  4 "Typo_in docs"        bob    open    none      []           alice,bob  3 comments
 *  5 "crash when idle"     bob    new     HIGH->high [ui]        -
 * Then issue 2 is touched last (severity change), so it is the most recently updated.
 */
beforeAll(async () => {
  s = await startTestServer();
  owner = await s.newUser();
  alice = await s.newUser();
  bob = await s.newUser();
  org = await s.newOrg(owner);
  await s.addMember(org, alice);
  await s.addMember(org, bob);
  const repo = uniq('repo');
  await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: repo });
  path = `/api/v1/repos/${org}/${repo}`;
  for (const name of ['bug', 'perf', 'ui']) {
    const r = await owner.client.post(`${path}/labels`, { name, color: '#123456' });
    expect(r.status).toBe(201);
  }
  const mk = async (u: TestUser, body: unknown) => {
    const r = await u.client.post(`${path}/issues`, body);
    if (r.status !== 201) throw new Error(`${r.status} ${r.text}`);
  };
  await mk(alice, { title: 'Crash on start', severity: 'high', labels: ['bug'] });
  await mk(bob, {
    title: 'Slow list',
    severity: 'low',
    labels: ['perf'],
    assignees: [{ user_id: alice.id }],
  });
  await mk(alice, {
    title: 'Crash in 100% mode',
    severity: 'critical',
    labels: ['bug', 'perf'],
    assignees: [{ user_id: bob.id }],
  });
  await mk(bob, { title: 'Typo_in docs', assignees: [{ user_id: alice.id }, { user_id: bob.id }] });
  await mk(bob, { title: 'crash when idle', severity: 'HIGH', labels: ['ui'] });
  for (const [n, count] of [
    [2, 2],
    [3, 1],
    [4, 3],
  ] as const) {
    for (let i = 0; i < count; i++)
      await owner.client.post(`${path}/issues/${n}/comments`, { body: `c${i}` });
  }
  await alice.client.patch(`${path}/issues/3`, { state: 'closed' });
  await owner.client.patch(`${path}/issues/2`, { severity: 'LOW' }); // unchanged value: no touch
  await owner.client.patch(`${path}/issues/2`, { severity: 'medium' });
});
afterAll(async () => {
  await s.close();
});

describe('state filter', () => {
  test('default is open, newest first', async () => {
    const r = await s.anon.get(`${path}/issues`);
    expect(r.status).toBe(200);
    expect(numbers(r)).toEqual([4, 2]);
    expect(r.body.pagination).toEqual({ page: 1, per_page: 30, total: 2 });
  });
  test.each([
    ['new', [5, 1]],
    ['open', [4, 2]],
    ['closed', [3]],
    ['active', [5, 4, 2, 1]],
    ['all', [5, 4, 3, 2, 1]],
  ])('state=%s (the total comes from the per-state counts)', async (state, expected) => {
    const r = await s.anon.get(`${path}/issues?state=${state}`);
    expect(numbers(r)).toEqual(expected);
    expect(r.body.pagination.total).toBe(expected.length);
    const page2 = await s.anon.get(`${path}/issues?state=${state}&per_page=1&page=2`);
    expect(page2.body.pagination.total).toBe(expected.length);
    expect(numbers(page2)).toEqual(expected.slice(1, 2));
  });
  test('a bad state answers 400', async () => {
    const r = await s.anon.get(`${path}/issues?state=merged`);
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('validation_failed');
  });
});

describe('filters', () => {
  test('severity, case-insensitive; a bad value answers 400', async () => {
    expect(numbers(await s.anon.get(`${path}/issues?state=all&severity=high`))).toEqual([5, 1]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&severity=HiGh`))).toEqual([5, 1]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&severity=none`))).toEqual([4]);
    const bad = await s.anon.get(`${path}/issues?severity=urgent`);
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('validation_failed');
  });
  test('label, by name in the merged catalog (case-insensitive); an unknown label lists nothing', async () => {
    expect(numbers(await s.anon.get(`${path}/issues?state=all&label=bug`))).toEqual([3, 1]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&label=PERF`))).toEqual([3, 2]);
    const unknown = await s.anon.get(`${path}/issues?state=all&label=nope`);
    expect(unknown.status).toBe(200);
    expect(unknown.body.data).toEqual([]);
    expect(unknown.body.pagination.total).toBe(0);
  });
  test('assignee and author, by display name', async () => {
    const a = encodeURIComponent(`${alice.username} Display`);
    const b = encodeURIComponent(`${bob.username} Display`);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&assignee=${a}`))).toEqual([4, 2]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&assignee=${b}`))).toEqual([4, 3]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&author=${a}`))).toEqual([3, 1]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&author=${b}`))).toEqual([5, 4, 2]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&author=Nobody`))).toEqual([]);
  });
  test('assignee and author, by username (case-insensitive) as well', async () => {
    expect(numbers(await s.anon.get(`${path}/issues?state=all&assignee=${alice.username}`))).toEqual([4, 2]);
    expect(
      numbers(await s.anon.get(`${path}/issues?state=all&author=${bob.username.toUpperCase()}`)),
    ).toEqual([5, 4, 2]);
    const both = `${path}/issues?state=all&author=${alice.username}&assignee=${bob.username}`;
    expect(numbers(await s.anon.get(both))).toEqual([3]);
  });
  test('q is a case-insensitive title substring; LIKE wildcards are literal', async () => {
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=CRASH`))).toEqual([5, 3, 1]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=${encodeURIComponent('100%')}`))).toEqual([
      3,
    ]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=${encodeURIComponent('%')}`))).toEqual([3]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=o_i`))).toEqual([4]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=_`))).toEqual([4]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=${encodeURIComponent('\\')}`))).toEqual([]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&q=`))).toEqual([5, 4, 3, 2, 1]);
  });
  test('filters combine', async () => {
    const a = encodeURIComponent(`${alice.username} Display`);
    expect(numbers(await s.anon.get(`${path}/issues?state=active&q=crash&severity=high`))).toEqual([5, 1]);
    expect(numbers(await s.anon.get(`${path}/issues?state=all&label=bug&author=${a}&q=mode`))).toEqual([3]);
    expect(numbers(await s.anon.get(`${path}/issues?state=open&label=perf&assignee=${a}`))).toEqual([2]);
    expect(numbers(await s.anon.get(`${path}/issues?state=closed&label=ui`))).toEqual([]);
  });
  test('repeated query parameters answer 400, not 500', async () => {
    const r = await s.anon.get(`${path}/issues?state=open&state=closed`);
    expect(r.status).toBe(400);
  });
});

describe('sorts', () => {
  test.each([
    ['newest', [5, 4, 3, 2, 1]],
    ['oldest', [1, 2, 3, 4, 5]],
    ['updated', [2, 3, 4, 5, 1]],
    ['comments', [4, 2, 3, 5, 1]],
  ])('sort=%s', async (sort, expected) => {
    expect(numbers(await s.anon.get(`${path}/issues?state=all&sort=${sort}`))).toEqual(expected);
  });
  test('a bad sort answers 400', async () => {
    expect((await s.anon.get(`${path}/issues?sort=votes`)).status).toBe(400);
  });
});

describe('pagination', () => {
  test('page and per_page with Link and X-Total-Count; per_page above 100 is clamped', async () => {
    const p2 = await s.anon.get(`${path}/issues?state=all&per_page=2&page=2`);
    expect(numbers(p2)).toEqual([3, 2]);
    expect(p2.body.pagination).toEqual({ page: 2, per_page: 2, total: 5 });
    expect(p2.headers.get('x-total-count')).toBe('5');
    const link = p2.headers.get('link') ?? '';
    expect(link).toContain('rel="first"');
    expect(link).toContain('page=1>; rel="prev"');
    expect(link).toContain('page=3>; rel="next"');
    expect(link).toContain('page=3>; rel="last"');
    const beyond = await s.anon.get(`${path}/issues?state=all&per_page=2&page=9`);
    expect(beyond.body.data).toEqual([]);
    expect(beyond.body.pagination.total).toBe(5);
    const clamped = await s.anon.get(`${path}/issues?state=all&per_page=1000`);
    expect(clamped.body.pagination.per_page).toBe(100);
    for (const q of ['page=0', 'per_page=0', 'page=x']) {
      expect((await s.anon.get(`${path}/issues?${q}`)).status).toBe(400);
    }
  });
  test('list items have the issue shape without comments', async () => {
    const r = await s.anon.get(`${path}/issues?state=all&sort=oldest&per_page=3`);
    const third = r.body.data[2];
    expect(Object.keys(third)).toEqual([
      'id',
      'number',
      'title',
      'body',
      'state',
      'severity',
      'author',
      'labels',
      'assignees',
      'created_at',
      'updated_at',
    ]);
    expect(third.labels.map((l: any) => l.name)).toEqual(['bug', 'perf']);
    expect(third.labels[0]).toEqual({ id: expect.any(Number), name: 'bug', color: '#123456', scope: 'repo' });
    expect(third.assignees.map((a: any) => a.id)).toEqual([bob.id]);
  });
});
