import { beforeAll, describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { hostedDir, withOrgServer } from '../helpers/factories.ts';
import { ok, sh, withCreds } from '../helpers/vcs.ts';
import { TWO_STEPS, commitFiles, gitRepo, type GitRepo } from '../helpers/ci.ts';
import { outboxEvents } from '../helpers/outbox.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

let member: TestUser;
let releaser: TestUser;
let repo: GitRepo;

const api = (rest = '') => `/api/v1/repos/${org}/${repo.name}/protections${rest}`;
const push = (who: TestUser, ...args: string[]) =>
  sh('git', ['push', withCreds(repo.clone, who.token), ...args], repo.work);
const remoteHeads = async () => (await ok('git', ['ls-remote', '--heads', repo.clone], repo.work)).trim();
const pipelineCount = async () =>
  (await owner.client.get(`/api/v1/repos/${org}/${repo.name}/pipelines`)).body.total as number;

/** The repository's events but `status` (a pipeline's commit status adds those of its own). */
const pushEvents = async () =>
  (await outboxEvents(s, repo.id)).filter((e) => e.event_type !== 'status').length;

/** What a refused push must leave as it was: the refs, the recorded events, the pipelines. */
async function state() {
  return {
    heads: await remoteHeads(),
    events: await pushEvents(),
    pipelines: await pipelineCount(),
  };
}

beforeAll(async () => {
  member = await s.newUser();
  releaser = await s.newUser();
  await s.addMember(org, member);
  await s.addMember(org, releaser);
  repo = await gitRepo(s, owner, org);
  await commitFiles(repo, { '.pipeline.yml': TWO_STEPS }, 'ci');
  await commitFiles(repo, { 'a.txt': 'a\n' }, 'second');
  await repo.push('main');
  const rules = [
    { pattern: 'main', fast_forward_only: true, allow_deletion: false, push: 'members' },
    { pattern: 'release/*', allow_deletion: false, push: { users: [releaser.username] } },
    { pattern: 'tmp/**', fast_forward_only: false, allow_deletion: true },
  ];
  for (const rule of rules) expect((await owner.client.post(api(), rule)).status).toBe(201);
});

describe('git pushes to protected branches', () => {
  test('when a member force-pushes a rewritten main, then git prints the rule and reason and nothing changes', async () => {
    const before = await state();
    expect(before.pipelines).toBe(1);
    await ok('git', ['reset', '-q', '--hard', 'HEAD~1'], repo.work);
    const rewritten = await commitFiles(repo, { 'b.txt': 'rewritten\n' }, 'rewritten');
    const r = await push(member, '--force', 'main');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(
      'remote: triad: push refused: branch main is protected by rule "main": only fast-forward updates are allowed',
    );
    expect(r.stderr).toMatch(/! \[remote rejected\] +main -> main \(pre-receive hook declined\)/);
    expect(await state()).toEqual(before);
    // the pushed objects were left in git's quarantine and thrown away with it
    const stored = await sh(
      'git',
      ['cat-file', '-e', rewritten],
      hostedDir(s.dataDir, { id: repo.id, vcs: 'git' }),
    );
    expect(stored.code).not.toBe(0);
    const main = before.heads.split('\t')[0]!;
    expect(
      (await sh('git', ['cat-file', '-e', main], hostedDir(s.dataDir, { id: repo.id, vcs: 'git' }))).code,
    ).toBe(0);
  });

  test('when a member pushes a fast-forward of main, then it lands with its event and pipeline', async () => {
    const before = await state();
    await ok('git', ['fetch', '-q', repo.clone, 'main'], repo.work);
    await ok('git', ['reset', '-q', '--hard', 'FETCH_HEAD'], repo.work);
    const head = await commitFiles(repo, { 'c.txt': 'c\n' }, 'forward');
    const r = await push(member, 'main');
    expect(r.code).toBe(0);
    expect(await remoteHeads()).toContain(`${head}\trefs/heads/main`);
    expect(await pushEvents()).toBe(before.events + 1);
    expect(await pipelineCount()).toBe(before.pipelines + 1);
  });

  test('when a member deletes main, then the deletion is refused with its reason', async () => {
    const before = await state();
    const r = await push(member, ':main');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('branch main is protected by rule "main": it cannot be deleted');
    expect(await state()).toEqual(before);
  });

  test('when push names users, then the named user pushes and a member is refused', async () => {
    const refused = await push(member, 'main:refs/heads/release/1');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      `branch release/1 is protected by rule "release/*": only ${releaser.username} may push to it`,
    );
    expect(await remoteHeads()).not.toContain('release/1');
    expect((await push(releaser, 'main:refs/heads/release/1')).code).toBe(0);
    expect(await remoteHeads()).toContain('refs/heads/release/1');
    // `*` stays within one segment: release/2/rc is not protected by "release/*"
    expect((await push(member, 'main:refs/heads/release/2/rc')).code).toBe(0);
    const deletion = await push(releaser, ':release/1');
    expect(deletion.stderr).toContain(
      'branch release/1 is protected by rule "release/*": it cannot be deleted',
    );
    expect(await remoteHeads()).toContain('refs/heads/release/1\n');
  });

  test('when a rule allows rewriting and deletion, then a member force-pushes and deletes under it', async () => {
    expect((await push(member, 'main:refs/heads/tmp/a/b')).code).toBe(0);
    expect((await push(member, '--force', 'main~1:refs/heads/tmp/a/b')).code).toBe(0);
    expect((await push(member, ':tmp/a/b')).code).toBe(0);
    expect(await remoteHeads()).not.toContain('tmp/a/b');
  });

  test('when a tag has a protected name, then it is not protected (only branches are)', async () => {
    expect((await push(member, 'main:refs/tags/main')).code).toBe(0);
  });
});
