import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { outboxEvents } from '../helpers/outbox.ts';
import { PrRepo, settled } from '../helpers/pulls.ts';
import { TWO_STEPS } from '../helpers/ci.ts';
import { ok, withCreds } from '../helpers/vcs.ts';
import { reachFixture } from '../helpers/reach.ts';

/**
 * The pull request API on Git repositories: validation, the permission matrix, statuses and their
 * events, comments, `checking` within a zero time budget, source pushes (`synchronized`) and CI.
 * The server answers every read within a budget of 0 ms, so a cold check always answers
 * `checking` and the next read after it finished is served from the cache.
 */
let s: TestServer;
let owner: TestUser;
let author: TestUser;
let member: TestUser;
let outsider: TestUser;
let readOnly: TestUser;
let org: string;
let repo: PrRepo;
beforeAll(async () => {
  s = await startTestServer({ TRIAD_PULL_CHECK_BUDGET_MS: '0' });
  owner = await s.newUser();
  author = await s.newUser();
  member = await s.newUser();
  outsider = await s.newUser();
  readOnly = await s.newUser(undefined, { scopes: ['repo:read', 'pulls:read', 'issues:write'] });
  org = await s.newOrg(owner);
  await s.addMember(org, author);
  await s.addMember(org, member);
  await s.addMember(org, readOnly);
  repo = await PrRepo.create(owner, org, 'git');
  await repo.commitOn('topic', { 'topic.txt': 'topic\n' }, 'topic');
});
afterAll(async () => {
  await s.close();
});

const pulls = () => `${repo.api}/pulls`;

describe('pull request API', () => {
  test('when a request is invalid, then it is refused with a clear 4xx and nothing is created', async () => {
    const c = author.client;
    const withType = await c.post(pulls(), { title: 't', source_ref: 'topic', ref_type: 'branch' });
    expect(withType.status).toBe(400);
    expect(withType.body.error.code).toBe('validation_failed');
    const noSource = await c.post(pulls(), { title: 't', source_ref: 'nope' });
    expect(noSource.status).toBe(404);
    expect(noSource.body.error.message).toContain('"nope"');
    const noTarget = await c.post(pulls(), { title: 't', source_ref: 'topic', target_ref: 'gone' });
    expect(noTarget.status).toBe(404);
    expect(noTarget.body.error.message).toContain('"gone"');
    const same = await c.post(pulls(), { title: 't', source_ref: 'main', target_ref: 'main' });
    expect(same.status).toBe(400);
    const badStatus = await s.anon.get(`${pulls()}?status=all`);
    expect(badStatus.status).toBe(400);
    expect((await s.anon.get(`${pulls()}?status=open`)).body.pagination.total).toBe(0);
    // the spec's Limits: per_page defaults to 30 and is at most 100
    expect((await s.anon.get(pulls())).body.pagination).toMatchObject({ page: 1, per_page: 30 });
    expect((await s.anon.get(`${pulls()}?per_page=500`)).body.pagination.per_page).toBe(100);
  });

  test('when the roles try each operation, then the permission matrix holds', async () => {
    expect((await s.anon.post(pulls(), { title: 't', source_ref: 'topic' })).status).toBe(401);
    expect((await outsider.client.post(pulls(), { title: 't', source_ref: 'topic' })).status).toBe(403);
    expect((await readOnly.client.post(pulls(), { title: 't', source_ref: 'topic' })).status).toBe(403);
    const created = await author.client.post(pulls(), {
      title: 'Topic',
      body: 'please',
      source_ref: 'topic',
    });
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe(`${s.url}${repo.api}/pulls/${created.body.data.number}`);
    // budget 0: the first check is still running
    expect(created.body.data).toMatchObject({
      mergeable_state: 'checking',
      target_ref: 'main',
      ref_type: 'branch',
    });
    const n = created.body.data.number as number;
    const dup = await member.client.post(pulls(), { title: 'again', source_ref: 'topic' });
    expect(dup.status).toBe(409);

    // reads are public
    expect((await s.anon.get(`${pulls()}/${n}`)).status).toBe(200);
    const read = await settled(s.anon, `${pulls()}/${n}`);
    expect(read).toMatchObject({ mergeable_state: 'clean', commits_ahead: 1, body: 'please' });

    // update: author or org owner
    expect((await author.client.patch(`${pulls()}/${n}`, { title: 'Topic!' })).status).toBe(200);
    expect((await owner.client.patch(`${pulls()}/${n}`, { body: 'by the owner' })).status).toBe(200);
    expect((await member.client.patch(`${pulls()}/${n}`, { title: 'mine' })).status).toBe(403);
    expect((await outsider.client.patch(`${pulls()}/${n}`, { title: 'mine' })).status).toBe(403);
    expect((await s.anon.patch(`${pulls()}/${n}`, { title: 'mine' })).status).toBe(401);

    // comments: pulls:write
    const comment = await outsider.client.post(`${pulls()}/${n}/comments`, { body: 'looks good' });
    expect(comment.status).toBe(201);
    expect(comment.body.data).toMatchObject({ body: 'looks good', author: { id: outsider.id } });
    expect((await readOnly.client.post(`${pulls()}/${n}/comments`, { body: 'x' })).status).toBe(403);
    expect((await s.anon.post(`${pulls()}/${n}/comments`, { body: 'x' })).status).toBe(401);
    const detail = (await s.anon.get(`${pulls()}/${n}`)).body.data;
    expect(detail).toMatchObject({ title: 'Topic!', body: 'by the owner', comments_count: 1 });
    expect(detail.comments).toEqual([
      expect.objectContaining({ body: 'looks good', author: expect.objectContaining({ id: outsider.id }) }),
    ]);

    // merge: pulls:write and org membership
    expect((await s.anon.post(`${pulls()}/${n}/merge`, {})).status).toBe(401);
    expect((await outsider.client.post(`${pulls()}/${n}/merge`, {})).status).toBe(403);
    expect((await readOnly.client.post(`${pulls()}/${n}/merge`, {})).status).toBe(403);
    // the spec's merge takes no body: none at all means the defaults
    const merged = await member.client.post(`${pulls()}/${n}/merge`);
    expect(merged.status).toBe(200);
    expect(merged.body.data).toMatchObject({
      status: 'merged',
      merged_by: { id: member.id },
      merge_commit: read.head_commit,
    });
    const reopen = await author.client.patch(`${pulls()}/${n}`, { state: 'open' });
    expect(reopen.status).toBe(409);
    expect(reopen.body.error.code).toBe('not_open');

    const types = (await outboxEvents(s, repo.id)).map((e) => e.event_type);
    expect(types.filter((t) => t.startsWith('pull_request.'))).toEqual([
      'pull_request.opened',
      'pull_request.commented',
      'pull_request.merged',
    ]);
  });

  test('when a PR is closed and reopened, then each is an event and a second open PR of the same refs blocks reopening', async () => {
    await repo.commitOn('later', { 'later.txt': 'later\n' }, 'later');
    const first = (await author.client.post(pulls(), { title: 'first', source_ref: 'later' })).body.data;
    const closed = await author.client.patch(`${pulls()}/${first.number}`, { state: 'closed' });
    expect(closed.body.data).toMatchObject({ status: 'closed' });
    expect(closed.body.data.closed_at).not.toBeNull();
    expect((await s.anon.get(`${pulls()}?status=closed`)).body.data.map((p: any) => p.number)).toEqual([
      first.number,
    ]);
    const reopened = await owner.client.patch(`${pulls()}/${first.number}`, { state: 'open' });
    expect(reopened.body.data).toMatchObject({ status: 'open', closed_at: null });
    await author.client.patch(`${pulls()}/${first.number}`, { state: 'closed' });
    const second = await author.client.post(pulls(), { title: 'second', source_ref: 'later' });
    expect(second.status).toBe(201);
    const blocked = await author.client.patch(`${pulls()}/${first.number}`, { state: 'open' });
    expect(blocked.status).toBe(409);
    const events = (await outboxEvents(s, repo.id)).filter(
      (e) => e.payload?.pull_request?.number === first.number,
    );
    expect(events.map((e) => e.event_type)).toEqual([
      'pull_request.opened',
      'pull_request.closed',
      'pull_request.reopened',
      'pull_request.closed',
    ]);
    expect(events[1]!.payload).toMatchObject({
      action: 'closed',
      sender: { id: author.id },
      repository: { org },
    });
  });

  test('when a token cannot push or does not reach the repository, then what it may not do is refused before anything changes', async () => {
    const { mint, elsewhere: outOfReach } = await reachFixture(s, owner, member, org);
    const all = ['repo:write', 'pulls:write'];
    const pullsOnly = await mint({ scopes: ['pulls:write', 'repo:read'] });
    const elsewhere = await outOfReach(all);
    const here = await mint({ scopes: all, level: 'repo', target: `${org}/${repo.name}` });

    await repo.commitOn('guarded', { 'guarded.txt': 'guarded\n' }, 'guarded');
    const pr = (await author.client.post(pulls(), { title: 'guarded', source_ref: 'guarded' })).body.data;
    const before = await settled(owner.client, `${pulls()}/${pr.number}`);
    const events = (await outboxEvents(s, repo.id)).length;
    const merge = `${pulls()}/${pr.number}/merge`;
    // tokens of another repository or organization do not merge here, with or without delete_source
    for (const c of elsewhere) {
      for (const body of [{}, { delete_source: true }]) {
        const r = await c.post(merge, body);
        expect(r.status).toBe(403);
        expect(r.body.error).toMatchObject({ code: 'forbidden', message: expect.stringContaining('target') });
      }
    }
    // pulls:write without repo:write: delete_source is refused as a whole, nothing is merged
    const refused = await pullsOnly.post(merge, { delete_source: true });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({
      code: 'forbidden',
      message: expect.stringContaining('repo:write'),
    });
    expect(await settled(owner.client, `${pulls()}/${pr.number}`)).toMatchObject({
      status: 'open',
      head_commit: before.head_commit,
      base_commit: before.base_commit,
    });
    expect(await outboxEvents(s, repo.id)).toHaveLength(events);
    expect(await repo.heads()).toContain('guarded');

    // the merge itself needs pulls:write only (the v1 contract), and keeps the source
    const merged = await pullsOnly.post(merge, {});
    expect(merged.status).toBe(200);
    expect(merged.body.data).toMatchObject({ status: 'merged', merged_by: { id: member.id } });
    expect(await repo.heads()).toContain('guarded');

    // a repository token of this repository with repo:write deletes the source
    await repo.commitOn('gone', { 'gone.txt': 'gone\n' }, 'gone');
    const next = (await author.client.post(pulls(), { title: 'gone', source_ref: 'gone' })).body.data;
    const deleted = await here.post(`${pulls()}/${next.number}/merge`, { delete_source: true });
    expect(deleted.status).toBe(200);
    expect(await repo.heads()).not.toContain('gone');
    expect(await repo.heads()).toContain('main');
  });

  test('when the repository is private, then outsiders and anonymous callers get 404', async () => {
    const priv = await PrRepo.create(owner, org, 'git', { isPrivate: true });
    await priv.commitOn('p', { 'p.txt': 'p\n' }, 'p');
    const created = await member.client.post(`${priv.api}/pulls`, { title: 'p', source_ref: 'p' });
    expect(created.status).toBe(201);
    for (const c of [s.anon, outsider.client]) {
      expect((await c.get(`${priv.api}/pulls`)).status).toBe(404);
      expect((await c.get(`${priv.api}/pulls/1`)).status).toBe(404);
    }
    // a write needs a token first (401); with one, the repository does not exist for an outsider
    expect((await s.anon.post(`${priv.api}/pulls/1/comments`, { body: 'x' })).status).toBe(401);
    expect((await outsider.client.post(`${priv.api}/pulls/1/comments`, { body: 'x' })).status).toBe(404);
    expect((await outsider.client.post(`${priv.api}/pulls/1/merge`, {})).status).toBe(404);
    expect((await member.client.get(`${priv.api}/pulls`)).body.data).toHaveLength(1);
  });

  test('when the source carries a pipeline file and is pushed again, then CI runs for pull_request and the PR is synchronized', async () => {
    await repo.commitOn('ci', { '.pipeline.yml': TWO_STEPS, 'ci.txt': '1\n' }, 'ci one');
    const pr = (await author.client.post(pulls(), { title: 'ci', source_ref: 'ci' })).body.data;
    const list = async () => (await owner.client.get(`${repo.api}/pipelines`)).body.pipelines as any[];
    // the push made a pipeline; opening the PR on the same commit joins it
    const first = (await list()).filter((p) => p.commit_node === pr.head_commit);
    expect(first).toHaveLength(1);
    expect(first[0].events).toEqual(['push', 'pull_request']);
    expect(first[0].branch).toBe('ci');

    await repo.commitOn('ci', { 'ci.txt': '2\n' }, 'ci two');
    const read = await settled(owner.client, `${pulls()}/${pr.number}`);
    expect(read.head_commit).not.toBe(pr.head_commit);
    expect(read.commits_ahead).toBe(2);
    const second = (await list()).filter((p) => p.commit_node === read.head_commit);
    expect(second).toHaveLength(1);
    expect(second[0].events).toEqual(['push', 'pull_request']);
    const sync = (await outboxEvents(s, repo.id)).filter((e) => e.event_type === 'pull_request.synchronized');
    expect(sync).toHaveLength(1);
    expect(sync[0]!.payload).toMatchObject({
      action: 'synchronized',
      pull_request: { number: pr.number, head_commit: read.head_commit },
      sender: { id: owner.id },
    });
  });

  test('when the source is contained in the target it reads behind; when merging changes no file it reads empty', async () => {
    await repo.pull();
    await ok(
      'git',
      ['push', '-q', withCreds(repo.w.url, repo.w.token), 'refs/remotes/origin/main:refs/heads/same'],
      repo.w.dir,
    );
    const behind = (await author.client.post(pulls(), { title: 'same', source_ref: 'same' })).body.data;
    expect(await settled(s.anon, `${pulls()}/${behind.number}`)).toMatchObject({
      mergeable_state: 'behind',
      commits_ahead: 0,
    });
    const nothing = await member.client.post(`${pulls()}/${behind.number}/merge`, {});
    expect(nothing.status).toBe(409);
    expect(nothing.body.error.code).toBe('conflict');

    await repo.commitOn('dup', { 'dup.txt': 'same text\n' }, 'dup on a branch');
    await repo.commitOn('main', { 'dup.txt': 'same text\n' }, 'dup on main');
    const empty = (await author.client.post(pulls(), { title: 'dup', source_ref: 'dup' })).body.data;
    expect(await settled(s.anon, `${pulls()}/${empty.number}`)).toMatchObject({
      mergeable_state: 'empty',
      commits_ahead: 1,
      commits_behind: 1,
    });
    // main already contained the `same` PR's source before that push: nobody merged it, it stays open
    expect(await settled(s.anon, `${pulls()}/${behind.number}`)).toMatchObject({
      status: 'open',
      mergeable_state: 'behind',
      merged_by: null,
      merge_commit: null,
    });
    const merged = await outboxEvents(s, repo.id);
    expect(
      merged.filter(
        (e) => e.event_type === 'pull_request.merged' && e.payload.pull_request.number === behind.number,
      ),
    ).toEqual([]);
  });

  test('when a source is force-pushed back onto the target history, then the PR stays open; a push that contains a new source commit merges it', async () => {
    await repo.commitOn('back', { 'back.txt': 'back\n' }, 'back');
    const pr = (await author.client.post(pulls(), { title: 'back', source_ref: 'back' })).body.data;
    await repo.pull();
    const url = withCreds(repo.w.url, repo.w.token);
    await ok('git', ['push', '-q', '-f', url, 'refs/remotes/origin/main:refs/heads/back'], repo.w.dir);
    expect(await settled(s.anon, `${pulls()}/${pr.number}`)).toMatchObject({
      status: 'open',
      mergeable_state: 'behind',
      merge_commit: null,
    });
    await repo.commitOn('main', { 'main-only.txt': 'main\n' }, 'main moves on');
    expect((await s.anon.get(`${pulls()}/${pr.number}`)).body.data.status).toBe('open');

    // a new commit on the source, then merged into main by a client: a manual merge
    await repo.commitOn('back', { 'back.txt': 'back again\n' }, 'back again');
    await repo.pull();
    await ok('git', ['checkout', '-q', '-B', 'main', 'origin/main'], repo.w.dir);
    await ok('git', ['merge', '-q', '--no-edit', 'origin/back'], repo.w.dir);
    await ok('git', ['push', '-q', url, 'main:refs/heads/main'], repo.w.dir);
    const head = (await ok('git', ['rev-parse', 'HEAD'], repo.w.dir)).trim();
    expect((await s.anon.get(`${pulls()}/${pr.number}`)).body.data).toMatchObject({
      status: 'merged',
      merged_by: { id: owner.id },
      merge_commit: head,
    });
  });
});
