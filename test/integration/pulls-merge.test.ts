import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { withOrgServer } from '../helpers/factories.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { MAINLINE, PrRepo, settled } from '../helpers/pulls.ts';
import { ok, sh, withCreds } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/**
 * Pull requests of all three kinds through the stock clients: open without a target, mergeability
 * on read, merges (fast-forward, merge commit, squash, Fossil's merge check-in, Mercurial's
 * bookmark), conflicts, guards, manual merges, and the events of each.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({ TRIAD_PULL_CHECK_BUDGET_MS: '60000' }, (w) => ({ s, owner, org } = w));

const ZEROS = 'a'.repeat(40);

async function open(repo: PrRepo, source: string, title = `PR ${source}`): Promise<any> {
  const r = await owner.client.post(`${repo.api}/pulls`, { title, source_ref: source });
  expect(r.status).toBe(201);
  return r.body.data;
}

const types = async (repo: PrRepo) => (await outboxEvents(s, repo.id)).map((e) => e.event_type);

describe.each(['git', 'hg', 'fossil'] as VcsKind[])('%s pull requests', (kind) => {
  let repo: PrRepo;
  beforeAll(async () => {
    repo = await PrRepo.create(owner, org, kind);
  });

  test('when a one-commit PR without a target is opened and merged, then the mainline has the file and push + merged events are recorded', async () => {
    await repo.commitOn('feature', { 'feature.txt': 'feature\n' }, 'add feature');
    const pr = await open(repo, 'feature');
    expect(pr).toMatchObject({
      number: 1,
      status: 'open',
      source_ref: 'feature',
      target_ref: MAINLINE[kind],
      ref_type: kind === 'hg' ? 'bookmark' : 'branch',
      author: { id: owner.id, username: owner.username },
      merged_by: null,
      merge_commit: null,
      comments_count: 0,
      closed_at: null,
    });
    const read = await settled(owner.client, `${repo.api}/pulls/1`);
    expect(read).toMatchObject({
      mergeable_state: 'clean',
      conflicted_files: [],
      commits_ahead: 1,
      commits_behind: 0,
    });
    expect(read.comments).toEqual([]);
    const before = (await outboxEvents(s, repo.id)).length;

    const m = await owner.client.post(`${repo.api}/pulls/1/merge`, {});
    expect(m.status).toBe(200);
    expect(m.body.data).toMatchObject({ status: 'merged', merged_by: { id: owner.id } });
    expect(m.body.data.merged_at).not.toBeNull();
    expect(m.body.data.closed_at).not.toBeNull();
    const mergeCommit = m.body.data.merge_commit as string;
    if (kind === 'fossil') {
      // Fossil cannot move a branch: even without divergence the merge is a new check-in on
      // trunk, with the source head as its merge parent
      expect(mergeCommit).not.toBe(read.head_commit);
      expect(await repo.parents(mergeCommit)).toBe(2);
    } else {
      // git fast-forwards the branch, Mercurial moves the `@` bookmark to the source head
      expect(mergeCommit).toBe(read.head_commit);
    }
    expect(await repo.fileAt(owner.client, MAINLINE[kind], 'feature.txt')).toBe('feature\n');
    const after = (await outboxEvents(s, repo.id)).slice(before);
    const push = after.find((e) => e.event_type === 'push' && e.payload.ref === MAINLINE[kind]);
    expect(push?.payload).toMatchObject({ ref: MAINLINE[kind], default: true });
    expect(push?.sender_id).toBe(owner.id);
    const merged = after.find((e) => e.event_type === 'pull_request.merged');
    expect(merged?.payload).toMatchObject({
      action: 'merged',
      pull_request: { number: 1, status: 'merged', merge_commit: mergeCommit },
      sender: { id: owner.id },
      repository: { id: repo.id, name: repo.name, org },
    });
    expect(await types(repo)).toContain('pull_request.opened');

    // the list filters by status (default open)
    expect((await owner.client.get(`${repo.api}/pulls`)).body.data).toEqual([]);
    const list = await owner.client.get(`${repo.api}/pulls?status=merged`);
    expect(list.body.data.map((p: any) => p.number)).toEqual([1]);
    // a merged PR merges no more
    const again = await owner.client.post(`${repo.api}/pulls/1/merge`, {});
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('not_open');
  });

  test('when the target diverged, then ff-only is refused and merge makes a merge commit with both sides', async () => {
    await repo.commitOn('diverge', { 'side.txt': 'side\n' }, 'side change');
    await repo.commitOn(MAINLINE[kind], { 'main2.txt': 'main\n' }, 'main change');
    const pr = await open(repo, 'diverge');
    const read = await settled(owner.client, `${repo.api}/pulls/${pr.number}`);
    expect(read).toMatchObject({ mergeable_state: 'clean', commits_ahead: 1, commits_behind: 1 });

    const ff = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, { style: 'ff-only' });
    if (kind === 'fossil') {
      // a diverged trunk cannot take the source's files as they are either
      expect([409]).toContain(ff.status);
    } else expect(ff.status).toBe(409);
    expect(ff.body.error.code).toBe('not_fast_forward');
    const guard = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, { expected_head: ZEROS });
    expect(guard.status).toBe(409);
    expect(guard.body.error.code).toBe('head_moved');
    const tguard = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, {
      expected_head: read.head_commit,
      expected_target_head: ZEROS,
    });
    expect(tguard.status).toBe(409);
    expect(tguard.body.error.code).toBe('target_moved');
    expect((await owner.client.get(`${repo.api}/pulls/${pr.number}`)).body.data.status).toBe('open');

    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, {
      expected_head: read.head_commit,
      expected_target_head: read.base_commit,
      message: 'Merge the side',
    });
    expect(m.status).toBe(200);
    const mc = m.body.data.merge_commit as string;
    expect(mc).not.toBe(read.head_commit);
    expect(mc).not.toBe(read.base_commit);
    expect(await repo.parents(mc)).toBe(2);
    const cs = await owner.client.get(`${repo.api}/changeset/${mc}`);
    expect(cs.status).toBe(200);
    expect(JSON.stringify(cs.body.data)).toContain('Merge the side');
    expect(await repo.fileAt(owner.client, MAINLINE[kind], 'side.txt')).toBe('side\n');
    expect(await repo.fileAt(owner.client, MAINLINE[kind], 'main2.txt')).toBe('main\n');
  });

  test('when both sides change the same line, then the PR reads conflict with the path and a merge is 409 changing nothing', async () => {
    await repo.commitOn('clash', { README: 'theirs\n' }, 'their readme');
    await repo.commitOn(MAINLINE[kind], { README: 'ours\n' }, 'our readme');
    const pr = await open(repo, 'clash');
    const read = await settled(owner.client, `${repo.api}/pulls/${pr.number}`);
    expect(read).toMatchObject({ mergeable_state: 'conflict', conflicted_files: ['README'] });
    const before = await outboxEvents(s, repo.id);
    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, {});
    expect(m.status).toBe(409);
    expect(m.body.error).toMatchObject({ code: 'merge_conflict', conflicted_files: ['README'] });
    expect(await outboxEvents(s, repo.id)).toHaveLength(before.length);
    const after = await settled(owner.client, `${repo.api}/pulls/${pr.number}`);
    expect(after).toMatchObject({
      status: 'open',
      base_commit: read.base_commit,
      head_commit: read.head_commit,
    });
    expect(await repo.fileAt(owner.client, MAINLINE[kind], 'README')).toBe('ours\n');
    // closed by its author: an event, and it may be reopened
    const closed = await owner.client.patch(`${repo.api}/pulls/${pr.number}`, { state: 'closed' });
    expect(closed.body.data).toMatchObject({ status: 'closed' });
    expect(await types(repo)).toContain('pull_request.closed');
  });

  test('when a two-commit PR is squashed with delete_source, then one single-parent commit lands and the source ref is gone', async () => {
    await repo.commitOn('squashme', { 'sq1.txt': 'one\n' }, 'sq one');
    await repo.commitOn('squashme', { 'sq2.txt': 'two\n' }, 'sq two');
    const pr = await open(repo, 'squashme');
    const read = await settled(owner.client, `${repo.api}/pulls/${pr.number}`);
    expect(read.commits_ahead).toBe(2);
    const m = await owner.client.post(`${repo.api}/pulls/${pr.number}/merge`, {
      style: 'squash',
      delete_source: true,
    });
    expect(m.status).toBe(200);
    expect(m.body.data).toMatchObject({ status: 'merged' });
    expect(m.body.data.merge_commit).not.toBe(read.head_commit);
    expect(await repo.parents(m.body.data.merge_commit)).toBe(1);
    expect(await repo.fileAt(owner.client, MAINLINE[kind], 'sq2.txt')).toBe('two\n');
    const gone = await owner.client.post(`${repo.api}/pulls`, { title: 'again', source_ref: 'squashme' });
    expect(gone.status).toBe(404);
    expect(gone.body.error.message).toContain('squashme');
  });

  test('when the source is the default line and delete_source is asked, then the merge lands and the default line stays', async () => {
    await repo.commitOn('stable', { 'stable.txt': 'stable\n' }, 'a stable line');
    await repo.commitOn(MAINLINE[kind], { 'fix.txt': 'fix\n' }, 'a fix on the mainline');
    const r = await owner.client.post(`${repo.api}/pulls`, {
      title: 'back-port the fix',
      source_ref: MAINLINE[kind],
      target_ref: 'stable',
    });
    expect(r.status).toBe(201);
    const read = await settled(owner.client, `${repo.api}/pulls/${r.body.data.number}`);
    expect(read).toMatchObject({ mergeable_state: 'clean', commits_ahead: 1 });
    const m = await owner.client.post(`${repo.api}/pulls/${read.number}/merge`, { delete_source: true });
    expect(m.status).toBe(200);
    expect(m.body.data).toMatchObject({ status: 'merged' });
    expect(await repo.fileAt(owner.client, 'stable', 'fix.txt')).toBe('fix\n');
    // the default line is never deleted (Fossil: never closed): the stock client still lists it,
    // at the head it had
    expect(await repo.heads()).toEqual(expect.arrayContaining([MAINLINE[kind], 'stable']));
    const main = await owner.client.get(`${repo.api}/changeset/${encodeURIComponent(MAINLINE[kind])}`);
    expect(main.status).toBe(200);
    expect(main.body.data.id).toBe(read.head_commit);
  });

  test('when a client merges the source into the target and pushes, then the PR is marked merged by the pusher', async () => {
    await repo.commitOn('manual', { 'manual.txt': 'manual\n' }, 'manual change');
    const pr = await open(repo, 'manual');
    await repo.pull();
    const d = repo.w.dir;
    const url = withCreds(repo.w.url, repo.w.token);
    switch (kind) {
      case 'git':
        await ok('git', ['checkout', '-q', '-B', 'main', 'origin/main'], d);
        await ok('git', ['merge', '-q', '--no-edit', 'origin/manual'], d);
        await ok('git', ['push', '-q', url, 'main:refs/heads/main'], d);
        break;
      case 'hg':
        // the source descends from `@`: moving the bookmark is Mercurial's fast-forward
        await ok('hg', ['bookmark', '-f', '-r', 'manual', '@'], d);
        // exits 1 ("no changes found") although it exports the bookmark
        expect((await sh('hg', ['push', '-q', '-B', '@', url], d)).code).toBeLessThanOrEqual(1);
        break;
      case 'fossil':
        await ok('fossil', ['update', 'trunk'], d);
        await ok('fossil', ['merge', 'manual'], d);
        await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', 'merge manual'], d);
        await ok('fossil', ['push', '-B', `x:${repo.w.token}`, repo.w.url], d);
        break;
    }
    const read = (await owner.client.get(`${repo.api}/pulls/${pr.number}`)).body.data;
    expect(read).toMatchObject({ status: 'merged', merged_by: { id: owner.id } });
    expect(read.merge_commit).toMatch(/^[0-9a-f]{40,64}$/);
    const events = await outboxEvents(s, repo.id);
    const merged = events.filter(
      (e) => e.event_type === 'pull_request.merged' && e.payload.pull_request.number === pr.number,
    );
    expect(merged).toHaveLength(1);
  });
});

describe('Mercurial manual-merge detection', () => {
  test('when a PR from a bookmark already at the mainline head meets a push to the mainline, then it stays open and behind', async () => {
    const repo = await PrRepo.create(owner, org, 'hg');
    await repo.pull();
    const d = repo.w.dir;
    await ok('hg', ['bookmark', '-f', '-r', '@', 'level'], d);
    // exits 1 ("no changes found") although it exports the bookmark
    expect(
      (await sh('hg', ['push', '-q', '-B', 'level', withCreds(repo.w.url, repo.w.token)], d)).code,
    ).toBeLessThanOrEqual(1);
    const pr = await open(repo, 'level');
    await repo.commitOn('@', { 'later.txt': 'later\n' }, 'the mainline moves on');
    expect(await settled(owner.client, `${repo.api}/pulls/${pr.number}`)).toMatchObject({
      status: 'open',
      mergeable_state: 'behind',
      merge_commit: null,
    });
    expect(await types(repo)).not.toContain('pull_request.merged');
  });
});
