import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { expectError, withOrgServer } from '../helpers/factories.ts';
import { MAINLINE, PrRepo, settled } from '../helpers/pulls.ts';
import { ok, withCreds } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/**
 * Three-dot compares (`GET .../compare/BASE...HEAD`) and a pull request's commits and files, for
 * all three kinds through the stock clients: the range (commits of the head the base lacks,
 * oldest first), the files of the diff from the merge base, names with `/`, tags and commit ids,
 * the recorded range of merged and closed pull requests, and the errors.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({ TRIAD_PULL_CHECK_BUDGET_MS: '60000' }, (w) => ({ s, owner, org } = w));

const subjects = (list: any[]) => list.map((c) => c.subject);

describe.each(['git', 'hg', 'fossil'] as VcsKind[])('%s compare', (kind) => {
  let repo: PrRepo;
  let first: string;
  const main = MAINLINE[kind];
  const topic = 'topic/one';
  const compare = (range: string) => owner.client.get(`${repo.api}/compare/${range}`);
  beforeAll(async () => {
    repo = await PrRepo.create(owner, org, kind);
    first = (await owner.client.get(`${repo.api}/log?rev=${encodeURIComponent(main)}`)).body.data[0].id;
    await repo.commitOn(topic, { 'a.txt': 'a\n' }, 'add a');
    await repo.commitOn(topic, { README: 'hello\nmore\n', 'b.txt': 'b\n' }, 'change readme');
    await repo.commitOn(topic, { 'b.txt': null }, 'drop b');
    // the mainline moves on: the merge base stays the first commit
    await repo.commitOn(main, { 'main.txt': 'main\n' }, 'mainline moves');
  });

  test('when two refs are compared, then the head-only commits and the diff from the merge base answer', async () => {
    const r = await compare(`${encodeURIComponent(main)}...${encodeURIComponent(topic)}`);
    expect(r.status).toBe(200);
    const d = r.body.data;
    expect(d.merge_base).toBe(first);
    expect(d.base).not.toBe(first);
    expect(subjects(d.commits)).toEqual(['add a', 'change readme', 'drop b']);
    expect(d.total_commits).toBe(3);
    expect(d.head).toBe(d.commits[2].id);
    expect(d.diff_truncated).toBe(false);
    // main.txt is the base's own change: not in a three-dot compare; b.txt came and went
    expect(d.files.map((f: any) => [f.path, f.status, f.additions, f.deletions, f.truncated])).toEqual([
      ['README', 'modified', 1, 0, false],
      ['a.txt', 'added', 1, 0, false],
    ]);
    expect(d.files[0].diff).toMatch(/^@@ .* @@\n hello\n\+more\n$/);

    // a plain `/` in a name, a tag-less commit prefix as the base, the reverse direction
    const plain = await compare(`${encodeURIComponent(main)}...${topic}`);
    expect(plain.body.data.head).toBe(d.head);
    const byId = await compare(`${first.slice(0, 12)}...${encodeURIComponent(topic)}`);
    expect(byId.status).toBe(200);
    expect(byId.body.data.total_commits).toBe(3);
    const back = await compare(`${encodeURIComponent(topic)}...${encodeURIComponent(main)}`);
    expect(subjects(back.body.data.commits)).toEqual(['mainline moves']);
    expect(back.body.data.files.map((f: any) => f.path)).toEqual(['main.txt']);
    const same = await compare(`${d.head}...${d.head}`);
    expect(same.body.data).toMatchObject({ total_commits: 0, commits: [], files: [], merge_base: d.head });

    // the earlier variant names the commits by node, short_node and rev (the log's numbers)
    const earlier = { 'x-svc-api-variant': 'earlier' };
    const range = `${encodeURIComponent(main)}...${encodeURIComponent(topic)}`;
    const old = await owner.client.request('GET', `${repo.api}/compare/${range}`, undefined, earlier);
    expect(old.status).toBe(200);
    expect(old.headers.get('x-svc-api-variant')).toBe('earlier');
    const log = await owner.client.request(
      'GET',
      `${repo.api}/log?rev=${encodeURIComponent(topic)}`,
      undefined,
      earlier,
    );
    const revOf = new Map(log.body.data.map((c: any) => [c.node, c.rev]));
    expect(old.body.data.commits.map((c: any) => [c.node, c.short_node, c.rev, 'id' in c])).toEqual(
      d.commits.map((c: any) => [c.id, c.short_id, revOf.get(c.id), false]),
    );
    expect(old.body.data.files).toEqual(d.files);
  });

  test('when a range is malformed or names nothing, then 400 or 404 with the error envelope', async () => {
    for (const bad of ['main..topic', `...${main}`, `${encodeURIComponent(main)}...`, 'a...b...c']) {
      expectError(await compare(bad), 400, 'validation_failed');
    }
    expect((await compare('a%ZZ...b')).status).toBe(400);
    const missing = await compare(`${encodeURIComponent(main)}...nope`);
    expectError(missing, 404, 'not_found');
    expect(missing.body.error.message).toContain('"nope"');
    expect((await compare(`gone...${encodeURIComponent(main)}`)).body.error.message).toContain('base "gone"');
    expect((await s.anon.get(`/api/v1/repos/${org}/nothere/compare/a...b`)).status).toBe(404);
  });

  test('when a pull request is read, then its commits and files page; merged and closed ones keep their range', async () => {
    const pr = await owner.client.post(`${repo.api}/pulls`, { title: 'Topic', source_ref: topic });
    expect(pr.status).toBe(201);
    const n = pr.body.data.number;
    const commits = await s.anon.get(`${repo.api}/pulls/${n}/commits?per_page=2&page=2`);
    expect(commits.status).toBe(200);
    expect(subjects(commits.body.data)).toEqual(['drop b']);
    expect(commits.body.pagination).toEqual({ page: 2, per_page: 2, total: 3 });
    const earlier = await s.anon.request('GET', `${repo.api}/pulls/${n}/commits`, undefined, {
      'x-svc-api-variant': 'earlier',
    });
    expect(earlier.status).toBe(200);
    expect(earlier.body.data.map((c: any) => [c.subject, typeof c.rev, typeof c.node, 'id' in c])).toEqual([
      ['add a', 'number', 'string', false],
      ['change readme', 'number', 'string', false],
      ['drop b', 'number', 'string', false],
    ]);
    const files = await s.anon.get(`${repo.api}/pulls/${n}/files?per_page=1`);
    expect(files.body.data.map((f: any) => f.path)).toEqual(['README']);
    expect(files.body.pagination.total).toBe(2);

    expect((await settled(owner.client, `${repo.api}/pulls/${n}`)).mergeable_state).toBe('clean');
    const m = await owner.client.post(`${repo.api}/pulls/${n}/merge`, {});
    expect(m.status).toBe(200);
    await repo.commitOn(topic, { 'later.txt': 'later\n' }, 'after the merge');
    const after = await owner.client.get(`${repo.api}/pulls/${n}/commits`);
    expect(subjects(after.body.data)).toEqual(['add a', 'change readme', 'drop b']);
    expect(
      (await owner.client.get(`${repo.api}/pulls/${n}/files`)).body.data.map((f: any) => f.path),
    ).toEqual(['README', 'a.txt']);

    await repo.commitOn('other', { 'o.txt': 'o\n' }, 'other one');
    const other = await owner.client.post(`${repo.api}/pulls`, { title: 'Other', source_ref: 'other' });
    const o = other.body.data.number;
    expect((await owner.client.patch(`${repo.api}/pulls/${o}`, { state: 'closed' })).status).toBe(200);
    await repo.commitOn('other', { 'o2.txt': 'o2\n' }, 'other two');
    expect(subjects((await owner.client.get(`${repo.api}/pulls/${o}/commits`)).body.data)).toEqual([
      'other one',
    ]);
    // an open one follows its source
    expect((await owner.client.patch(`${repo.api}/pulls/${o}`, { state: 'open' })).status).toBe(200);
    expect(subjects((await owner.client.get(`${repo.api}/pulls/${o}/commits`)).body.data)).toEqual([
      'other one',
      'other two',
    ]);
    expectError(await owner.client.get(`${repo.api}/pulls/999/files`), 404, 'not_found');
  });
});

describe('compare of a private repository and of renames', () => {
  test('when an outsider compares a private repository, then 404; a Mercurial rename is `renamed`', async () => {
    const repo = await PrRepo.create(owner, org, 'hg', { isPrivate: true });
    expect((await s.anon.get(`${repo.api}/compare/@...@`)).status).toBe(404);
    const d = repo.w.dir;
    await repo.pull();
    await ok('hg', ['update', '-q', '-r', '@'], d);
    await ok('hg', ['bookmarks', '--inactive'], d);
    await ok('hg', ['mv', 'README', 'README.txt'], d);
    await ok('hg', ['commit', '-q', '-m', 'rename'], d);
    await ok('hg', ['bookmark', '-f', 'moved'], d);
    await ok('hg', ['push', '-q', '-f', '-B', 'moved', withCreds(repo.w.url, repo.w.token)], d);
    const r = await owner.client.get(`${repo.api}/compare/@...moved`);
    expect(r.status).toBe(200);
    expect(r.body.data.files).toEqual([
      {
        path: 'README.txt',
        previous_path: 'README',
        status: 'renamed',
        additions: 0,
        deletions: 0,
        diff: '',
        truncated: false,
      },
    ]);
  });
});
