import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { uniq, type TestServer, type TestUser } from '../helpers/server.ts';
import { serverWithOrg } from '../helpers/factories.ts';
import { populate } from './contents-fixture.ts';

/**
 * Every request on a repository route first finds the repository by its organization's and its
 * own name. That lookup is one statement (it runs on every API read, so it is on the hot path of
 * the throughput goal), and it is never cached: visibility is judged afresh on every request.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
let repo: string;
beforeAll(async () => {
  ({ s, owner, org } = await serverWithOrg());
  repo = uniq('lookup');
  const r = await owner.client.post(`/api/v1/orgs/${org}/repos`, { name: repo, vcs: 'git' });
  expect(r.status).toBe(201);
  await populate('git', s.running.services.repos.path({ id: r.body.data.id, vcs: 'git' }));
  expect((await owner.client.post(`/api/v1/repos/${org}/${repo}/issues`, { title: 'one' })).status).toBe(201);
}, 120_000);
afterAll(async () => {
  await s.close();
});

/** The statements looking something up by name (`lower(name) = lower(...)`) while `fn` runs. */
async function nameLookups(fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  s.running.orm.config.set('onQuery', (sql: string) => {
    if (/lower\((?:\w+\.)?name\)/.test(sql)) seen.push(sql);
    return sql;
  });
  try {
    await fn();
  } finally {
    s.running.orm.config.set('onQuery', (sql: string) => sql);
  }
  return seen;
}

describe('repository lookup of API requests', () => {
  test('when an anonymous client reads a blob or the issue list of a public repository, then the repository and its organization are found with one statement', async () => {
    for (const p of ['blob/README.md', 'issues?state=all']) {
      let status = 0;
      const lookups = await nameLookups(async () => {
        status = (await s.anon.get(`/api/v1/repos/${org}/${repo}/${p}`)).status;
      });
      expect(status).toBe(200);
      expect(lookups).toHaveLength(1);
      expect(lookups[0]).toMatch(/\borgs\b/);
      expect(lookups[0]).toMatch(/\brepos\b/);
    }
  });

  test('when the names differ in case from the stored ones, then the repository is still found', async () => {
    const r = await s.anon.get(`/api/v1/repos/${org.toUpperCase()}/${repo.toUpperCase()}/blob/README.md`);
    expect(r.status).toBe(200);
    expect(r.body.data.content).toBe('hello\nworld\n');
  });

  test('when the organization or the repository does not exist, then the answer is 404 not_found', async () => {
    for (const p of [`${uniq('noorg')}/${repo}`, `${org}/${uniq('norepo')}`]) {
      const r = await s.anon.get(`/api/v1/repos/${p}/blob/README.md`);
      expect(r.status).toBe(404);
      expect(r.body.error.code).toBe('not_found');
    }
  });

  test('when a public repository is made private, then the very next anonymous read is refused, and a member still reads it', async () => {
    const blob = `/api/v1/repos/${org}/${repo}/blob/README.md`;
    expect((await s.anon.get(blob)).status).toBe(200);
    expect((await owner.client.patch(`/api/v1/repos/${org}/${repo}`, { is_private: true })).status).toBe(200);
    const hidden = await s.anon.get(blob);
    expect(hidden.status).toBe(404);
    expect(hidden.body.error.code).toBe('not_found');
    expect((await s.anon.get(`/api/v1/repos/${org}/${repo}/issues`)).status).toBe(404);
    expect((await owner.client.get(blob)).status).toBe(200);
    expect((await owner.client.patch(`/api/v1/repos/${org}/${repo}`, { is_private: false })).status).toBe(
      200,
    );
    expect((await s.anon.get(blob)).status).toBe(200);
  });

  test('when a client fetches at the clone URL (as `name` or `name.git`), with a token or without, then the repository and its organization are found with one statement', async () => {
    const token = owner.token;
    for (const [name, auth] of [
      [repo, undefined],
      [`${repo}.git`, undefined],
      [repo, `Basic ${Buffer.from(`x:${token}`).toString('base64')}`],
    ] as const) {
      let status = 0;
      const lookups = await nameLookups(async () => {
        const r = await fetch(`${s.url}/${org}/${name}/info/refs?service=git-upload-pack`, {
          headers: auth === undefined ? {} : { authorization: auth },
        });
        status = r.status;
        await r.arrayBuffer();
      });
      expect([name, status]).toEqual([name, 200]);
      // (`name.git` is first looked up as given, then without the suffix)
      expect(lookups).toHaveLength(name.endsWith('.git') ? 2 : 1);
      for (const sql of lookups) expect(sql).toMatch(/\borgs\b[\s\S]*\brepos\b|\brepos\b[\s\S]*\borgs\b/);
    }
  });
});
