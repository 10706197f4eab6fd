import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer, type NewRepo } from '../helpers/factories.ts';
import { ok, sh, tempDir, writeFile } from '../helpers/vcs.ts';
import { outboxEvents } from '../helpers/outbox.ts';

let s: TestServer;
let owner: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

async function repoOf(isPrivate = false): Promise<NewRepo> {
  const repo = await newRepo(owner, org, { vcs: 'fossil', isPrivate });
  expect(repo.data.default_branch).toBe('trunk');
  return repo;
}

/** Clones over HTTP and opens a checkout with autosync off; returns the checkout directory. */
async function checkout(clone: string, token: string): Promise<string> {
  const dir = await tempDir();
  await ok('fossil', ['clone', '-B', `x:${token}`, clone, `${dir}/repo.fossil`], dir);
  await ok('fossil', ['open', '-f', '--workdir', `${dir}/w`, `${dir}/repo.fossil`], dir);
  await ok('fossil', ['settings', 'autosync', 'off'], `${dir}/w`);
  return `${dir}/w`;
}

async function commit(w: string, file: string, content: string, message: string, extra: string[] = []) {
  await writeFile(w, file, content);
  await ok('fossil', ['addremove', '--dotfiles'], w);
  await ok('fossil', ['commit', '--user', 'ada', '--no-warnings', '-m', message, ...extra], w);
}

describe('Fossil over HTTP', () => {
  test("when a new repository is cloned, then the clone's project name is org/repo", async () => {
    const repo = await repoOf();
    const w = await checkout(repo.clone, owner.token);
    const info = await ok('fossil', ['info'], w);
    expect(info).toMatch(new RegExp(`^project-name:\\s+${org}/${repo.name}$`, 'm'));
  });

  test('when check-ins are pushed to trunk, then a push event is recorded and clones see them', async () => {
    const repo = await repoOf();
    const w = await checkout(repo.clone, owner.token);
    const before = (await ok('fossil', ['info', '-R', `${w}/../repo.fossil`, 'tip'], w)).match(
      /hash:\s+([0-9a-f]+)/,
    )?.[1];
    await commit(w, 'README', 'hello\n', 'first line\n\nmore');
    await commit(w, 'README', 'hello 2\n', 'second');
    const push = await sh('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    expect(push.code).toBe(0);
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => e.event_type)).toEqual(['push']);
    const p = events[0]!.payload;
    expect(p).toMatchObject({
      ref: 'trunk',
      ref_type: 'branch',
      default: true,
      created: false,
      deleted: false,
      total_commits: 2,
      truncated: false,
    });
    expect(before).toBeDefined();
    expect(p.before.startsWith(before!)).toBe(true); // `fossil info` prints a shortened hash
    expect(p.after).toBe(p.commits[0].id);
    expect(p.commits.map((c: { subject: string }) => c.subject)).toEqual(['second', 'first line']);
    expect(p.commits[1]).toMatchObject({
      message: 'first line\n\nmore',
      short_id: p.commits[1].id.slice(0, 10),
      author: { name: 'ada', email: '' },
    });

    const other = await checkout(repo.clone, owner.token);
    expect(await ok('fossil', ['cat', 'README'], other)).toBe('hello 2\n');
  });

  test('when a tagged check-in is pushed, then a tag event is recorded', async () => {
    const repo = await repoOf();
    const w = await checkout(repo.clone, owner.token);
    await commit(w, 'a', 'a\n', 'release', ['--tag', 'v1.0']);
    await ok('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    const events = await outboxEvents(s, repo.id);
    expect(events.map((e) => e.event_type)).toEqual(['push', 'tag']);
    const head = events[0]!.payload.after;
    expect(events[1]!.payload).toEqual({
      ref: 'v1.0',
      ref_type: 'tag',
      created: true,
      target: head,
      commit: expect.objectContaining({ id: head, subject: 'release' }),
    });
  });

  test('when a new branch is pushed, then its event is created with an empty before', async () => {
    const repo = await repoOf();
    const w = await checkout(repo.clone, owner.token);
    await commit(w, 'b', 'b\n', 'on a branch', ['--branch', 'feature']);
    await ok('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    const [e] = await outboxEvents(s, repo.id);
    expect(e!.payload).toMatchObject({
      ref: 'feature',
      default: false,
      created: true,
      before: '',
      total_commits: 1,
    });
  });

  test('when 60 check-ins are pushed, then the newest 50 are listed and truncated is true', async () => {
    const repo = await repoOf();
    const w = await checkout(repo.clone, owner.token);
    for (let i = 1; i <= 60; i++) await commit(w, `f${i}`, `${i}\n`, `c${i}`);
    await ok('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    const [e] = await outboxEvents(s, repo.id);
    expect(e!.payload).toMatchObject({ ref: 'trunk', total_commits: 50, truncated: true });
    expect(e!.payload.commits[0].subject).toBe('c60');
    expect(e!.payload.commits[49].subject).toBe('c11');
  });

  test('when pushing with a read-only token, then nothing changes and no event is recorded', async () => {
    const repo = await repoOf();
    const reader = await s.newUser(undefined, { scopes: ['repo:read'] });
    await s.addMember(org, reader);
    const w = await checkout(repo.clone, reader.token);
    await commit(w, 'x', 'x\n', 'not allowed');
    const push = await sh('fossil', ['push', '-B', `x:${reader.token}`, repo.clone], w);
    expect(`${push.stdout}${push.stderr}`).toMatch(/not authorized|permission|denied/i);
    expect(await outboxEvents(s, repo.id)).toEqual([]);
    const fresh = await checkout(repo.clone, owner.token);
    expect((await sh('fossil', ['cat', 'x'], fresh)).code).not.toBe(0);
  });

  test('when the repository is private, then an anonymous clone fails and a member clones', async () => {
    const repo = await repoOf(true);
    const dir = await tempDir();
    const anon = await sh('fossil', ['clone', repo.clone, `${dir}/a.fossil`], dir);
    expect(anon.code).not.toBe(0);
    const member = await sh(
      'fossil',
      ['clone', '-B', `x:${owner.token}`, repo.clone, `${dir}/b.fossil`],
      dir,
    );
    expect(member.code).toBe(0);
  });
});

describe('Fossil pushes trigger pipelines', () => {
  test('when a check-in with .pipeline.yml is pushed, then a pipeline runs on it', async () => {
    const repo = await repoOf();
    const w = await checkout(repo.clone, owner.token);
    await commit(
      w,
      '.pipeline.yml',
      'steps:\n  - name: t\n    image: alpine\n    commands: [echo hi]\n',
      'ci',
    );
    await ok('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    const [e] = await outboxEvents(s, repo.id);
    const p = await s.anon.get(`/api/v1/repos/${org}/${repo.name}/pipelines/1`);
    expect(p.status).toBe(200);
    expect(p.body).toMatchObject({ commit_node: e!.payload.after, branch: 'trunk', event: 'push' });
  });
});
