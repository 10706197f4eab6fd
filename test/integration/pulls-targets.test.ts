import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { MAINLINE, PrRepo, settled } from '../helpers/pulls.ts';
import { ok, sh, withCreds, writeFile } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/**
 * Pull request targets beyond the mainline a test repository is usually given: a fresh Mercurial
 * repository without an `@` bookmark (the default target `@` is the default named branch's head,
 * the merge creates `@`), one with `@`, a Mercurial named branch as the target (the merge commits
 * on it), a Fossil branch other than `trunk` and a Git `develop` branch (also in a repository that
 * has no `main`), through the stock clients and the API.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({ TRIAD_PULL_CHECK_BUDGET_MS: '60000' }, (w) => ({ s, owner, org } = w));

async function open(repo: PrRepo, body: Record<string, string>): Promise<any> {
  const r = await owner.client.post(`${repo.api}/pulls`, { title: `PR ${body.source_ref}`, ...body });
  expect(r.status).toBe(201);
  return r.body.data;
}

const eventsOf = async (repo: PrRepo, type: string, number: number) =>
  (await outboxEvents(s, repo.id)).filter(
    (e) => e.event_type === type && e.payload.pull_request?.number === number,
  );

/** The stock `hg` client in the repository's working copy. */
function hgClient(repo: PrRepo) {
  const d = repo.w.dir;
  const url = withCreds(repo.w.url, repo.w.token);
  const hg = (...a: string[]) => ok('hg', a, d);
  return {
    hg,
    /** Commits the files on the working copy's parent (no bookmark moves unless active). */
    async commit(files: Record<string, string>, message: string): Promise<string> {
      for (const [f, c] of Object.entries(files)) await writeFile(d, f, c);
      await hg('commit', '-q', '-A', '-m', message);
      return (await hg('log', '-r', '.', '-T', '{node}')).trim();
    },
    /** Pushes (new heads and branches allowed); exit 1 is "no changes found". */
    async push(...args: string[]): Promise<void> {
      const r = await sh('hg', ['push', '-q', '-f', ...args, url], d);
      if (r.code > 1) throw new Error(`hg push: ${r.stderr}`);
    },
    branchOf: async (rev: string) => (await hg('log', '-r', rev, '-T', '{branch}')).trim(),
  };
}

describe('Mercurial pull requests without an @ bookmark', () => {
  test('a fresh repository: the default target @ opens, follows pushes, merges with a merge commit on default and creates @ there', async () => {
    const repo = await PrRepo.create(owner, org, 'hg', { empty: true });
    const c = hgClient(repo);
    const first = await c.commit({ README: 'hello\n' }, 'first');
    await c.push();
    // a feature bookmark off the first commit: while it is the default branch's head, the
    // mainline contains it
    await c.hg('bookmark', 'feature');
    const feature = await c.commit({ 'feature.txt': 'feature\n' }, 'add feature');
    await c.push('-B', 'feature');
    const pr = await open(repo, { source_ref: 'feature' });
    expect(pr).toMatchObject({
      status: 'open',
      source_ref: 'feature',
      target_ref: '@',
      ref_type: 'bookmark',
    });
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      mergeable_state: 'behind',
      head_commit: feature,
      base_commit: feature,
      commits_ahead: 0,
    });
    // naming the default named branch is the same target
    const named = await owner.client.post(`${repo.api}/pulls`, {
      title: 'named',
      source_ref: 'feature',
      target_ref: 'default',
    });
    expect(named.status).toBe(201);
    expect(named.body.data).toMatchObject({ target_ref: 'default', ref_type: 'bookmark' });
    await owner.client.patch(`${repo.api}/pulls/${named.body.data.number}`, { state: 'closed' });

    // the mainline moves on (a new head of default, no bookmark): a later push to the target
    await c.hg('update', '-q', '-r', first);
    const main = await c.commit({ 'main.txt': 'main\n' }, 'the mainline moves on');
    await c.push();
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      status: 'open',
      mergeable_state: 'clean',
      base_commit: main,
      commits_ahead: 1,
      commits_behind: 1,
    });
    // a push to the source synchronizes it
    await c.hg('update', '-q', '-r', 'feature');
    const feature2 = await c.commit({ 'feature2.txt': 'more\n' }, 'more feature');
    await c.push('-B', 'feature');
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      head_commit: feature2,
      commits_ahead: 2,
    });
    expect(await eventsOf(repo, 'pull_request.synchronized', pr.number)).toHaveLength(1);
    expect(await repo.heads()).toEqual(['feature']);

    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, { delete_source: true });
    expect(m.status).toBe(200);
    expect(m.body.data).toMatchObject({ status: 'merged', target_ref: '@', merged_by: { id: owner.id } });
    const mc = m.body.data.merge_commit as string;
    expect(await repo.parents(mc)).toBe(2);
    expect(await c.branchOf(mc)).toBe('default');
    // `@` is created at the merge, the source bookmark is gone
    expect(await repo.heads()).toEqual(['@']);
    expect((await owner.client.get(`${repo.api}/changeset/${encodeURIComponent('@')}`)).body.data.id).toBe(
      mc,
    );
    expect(await repo.fileAt(owner.client, '@', 'feature2.txt')).toBe('more\n');
    const push = (await outboxEvents(s, repo.id)).filter(
      (e) => e.event_type === 'push' && e.payload.ref === '@',
    );
    expect(push).toHaveLength(1);
    expect(push[0]!.payload).toMatchObject({ ref: '@', default: true, after: mc });
    expect(await eventsOf(repo, 'pull_request.merged', pr.number)).toHaveLength(1);
  });

  test('with an @ bookmark behind the default branch head, the default target is the bookmark', async () => {
    const repo = await PrRepo.create(owner, org, 'hg'); // `@` at the first commit
    const c = hgClient(repo);
    await repo.pull();
    const at = (await c.hg('log', '-r', '@', '-T', '{node}')).trim();
    await c.hg('update', '-q', '-r', '@');
    await c.hg('bookmarks', '--inactive');
    const newer = await c.commit({ 'newer.txt': 'newer\n' }, 'a newer default head, no bookmark');
    await c.push();
    await repo.commitOn('topic', { 'topic.txt': 'topic\n' }, 'topic');
    const pr = await open(repo, { source_ref: 'topic' });
    const read = await settled(owner.client, `${repo.api}/pulls/${pr.number}`);
    expect(read).toMatchObject({
      target_ref: '@',
      base_commit: at,
      mergeable_state: 'clean',
      commits_ahead: 1,
    });
    expect(read.base_commit).not.toBe(newer);
    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, {});
    expect(m.status).toBe(200);
    // the bookmark moves to the source head (Mercurial's fast-forward)
    expect(m.body.data.merge_commit).toBe(read.head_commit);
  });
});

describe('Mercurial named-branch targets', () => {
  test('a PR into a named branch opens, sees pushes to the branch, is detected when merged by a client, and merges on the branch', async () => {
    const repo = await PrRepo.create(owner, org, 'hg');
    const c = hgClient(repo);
    await repo.pull();
    await c.hg('update', '-q', '-r', '@');
    await c.hg('bookmarks', '--inactive');
    await c.hg('branch', '-q', 'stable');
    const stable = await c.commit({ 'stable.txt': 'stable\n' }, 'open stable');
    await c.push();
    await repo.commitOn('fix', { 'fix.txt': 'fix\n' }, 'a fix');
    await repo.commitOn('manual', { 'manual.txt': 'manual\n' }, 'a manual change');

    const pr = await open(repo, { source_ref: 'fix', target_ref: 'stable' });
    expect(pr).toMatchObject({ target_ref: 'stable', ref_type: 'bookmark' });
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      mergeable_state: 'clean',
      base_commit: stable,
      commits_ahead: 1,
      commits_behind: 1,
    });
    const other = await open(repo, { source_ref: 'manual', target_ref: 'stable' });

    // a client merges `manual` into stable and pushes the branch (no bookmark moves)
    await c.hg('update', '-q', '-r', 'stable');
    await c.hg('merge', '-q', '-r', 'manual');
    const merged = await c.commit({}, 'merge manual into stable');
    await c.push();
    const detected = (await owner.client.get(`${repo.api}/pulls/${other.number}`)).body.data;
    expect(detected).toMatchObject({ status: 'merged', merged_by: { id: owner.id }, merge_commit: merged });
    // the other one saw the push to its target
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      status: 'open',
      base_commit: merged,
      commits_behind: 3,
    });

    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, { style: 'squash' });
    expect(m.status).toBe(200);
    expect(m.body.data).toMatchObject({ status: 'merged', target_ref: 'stable' });
    const mc = m.body.data.merge_commit as string;
    await repo.pull();
    // one parent: the branch head it was squashed onto
    expect((await c.hg('log', '-r', mc, '-T', '{p1.node} {p2.node}')).trim()).toBe(
      `${merged} ${'0'.repeat(40)}`,
    );
    expect(await c.branchOf(mc)).toBe('stable');
    expect(await repo.fileAt(owner.client, 'stable', 'fix.txt')).toBe('fix\n');
    expect(await repo.fileAt(owner.client, '@', 'fix.txt')).toBeUndefined();
    // no bookmark was made for the branch
    expect((await repo.heads()).sort()).toEqual(['@', 'fix', 'manual']);
    const push = (await outboxEvents(s, repo.id)).filter(
      (e) => e.event_type === 'push' && e.payload.ref === 'stable',
    );
    expect(push.at(-1)?.payload).toMatchObject({ ref: 'stable', default: false, after: mc });
    expect(await eventsOf(repo, 'pull_request.merged', pr.number)).toHaveLength(1);
  });
});

describe.each(['git', 'fossil'] as VcsKind[])('%s: a target other than the mainline', (kind) => {
  test('a PR into develop opens, merges there and leaves the mainline alone', async () => {
    const repo = await PrRepo.create(owner, org, kind);
    await repo.commitOn('develop', { 'dev.txt': 'dev\n' }, 'a develop line');
    await repo.commitOn('topic', { 'topic.txt': 'topic\n' }, 'topic', 'develop');
    await repo.commitOn('develop', { 'dev2.txt': 'dev2\n' }, 'develop moves on');
    const pr = await open(repo, { source_ref: 'topic', target_ref: 'develop' });
    expect(pr).toMatchObject({ target_ref: 'develop', ref_type: 'branch' });
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      mergeable_state: 'clean',
      commits_ahead: 1,
      commits_behind: 1,
    });
    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, { delete_source: true });
    expect(m.status).toBe(200);
    expect(m.body.data).toMatchObject({ status: 'merged', target_ref: 'develop' });
    expect(await repo.parents(m.body.data.merge_commit)).toBe(2);
    expect(await repo.fileAt(owner.client, 'develop', 'topic.txt')).toBe('topic\n');
    expect(await repo.fileAt(owner.client, MAINLINE[kind], 'topic.txt')).toBeUndefined();
    expect(await repo.heads()).not.toContain('topic');
    expect(await repo.heads()).toEqual(expect.arrayContaining([MAINLINE[kind], 'develop']));
  });
});

describe('Git without a main branch', () => {
  test('a repository whose only branch is develop: a PR naming develop works, the default target answers 404 naming main', async () => {
    const repo = await PrRepo.create(owner, org, 'git', { empty: true });
    const d = repo.w.dir;
    const url = withCreds(repo.w.url, repo.w.token);
    await ok('git', ['checkout', '-q', '-b', 'develop'], d);
    await writeFile(d, 'README', 'hello\n');
    await ok('git', ['add', '-A'], d);
    await ok('git', ['commit', '-q', '-m', 'first'], d);
    await ok('git', ['push', '-q', url, 'develop:refs/heads/develop'], d);
    await repo.commitOn('topic', { 'topic.txt': 'topic\n' }, 'topic', 'develop');
    const none = await owner.client.post(`${repo.api}/pulls`, { title: 't', source_ref: 'topic' });
    expect(none.status).toBe(404);
    expect(none.body.error.message).toContain('"main"');
    const pr = await open(repo, { source_ref: 'topic', target_ref: 'develop' });
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      mergeable_state: 'clean',
      commits_ahead: 1,
      commits_behind: 0,
    });
    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, {});
    expect(m.status).toBe(200);
    // a fast-forward
    expect(m.body.data.merge_commit).toBe(pr.head_commit);
    expect(await repo.fileAt(owner.client, 'develop', 'topic.txt')).toBe('topic\n');
  });
});
