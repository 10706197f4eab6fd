import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer, type NewRepo } from '../helpers/factories.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import { outboxEvents } from '../helpers/outbox.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

/** A repository created without a `vcs`: Mercurial is the default. */
async function repoOf(isPrivate = false): Promise<NewRepo> {
  const repo = await newRepo(owner, org, { isPrivate });
  expect(repo.data.vcs).toBe('hg');
  return repo;
}

/** A clone whose default path carries the token (hg does not store URL passwords itself). */
async function workingCopy(clone: string, token = owner.token): Promise<string> {
  const dir = await tempDir();
  await ok('hg', ['clone', '-q', withCreds(clone, token), `${dir}/w`], dir);
  await writeFile(`${dir}/w`, '.hg/hgrc', `[paths]\ndefault = ${withCreds(clone, token)}\n`);
  return `${dir}/w`;
}

describe('Mercurial over HTTP', () => {
  test('when commits are pushed on the default line, then an anonymous default-branch push event is recorded', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await writeFile(w, 'README', 'hello\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'first\n\nbody text'], w);
    await writeFile(w, 'README', 'hello again\n');
    await ok('hg', ['commit', '-q', '-m', 'second'], w);
    await ok('hg', ['push', '-q'], w);

    const tip = (await ok('hg', ['log', '-r', 'tip', '-T', '{node}'], w)).trim();
    const [e, ...more] = await outboxEvents(s, repo.id);
    expect(more).toEqual([]);
    expect(e!.event_type).toBe('push');
    expect(e!.payload).toMatchObject({
      ref: 'default',
      ref_type: 'branch',
      default: true,
      before: '',
      after: tip,
      created: true,
      deleted: false,
      total_commits: 2,
      truncated: false,
    });
    expect(e!.payload.commits[0]).toEqual({
      id: tip,
      short_id: tip.slice(0, 12),
      message: 'second',
      subject: 'second',
      author: { name: 'Ada Lovelace', email: 'ada@example.test', date: expect.stringMatching(/Z$/) },
      url: `${s.url}/api/v1/repos/${org}/${repo.name}/changeset/${tip}`,
    });
    expect(e!.payload.commits[1]).toMatchObject({ message: 'first\n\nbody text', subject: 'first' });

    const other = await workingCopy(repo.clone);
    expect(await ok('hg', ['log', '-T', '{desc|firstline}\n'], other)).toBe('second\nfirst\n');
  });

  test('when a bookmark is pushed, then the event has ref_type bookmark and changegroup tips', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await writeFile(w, 'a', 'a\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'base'], w);
    await ok('hg', ['push', '-q'], w);
    const oldTip = (await ok('hg', ['log', '-r', 'tip', '-T', '{node}'], w)).trim();
    await ok('hg', ['bookmark', 'feature'], w);
    await writeFile(w, 'b', 'b\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'feature work'], w);
    await ok('hg', ['push', '-q', '-B', 'feature'], w);
    const tip = (await ok('hg', ['log', '-r', 'tip', '-T', '{node}'], w)).trim();
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => [e.event_type, e.payload.ref, e.payload.ref_type])).toEqual([
      ['push', 'default', 'branch'],
      ['push', 'feature', 'bookmark'],
    ]);
    expect(events[1]!.payload).toMatchObject({
      default: false,
      created: true,
      before: '',
      after: tip,
      total_commits: 1,
    });
    expect(events[1]!.payload.commits[0].id).toBe(tip);
    expect(oldTip).not.toBe(tip);

    // moving the bookmark again: before is the tip before this push
    await writeFile(w, 'b', 'b2\n');
    await ok('hg', ['commit', '-q', '-m', 'more feature work'], w);
    await ok('hg', ['push', '-q', '-B', 'feature'], w);
    const again = (await outboxEvents(s, repo.id))[2]!;
    expect(again.payload).toMatchObject({ ref: 'feature', created: false, before: tip, total_commits: 1 });
  });

  test('when only a bookmark is pushed (no new changesets), then a bookmark push event with no commits is recorded', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await writeFile(w, 'a', 'a\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'base'], w);
    await ok('hg', ['push', '-q'], w);
    const tip = (await ok('hg', ['log', '-r', 'tip', '-T', '{node}'], w)).trim();
    await ok('hg', ['bookmark', '-r', tip, 'release-1'], w);
    // hg exits 1 ("no changes found") although it exports the bookmark
    const pushed = await sh('hg', ['push', '-B', 'release-1'], w);
    expect(pushed.stdout).toContain('exporting bookmark release-1');
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => [e.event_type, e.payload.ref, e.payload.ref_type])).toEqual([
      ['push', 'default', 'branch'],
      ['push', 'release-1', 'bookmark'],
    ]);
    expect(events[1]!.payload).toMatchObject({
      created: true,
      after: tip,
      commits: [],
      head_commit: null,
      total_commits: 0,
      truncated: false,
    });
  });

  test('when a tag is applied and pushed, then a tag event names the tagged changeset', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await writeFile(w, 'a', 'a\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'release me'], w);
    const tagged = (await ok('hg', ['log', '-r', '.', '-T', '{node}'], w)).trim();
    await ok('hg', ['tag', 'v1.0'], w);
    await ok('hg', ['push', '-q'], w);
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => e.event_type)).toEqual(['push', 'tag']);
    expect(events[0]!.payload.total_commits).toBe(2);
    expect(events[1]!.payload).toEqual({
      ref: 'v1.0',
      ref_type: 'tag',
      created: true,
      target: tagged,
      commit: expect.objectContaining({ id: tagged, subject: 'release me' }),
    });
  });

  test('when 60 changesets are pushed, then 50 are listed newest first and truncated is true', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await ok('hg', ['debugbuilddag', '+60'], w); // 60 linear changesets "r0".."r59"
    await ok('hg', ['push', '-q'], w);
    const [e] = await outboxEvents(s, repo.id);
    expect(e!.payload.total_commits).toBe(50);
    expect(e!.payload.truncated).toBe(true);
    expect(e!.payload.commits[0].subject).toBe('r59');
    expect(e!.payload.commits[49].subject).toBe('r10');
  });

  test('when one push brings 500, 50 and 4 changesets to three named branches, then each event lists its newest 50 (at most), truncated only past 50, in the order the branches first appear', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    // r0 on default; r1..r500 on "left"; r501..r550 on "right" (from r0); r551..r553 on default
    await ok('hg', ['debugbuilddag', '+1 :base @left +500 @right <base +50 @default <base +3'], w);
    await ok('hg', ['push', '-q', '--new-branch'], w);
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => [e.event_type, e.payload.ref])).toEqual([
      ['push', 'default'],
      ['push', 'left'],
      ['push', 'right'],
    ]);
    const [def, left, right] = events.map((e) => e.payload);
    const subjects = (p: { commits: { subject: string }[] }) => p.commits.map((c) => c.subject);
    expect(def).toMatchObject({ created: true, default: true, total_commits: 4, truncated: false });
    expect(subjects(def)).toEqual(['r553', 'r552', 'r551', 'r0']);
    expect(left).toMatchObject({ created: true, default: false, total_commits: 50, truncated: true });
    expect(subjects(left)[0]).toBe('r500');
    expect(subjects(left)[49]).toBe('r451');
    expect(left.head_commit).toEqual(left.commits[0]);
    expect(right).toMatchObject({ total_commits: 50, truncated: false });
    expect([subjects(right)[0], subjects(right)[49]]).toEqual(['r550', 'r501']);
  });

  test('when pushing with a read-only token, then the push fails with the reason shown by hg and nothing is recorded', async () => {
    const repo = await repoOf();
    const reader = await s.newUser(undefined, { scopes: ['repo:read'] });
    await s.addMember(org, reader);
    const w = await workingCopy(repo.clone, reader.token);
    await writeFile(w, 'a', 'a\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'nope'], w);
    const push = await sh('hg', ['push'], w);
    expect(push.code).not.toBe(0);
    expect(push.stderr).toBe('abort: HTTP Error 403: token lacks the repo:write scope\n');
    expect(await outboxEvents(s, repo.id)).toEqual([]);
  });

  test('when the repository is private, then anonymous clone fails and a member clones', async () => {
    const repo = await repoOf(true);
    const dir = await tempDir();
    const anon = await sh('hg', ['clone', repo.clone, `${dir}/a`], dir);
    expect(anon.code).not.toBe(0);
    const member = await sh('hg', ['clone', withCreds(repo.clone, owner.token), `${dir}/b`], dir);
    expect(member.code).toBe(0);
  });
});

describe('Mercurial pushes trigger pipelines', () => {
  test('when a bookmark push carries .pipeline.yml, then a pipeline runs on the bookmark head', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await ok('hg', ['bookmark', '@'], w);
    await writeFile(w, '.pipeline.yml', 'steps:\n  - name: t\n    image: alpine\n    commands: [echo hi]\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'ci'], w);
    await ok('hg', ['push', '-q', '-B', '@'], w);
    const node = (await ok('hg', ['log', '-r', '@', '-T', '{node}'], w)).trim();
    const p = await s.anon.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`);
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ commit_node: node, branch: '@', event: 'push', status: 'pending' });
    expect(p.body.steps).toHaveLength(1);
  });
});

describe('Mercurial wire protocol: writes hidden in read commands', () => {
  test('when a read-only caller sends a batch with pushkey (GET or POST), then no bookmark moves', async () => {
    const repo = await repoOf();
    const w = await workingCopy(repo.clone);
    await writeFile(w, 'a', 'a\n');
    await ok('hg', ['commit', '-q', '-A', '-m', 'base'], w);
    await ok('hg', ['push', '-q'], w);
    const node = (await ok('hg', ['log', '-r', 'tip', '-T', '{node}'], w)).trim();
    const reader = await s.newUser(undefined, { scopes: ['repo:read'] });
    await s.addMember(org, reader);
    const cmds = `pushkey namespace=bookmarks,key=evil,old=,new=${node}`;
    const auth = `Basic ${Buffer.from(`x:${reader.token}`).toString('base64')}`;
    const args = new URLSearchParams({ cmds }).toString();
    // as a GET (arguments in headers) and as a POST (httppostargs: arguments in the body)
    const get = await fetch(`${repo.clone}?cmd=batch`, {
      headers: { authorization: auth, 'x-hgarg-1': args },
    });
    await get.arrayBuffer();
    const r = await fetch(`${repo.clone}?cmd=batch`, {
      method: 'POST',
      headers: {
        authorization: auth,
        'x-hgargs-post': String(Buffer.byteLength(args)),
        'content-type': 'application/mercurial-0.1',
      },
      body: args,
    });
    await r.arrayBuffer();
    const d = await tempDir();
    await ok('hg', ['clone', '-q', withCreds(repo.clone, owner.token), `${d}/c`], d);
    expect(await ok('hg', ['bookmarks', '-T', '{bookmark}\n'], `${d}/c`)).not.toContain('evil');
  });
});
