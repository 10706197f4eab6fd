import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  startTestServer,
  uniq,
  type Client,
  type Res,
  type TestServer,
  type TestUser,
} from '../helpers/server.ts';
import { PrRepo } from '../helpers/pulls.ts';
import { expectError, mintedClient, newTeam } from '../helpers/factories.ts';

/**
 * Search: the issues and pull requests of a repository (full text, title matches first) and
 * repositories across organizations (name and description), with the visibility rules.
 */

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let stranger: TestUser;
let org: string;
let repo: PrRepo;

/** What the fixture created, in creation order: [kind, number]. */
const made: Record<string, ['issue' | 'pull', number]> = {};

const searchPath = (query: string) => `${repo.api}/search/issues?${query}`;

/** The fixture names of a search answer, in order. */
function named(r: Res): string[] {
  expect(r.status).toBe(200);
  return r.body.data.map((item: { kind: string; number: number }) => {
    const hit = Object.entries(made).find(([, [k, n]]) => k === item.kind && n === item.number);
    return hit?.[0] ?? `${item.kind}#${item.number}`;
  });
}

async function issue(key: string, title: string, body: string): Promise<void> {
  const r = await owner.client.post(`${repo.api}/issues`, { title, body });
  expect(r.status).toBe(201);
  made[key] = ['issue', r.body.data.number];
}

async function pull(key: string, branch: string, title: string, body: string): Promise<void> {
  await repo.commitOn(branch, { [`${branch}.txt`]: `${branch}\n` }, branch);
  const r = await owner.client.post(`${repo.api}/pulls`, { title, body, source_ref: branch });
  expect(r.status).toBe(201);
  made[key] = ['pull', r.body.data.number];
}

const mint = (user: TestUser, body: Record<string, unknown>) => mintedClient(s, user, body);

beforeAll(async () => {
  s = await startTestServer();
  ({ owner, member, org } = await newTeam(s));
  stranger = await s.newUser();
  repo = await PrRepo.create(owner, org, 'git');
  // oldest first; "crash" is in the titles of I4, P2 and I1, in the bodies of P1 and I2 (as "crashed")
  await issue('I1', 'Login page crashes', 'Open the login page.');
  await issue('I2', 'Slow startup', 'The editor crashed twice while loading the settings.');
  await pull('P1', 'loader', 'Refactor the loader', 'This avoids a crash in the loader.');
  await issue('I3', 'Unrelated', 'Nothing to see.');
  await pull('P2', 'settings', 'Fix crash in settings', 'Closes the issue.');
  await issue('I4', 'Crash reporter', 'Report every crash.');
}, 120_000);
afterAll(async () => {
  await s.close();
});

describe('GET /api/v1/repos/:org/:repo/search/issues', () => {
  test('when a word is only in a body, then the issue is found, in the form of the issue list plus kind', async () => {
    const r = await s.anon.get(searchPath('q=editor'));
    expect(named(r)).toEqual(['I2']);
    const list = await s.anon.get(`${repo.api}/issues?state=all`);
    const listed = list.body.data.find((i: { number: number }) => i.number === made.I2![1]);
    expect(r.body.data[0]).toEqual({ kind: 'issue', ...listed });
    expect(r.body.pagination).toEqual({ page: 1, per_page: 30, total: 1 });
    expect(r.headers.get('x-total-count')).toBe('1');
  });

  test('when several match, then title matches come first, newest first within each group, both kinds merged', async () => {
    // "crash" also finds "crashes" and "crashed" (words match by their stem)
    expect(named(await s.anon.get(searchPath('q=crash')))).toEqual(['I4', 'P2', 'I1', 'P1', 'I2']);
  });

  test('when one kind is asked for, then only that kind is searched, pull requests in the pull list form', async () => {
    expect(named(await s.anon.get(searchPath('q=crash&kind=issue')))).toEqual(['I4', 'I1', 'I2']);
    const pulls = await s.anon.get(searchPath('q=crash&kind=pull'));
    expect(named(pulls)).toEqual(['P2', 'P1']);
    expect(pulls.body.pagination.total).toBe(2);
    const list = await s.anon.get(`${repo.api}/pulls`);
    const listed = list.body.data.find((p: { number: number }) => p.number === made.P2![1]);
    expect(pulls.body.data[0]).toEqual({ kind: 'pull', ...listed, mergeable_state: expect.any(String) });
    expect(pulls.body.data[0]).toMatchObject({ title: 'Fix crash in settings', source_ref: 'settings' });
  });

  test('when the results are paged, then the pages follow each other without repeats and Link names them', async () => {
    const all = named(await s.anon.get(searchPath('q=crash')));
    const pages: string[] = [];
    for (let page = 1; page <= 3; page++) {
      const r = await s.anon.get(searchPath(`q=crash&per_page=2&page=${page}`));
      expect(r.body.pagination).toEqual({ page, per_page: 2, total: 5 });
      expect(r.headers.get('x-total-count')).toBe('5');
      pages.push(...named(r));
      if (page === 1) {
        expect(r.headers.get('link')).toContain('rel="next"');
        expect(r.headers.get('link')).toContain('q=crash');
      }
    }
    expect(pages).toEqual(all);
    // one kind, one per page: the pages past the title matches start the others where they end
    const one: string[] = [];
    for (let page = 1; page <= 3; page++)
      one.push(...named(await s.anon.get(searchPath(`q=crash&kind=issue&per_page=1&page=${page}`))));
    expect(one).toEqual(['I4', 'I1', 'I2']);
    const beyond = await s.anon.get(searchPath('q=crash&per_page=2&page=9'));
    expect(beyond.body).toEqual({ data: [], pagination: { page: 9, per_page: 2, total: 5 } });
  });

  test('when the text uses phrases, or and -word, then they narrow or widen the search', async () => {
    expect(named(await s.anon.get(searchPath(`q=${encodeURIComponent('"editor crashed"')}`)))).toEqual([
      'I2',
    ]);
    expect(named(await s.anon.get(searchPath(`q=${encodeURIComponent('"crashed editor"')}`)))).toEqual([]);
    expect(named(await s.anon.get(searchPath(`q=${encodeURIComponent('crash -settings')}`)))).toEqual([
      'I4',
      'I1',
      'P1',
    ]);
    expect(named(await s.anon.get(searchPath(`q=${encodeURIComponent('reporter or loader')}`)))).toEqual([
      'I4',
      'P1',
    ]);
    // one word in the title and one in the body: found, but not as a title match
    expect(named(await s.anon.get(searchPath(`q=${encodeURIComponent('login open')}`)))).toEqual(['I1']);
  });

  test('when nothing matches, or the text has only stop words, then the list is empty', async () => {
    for (const q of ['zebra', 'the', '!!']) {
      const r = await s.anon.get(searchPath(`q=${encodeURIComponent(q)}`));
      expect(r.body).toEqual({ data: [], pagination: { page: 1, per_page: 30, total: 0 } });
    }
  });

  test('when a title changes, then the search follows it at once', async () => {
    const r = await owner.client.patch(`${repo.api}/issues/${made.I3![1]}`, { title: 'Crash on exit' });
    expect(r.status).toBe(200);
    expect(named(await s.anon.get(searchPath('q=crash')))).toEqual(['I4', 'P2', 'I3', 'I1', 'P1', 'I2']);
  });

  test('when an issue is opened after a search, then the same search counts it at once', async () => {
    const before = await s.anon.get(searchPath('q=quokka'));
    expect(before.body.pagination.total).toBe(0);
    await issue('I5', 'Quokka sighting', 'Seen near the loader.');
    const after = await s.anon.get(searchPath('q=quokka'));
    expect(after.body.pagination.total).toBe(1);
    expect(named(after)).toEqual(['I5']);
    // the counts of other words follow too ("loader" is in P1's title and now in I5's body)
    expect(named(await s.anon.get(searchPath('q=loader')))).toEqual(['P1', 'I5']);
  });

  test('when a repository with issues and pull requests is deleted, then it goes (the search bookkeeping with it)', async () => {
    const other = await PrRepo.create(owner, org, 'git');
    expect((await owner.client.post(`${other.api}/issues`, { title: 'doomed', body: 'x' })).status).toBe(201);
    expect((await s.anon.get(`${other.api}/search/issues?q=doomed`)).body.pagination.total).toBe(1);
    expect((await owner.client.delete(other.api)).status).toBe(204);
    expect((await s.anon.get(`${other.api}/search/issues?q=doomed`)).status).toBe(404);
  });

  test('when the query is missing, blank, too long or of an unknown kind, then it answers 400', async () => {
    expectError(await s.anon.get(`${repo.api}/search/issues`), 400, 'validation_failed');
    expectError(await s.anon.get(searchPath('q=%20%20')), 400, 'validation_failed');
    expectError(await s.anon.get(searchPath(`q=${'a'.repeat(256)}`)), 400, 'validation_failed');
    expectError(await s.anon.get(searchPath('q=crash&kind=commit')), 400, 'validation_failed');
    expectError(await s.anon.get(searchPath('q=crash&per_page=0')), 400, 'validation_failed');
    expectError(await s.anon.get(`/api/v1/repos/${org}/${uniq('none')}/search/issues?q=x`), 404, 'not_found');
  });

  test('when the repository is private, then strangers get 404 and members need the scope of each kind', async () => {
    const name = uniq('priv');
    expect((await owner.client.post(`/api/v1/orgs/${org}/repos`, { name, is_private: true })).status).toBe(
      201,
    );
    const base = `/api/v1/repos/${org}/${name}`;
    expect((await owner.client.post(`${base}/issues`, { title: 'Secret crash' })).status).toBe(201);
    const at = (q: string) => `${base}/search/issues?${q}`;
    expectError(await s.anon.get(at('q=crash')), 404, 'not_found');
    expectError(await stranger.client.get(at('q=crash')), 404, 'not_found');
    const otherOrg = await s.newOrg(member);
    const elsewhere = await mint(member, {
      scopes: ['issues:read', 'pulls:read'],
      level: 'org',
      target: otherOrg,
    });
    expectError(await elsewhere.get(at('q=crash')), 404, 'not_found');

    const pullsOnly = await mint(member, { scopes: ['pulls:read'] });
    expectError(await pullsOnly.get(at('q=crash')), 403, 'forbidden');
    expectError(await pullsOnly.get(at('q=crash&kind=issue')), 403, 'forbidden');
    expect((await pullsOnly.get(at('q=crash&kind=pull'))).body.pagination.total).toBe(0);
    const issuesOnly = await mint(member, { scopes: ['issues:read'] });
    expect((await issuesOnly.get(at('q=crash&kind=issue'))).body.data).toEqual([
      expect.objectContaining({ kind: 'issue', title: 'Secret crash' }),
    ]);
    expect((await member.client.get(at('q=crash'))).body.pagination.total).toBe(1);
  });
});

describe('GET /api/v1/search/repos', () => {
  let base: string;
  let other: string;
  let secretOrg: string;

  beforeAll(async () => {
    base = uniq('eng');
    other = uniq('other');
    // after `org` by name: ties order by organization, then name
    secretOrg = await s.newOrg(owner, `zz${uniq('org')}`);
    const create = async (o: string, name: string, description: string, isPrivate = false) => {
      const r = await owner.client.post(`/api/v1/orgs/${o}/repos`, {
        name,
        description,
        is_private: isPrivate,
      });
      expect(r.status).toBe(201);
    };
    await create(org, `x-${base}-tools`, '');
    await create(org, `${base}-core`, '');
    await create(org, base, '');
    await create(org, other, `Drives the ${base} and parses documents`);
    await create(secretOrg, `${base}-secret`, '', true);
  });

  const names = (r: Res): string[] => {
    expect(r.status).toBe(200);
    return r.body.data.map((x: { org: string; name: string }) => `${x.org}/${x.name}`);
  };
  const find = (c: Client, q: string) => c.get(`/api/v1/search/repos?q=${encodeURIComponent(q)}`);

  test('when the text is in names and descriptions, then the exact name comes first, then prefixes, substrings and descriptions', async () => {
    const r = await find(s.anon, base.toUpperCase());
    expect(names(r)).toEqual([
      `${org}/${base}`,
      `${org}/${base}-core`,
      `${org}/x-${base}-tools`,
      `${org}/${other}`,
    ]);
    expect(r.body.data[0]).toMatchObject({
      name: base,
      org,
      is_private: false,
      clone_url: `${s.url}/${org}/${base}`,
    });
    expect(r.headers.get('x-total-count')).toBe('4');
  });

  test('when the words are only in the description, then they match by their stem', async () => {
    expect(names(await find(s.anon, `${base} document`))).toEqual([`${org}/${other}`]);
  });

  test('when a repository is private, then only callers who may read it find it', async () => {
    const secret = `${secretOrg}/${base}-secret`;
    expect(names(await find(s.anon, base))).not.toContain(secret);
    expect(names(await find(stranger.client, base))).not.toContain(secret);
    expect(names(await find(member.client, base))).not.toContain(secret);
    expect(names(await find(owner.client, base))).toEqual([
      `${org}/${base}`,
      `${org}/${base}-core`,
      secret,
      `${org}/x-${base}-tools`,
      `${org}/${other}`,
    ]);
    expect(names(await find(s.admin, base))).toContain(secret);
    const noRead = await mint(owner, { scopes: ['issues:read'] });
    expect(names(await find(noRead, base))).not.toContain(secret);
    const otherRepo = await mint(owner, { scopes: ['repo:read'], level: 'repo', target: `${org}/${base}` });
    expect(names(await find(otherRepo, base))).not.toContain(secret);
    const itsRepo = await mint(owner, { scopes: ['repo:read'], level: 'repo', target: secret });
    expect(names(await find(itsRepo, base))).toContain(secret);
    const otherOrg = await mint(owner, { scopes: ['repo:read'], level: 'org', target: org });
    expect(names(await find(otherOrg, base))).not.toContain(secret);
  });

  test('when the text holds LIKE wildcards, then they match only themselves', async () => {
    expect((await find(s.anon, '%')).body.pagination.total).toBe(0);
    expect((await find(s.anon, '_')).body.pagination.total).toBe(0);
  });

  test('when the query is missing or blank, then it answers 400', async () => {
    expectError(await s.anon.get('/api/v1/search/repos'), 400, 'validation_failed');
    expectError(await find(s.anon, '   '), 400, 'validation_failed');
  });
});
