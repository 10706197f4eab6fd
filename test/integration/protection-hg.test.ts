import { describe, expect, test } from '@jest/globals';
import { type TestServer, type TestUser } from '../helpers/server.ts';
import { newRepo, withOrgServer, type NewRepo } from '../helpers/factories.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';
import { protect, pushTraces } from '../helpers/protections.ts';

let s: TestServer;
let owner: TestUser;
let member: TestUser;
let org: string;
withOrgServer({}, (w) => ({ s, owner, org } = w));

const PIPELINE = 'steps:\n  - name: t\n    image: alpine\n    commands: [echo hi]\n';

/** A clone whose default path carries the token. */
async function workingCopy(clone: string, token: string): Promise<string> {
  const dir = await tempDir();
  await ok('hg', ['clone', '-q', withCreds(clone, token), `${dir}/w`], dir);
  await writeFile(`${dir}/w`, '.hg/hgrc', `[paths]\ndefault = ${withCreds(clone, token)}\n`);
  return `${dir}/w`;
}

async function commit(w: string, file: string, message: string): Promise<string> {
  await writeFile(w, file, `${message}\n`);
  await ok('hg', ['commit', '-q', '-A', '-m', message], w);
  return (await ok('hg', ['log', '-r', '.', '-T', '{node}'], w)).trim();
}

/** What the server shows of a repository: its log, bookmarks (through a clone), events, pipelines. */
async function state(repo: NewRepo) {
  const log = await owner.client.get(`${repo.api}/log?per_page=100`);
  const pipelines = await owner.client.get(`${repo.api}/pipelines`);
  const d = await tempDir();
  await ok('hg', ['clone', '-q', '-U', withCreds(repo.clone, owner.token), `${d}/c`], d);
  const bookmarks = await ok('hg', ['bookmarks', '-T', '{bookmark} {node}\n'], `${d}/c`);
  const all = await ok('hg', ['log', '-T', '{node}\n'], `${d}/c`);
  return {
    log: (log.body.data as { id: string }[]).map((c) => c.id),
    all: all.split('\n').filter((l) => l !== ''),
    pipelines: pipelines.body.total as number,
    bookmarks,
    traces: await pushTraces(s, repo.id),
  };
}

/** A repository with `@` on the second of two changesets, pushed by the owner. */
async function mainline(): Promise<{ repo: NewRepo; first: string; second: string }> {
  const repo = await newRepo(owner, org, { vcs: 'hg' });
  const w = await workingCopy(repo.clone, owner.token);
  const first = await commit(w, 'a', 'first');
  await ok('hg', ['bookmark', '@'], w);
  const second = await commit(w, 'a', 'second');
  await ok('hg', ['push', '-q', '-B', '@'], w);
  return { repo, first, second };
}

describe('Mercurial pushes to protected bookmarks and branches', () => {
  test('setup: a member of the organization', async () => {
    member = await s.newUser();
    await s.addMember(org, member);
  });

  test('when a push rewrites a protected bookmark (moved sideways with -f), then hg prints the rule and nothing changes', async () => {
    const { repo, first } = await mainline();
    await protect(s, repo.id, { pattern: '@', fast_forward_only: true });
    const before = await state(repo);
    const w = await workingCopy(repo.clone, member.token);
    await ok('hg', ['update', '-q', '-r', first], w);
    await writeFile(w, '.pipeline.yml', PIPELINE);
    await commit(w, 'b', 'sideways');
    await ok('hg', ['bookmark', '-f', '@'], w);
    const push = await sh('hg', ['push', '-f', '-B', '@'], w);
    expect(push.code).not.toBe(0);
    expect(push.stdout + push.stderr).toContain(
      'bookmark @ is protected by rule "@": only fast-forward updates are allowed (this would rewrite its history)',
    );
    expect(await state(repo)).toEqual(before);

    // a fast-forward of the bookmark by a member passes
    const w2 = await workingCopy(repo.clone, member.token);
    await ok('hg', ['update', '-q', '-r', '@'], w2);
    const next = await commit(w2, 'a', 'third');
    await ok('hg', ['push', '-q', '-B', '@'], w2);
    const after = await state(repo);
    expect(after.log[0]).toBe(next);
    expect(after.bookmarks).toBe(`@ ${next}\n`);
    expect(after.traces.events).toBe(before.traces.events + 1);
  });

  test('when a protected bookmark is deleted, then the push is refused unless the rule allows deletion', async () => {
    const { repo } = await mainline();
    await protect(s, repo.id, { pattern: '@' });
    const before = await state(repo);
    const w = await workingCopy(repo.clone, owner.token);
    await ok('hg', ['bookmark', '-d', '@'], w);
    const push = await sh('hg', ['push', '-B', '@'], w);
    expect(push.stdout + push.stderr).toContain('bookmark @ is protected by rule "@": it cannot be deleted');
    expect(await state(repo)).toEqual(before);

    // the same through the wire protocol's own pushkey command, as an older client sends it
    const node = before.bookmarks.split(' ')[1]!.trim();
    const r = await fetch(`${repo.clone}?cmd=pushkey`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`x:${owner.token}`).toString('base64')}`,
        'x-hgarg-1': new URLSearchParams({ namespace: 'bookmarks', key: '@', old: node, new: '' }).toString(),
        'content-type': 'application/mercurial-0.1',
      },
    });
    expect(r.status).toBe(200);
    const answer = await r.text();
    expect(answer.startsWith('0\n')).toBe(true); // not pushed
    expect(answer).toContain('pushkey-abort: bookmark @ is protected by rule "@": it cannot be deleted\n');
    expect(await state(repo)).toEqual(before);
  });

  test('when a user the rule does not name pushes to a protected named branch, then the push is refused; a named user passes', async () => {
    const repo = await newRepo(owner, org, { vcs: 'hg' });
    const w = await workingCopy(repo.clone, member.token);
    await commit(w, 'a', 'base');
    await ok('hg', ['push', '-q'], w);
    await protect(s, repo.id, { pattern: 'stab*', push: { users: [owner.username] } });
    const before = await state(repo);
    await ok('hg', ['branch', '-q', 'stable'], w);
    await commit(w, 'b', 'on stable');
    const push = await sh('hg', ['push', '--new-branch'], w);
    expect(push.code).not.toBe(0);
    expect(push.stdout + push.stderr).toContain(
      `branch stable is protected by rule "stab*": only ${owner.username} may push to it`,
    );
    expect(await state(repo)).toEqual(before);

    // the owner, named by the rule, pushes the same changeset
    await writeFile(w, '.hg/hgrc', `[paths]\ndefault = ${withCreds(repo.clone, owner.token)}\n`);
    await ok('hg', ['push', '-q', '--new-branch'], w);
    expect((await state(repo)).log).toHaveLength(2);
  });

  test('when a push adds a new head to a fast-forward-only named branch, then it is refused; an unprotected repository takes the same push', async () => {
    for (const rules of [true, false]) {
      const repo = await newRepo(owner, org, { vcs: 'hg' });
      const w = await workingCopy(repo.clone, owner.token);
      const base = await commit(w, 'a', 'base');
      await commit(w, 'a', 'next');
      await ok('hg', ['push', '-q'], w);
      if (rules) await protect(s, repo.id, { pattern: 'default' });
      const before = await state(repo);
      await ok('hg', ['update', '-q', '-r', base], w);
      await commit(w, 'b', 'new head');
      const push = await sh('hg', ['push', '-f'], w);
      if (rules) {
        expect(push.stdout + push.stderr).toContain(
          'branch default is protected by rule "default": only fast-forward updates are allowed',
        );
        expect(await state(repo)).toEqual(before);
      } else {
        expect(push.code).toBe(0);
        expect((await state(repo)).all).toHaveLength(3);
      }
    }
  });

  test('when a push carries its changesets under a throwaway bookmark, then the protected named branch is still judged', async () => {
    const repo = await newRepo(owner, org, { vcs: 'hg' });
    const w = await workingCopy(repo.clone, owner.token);
    const base = await commit(w, 'a', 'base');
    await commit(w, 'a', 'next');
    await ok('hg', ['push', '-q'], w);
    await protect(s, repo.id, { pattern: 'default', push: { users: [owner.username] } });
    const before = await state(repo);
    // a member's changeset on default, pushed as a bookmark no rule names
    const m = await workingCopy(repo.clone, member.token);
    await commit(m, 'b', 'by a member');
    await ok('hg', ['bookmark', 'feature'], m);
    const push = await sh('hg', ['push', '-B', 'feature'], m);
    expect(push.stdout + push.stderr).toContain(
      `branch default is protected by rule "default": only ${owner.username} may push to it`,
    );
    expect(await state(repo)).toEqual(before);

    // the owner may add a bookmarked second head, but deleting that bookmark would make the head
    // the branch's line head beside the old one: not a fast-forward
    await ok('hg', ['update', '-q', '-r', base], w);
    await commit(w, 'c', 'second head');
    await ok('hg', ['bookmark', 'topic'], w);
    await ok('hg', ['push', '-q', '-f', '-B', 'topic'], w);
    await ok('hg', ['bookmark', '-d', 'topic'], w);
    const del = await sh('hg', ['push', '-B', 'topic'], w);
    expect(del.stdout + del.stderr).toContain(
      'branch default is protected by rule "default": only fast-forward updates are allowed',
    );
  });
});
