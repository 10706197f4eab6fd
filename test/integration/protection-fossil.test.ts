import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer, type NewRepo } from '../helpers/factories.ts';
import { ok, sh, tempDir, writeFile } from '../helpers/vcs.ts';
import { protect, pushTraces } from '../helpers/protections.ts';

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const PIPELINE = 'steps:\n  - name: t\n    image: alpine\n    commands: [echo hi]\n';

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

/** What the server shows of a repository: its log, pipelines and events. */
async function state(repo: NewRepo) {
  const log = await owner.client.get(`${repo.api}/log?per_page=100`);
  const pipelines = await owner.client.get(`${repo.api}/pipelines`);
  return {
    log: (log.body.data as { id: string }[]).map((c) => c.id),
    pipelines: pipelines.body.total as number,
    traces: await pushTraces(s, repo.id),
  };
}

describe('Fossil pushes to protected branches', () => {
  test('setup: a member of the organization', async () => {
    member = await s.newUser();
    await s.addMember(org, member);
  });

  test('when a member the rule does not allow pushes a check-in to a protected branch, then fossil prints the rule and the repository is unchanged; an owner passes', async () => {
    const repo = await newRepo(owner, org, { vcs: 'fossil' });
    await protect(s, repo.id, { pattern: 'trunk', push: 'owners' });
    const before = await state(repo);
    const w = await checkout(repo.clone, member.token);
    await commit(w, '.pipeline.yml', PIPELINE, 'by a member');
    const push = await sh('fossil', ['push', '-B', `x:${member.token}`, repo.clone], w);
    // Fossil 2.21 prints the server's error card but still exits 0 (as when it cannot connect)
    expect(push.stdout + push.stderr).toContain(
      'Error: branch trunk is protected by rule "trunk": only organization owners may push to it',
    );
    expect(await state(repo)).toEqual(before);
    const other = await checkout(repo.clone, owner.token);
    expect((await sh('fossil', ['cat', '.pipeline.yml'], other)).code).not.toBe(0);

    // the owner pushes the same check-in (the member's clone, the owner's credentials)
    const pushed = await sh('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    expect(pushed.code).toBe(0);
    const after = await state(repo);
    expect(after.log).toHaveLength(before.log.length + 1);
    expect(after.traces.events).toBe(before.traces.events + 1);
    expect(after.pipelines).toBe(before.pipelines + 1);
  });

  test('when a push forks a fast-forward-only branch, then it is refused; a check-in on the branch head and a new branch pass', async () => {
    const repo = await newRepo(owner, org, { vcs: 'fossil' });
    const w = await checkout(repo.clone, owner.token);
    await commit(w, 'a', 'a\n', 'base');
    await ok('fossil', ['push', '-B', `x:${owner.token}`, repo.clone], w);
    await protect(s, repo.id, { pattern: 'trunk' });
    const base = await state(repo);

    // a check-in on the head: a fast-forward
    await commit(w, 'a', 'a2\n', 'next');
    await ok('fossil', ['push', '-B', `x:${member.token}`, repo.clone], w);
    const before = await state(repo);
    expect(before.log).toHaveLength(base.log.length + 1);

    // a second leaf on trunk, from the check-in before the head
    await ok('fossil', ['update', before.log[1]!], w);
    await commit(w, 'b', 'b\n', 'fork', ['--allow-fork']);
    const push = await sh('fossil', ['push', '-B', `x:${member.token}`, repo.clone], w);
    expect(push.stdout + push.stderr).toContain(
      'branch trunk is protected by rule "trunk": only fast-forward updates are allowed',
    );
    expect(await state(repo)).toEqual(before);

    // the same fork on a new branch is no change of trunk
    await ok('fossil', ['amend', 'current', '--branch', 'topic'], w);
    await ok('fossil', ['push', '-B', `x:${member.token}`, repo.clone], w);
    expect((await state(repo)).traces.events).toBeGreaterThan(before.traces.events);
  });
});
