import { describe, expect, test } from '@jest/globals';
import path from 'node:path';
import { startTestServer, type TestServer, type TestUser } from '../helpers/server.ts';
import { hostedDir, newRepo, withSpoolServer } from '../helpers/factories.ts';
import { noFilesUnder } from '../helpers/transport.ts';
import { ok, sh, tempDir, withCreds, writeFile } from '../helpers/vcs.ts';

/**
 * Mercurial stream clones (TRIAD_HG_STREAM_CLONES): the store's files sent as they are. A plain
 * `hg clone` streams by default; a repository with secret changesets never does.
 */
let s: TestServer;
let owner: TestUser;
let org: string;
let spool: string;
withSpoolServer({}, (w) => ({ s, owner, org, spool } = w));

type Repo = { name: string; clone: string; dir: string; work: string };

/** A public repository with two pushed commits, and the working copy that pushed them. */
async function pushedRepo(server: TestServer, user: TestUser, inOrg: string): Promise<Repo> {
  const { name, clone, ...repo } = await newRepo(user, inOrg, { vcs: 'hg' });
  const dir = hostedDir(server.dataDir, repo);
  const work = `${await tempDir()}/w`;
  await ok('hg', ['clone', '-q', withCreds(clone, user.token), work], path.dirname(work));
  await writeFile(work, '.hg/hgrc', `[paths]\ndefault = ${withCreds(clone, user.token)}\n`);
  await writeFile(work, 'a.txt', 'one\n');
  await ok('hg', ['commit', '-q', '-A', '-m', 'one'], work);
  await writeFile(work, 'b/c.txt', 'two\n');
  await ok('hg', ['commit', '-q', '-A', '-m', 'two'], work);
  await ok('hg', ['push', '-q'], work);
  return { name, clone, dir, work };
}

/** An anonymous `hg clone` (extra arguments first); its output and the clone's changesets. */
async function cloneOf(url: string, ...args: string[]): Promise<{ out: string; nodes: string }> {
  const dir = await tempDir();
  const r = await sh('hg', ['clone', '-U', ...args, url, `${dir}/c`], dir);
  expect({ code: r.code, err: r.stderr }).toEqual({ code: 0, err: expect.any(String) });
  await ok('hg', ['verify', '-q', '-R', `${dir}/c`], dir);
  return { out: r.stdout + r.stderr, nodes: await nodesOf(`${dir}/c`) };
}

/** The changesets of a repository (all, or a revset's) with their phases, oldest first. */
const nodesOf = (dir: string, revs = 'all()') =>
  ok('hg', ['log', '-R', dir, '-r', revs, '-T', '{node} {phase}\n'], dir);

describe('Mercurial stream clones', () => {
  test('when a repository is cloned, then the store is streamed, the clone is whole and the clone URL keeps serving clones and pushes', async () => {
    const repo = await pushedRepo(s, owner, org);
    const first = await cloneOf(repo.clone);
    expect(first.out).toContain('streaming all changes');
    expect(first.nodes).toBe(await nodesOf(repo.dir));
    expect(first.nodes).toMatch(/^(\w{40} public\n){2}$/);

    // Mercurial removes the temporary directory of a stream as far up as directories are
    // empty: the server's own spool directory went with it, and every later request failed.
    const second = await cloneOf(repo.clone);
    expect(second.out).toContain('streaming all changes');
    await writeFile(repo.work, 'a.txt', 'three\n');
    await ok('hg', ['commit', '-q', '-m', 'three'], repo.work);
    expect((await sh('hg', ['push', '-q'], repo.work)).code).toBe(0);
    expect((await cloneOf(repo.clone)).nodes).toBe(await nodesOf(repo.dir));
    expect(await noFilesUnder(spool)).toEqual([]);
  }, 60_000);

  test('when a repository has a secret changeset, then a clone is not streamed and leaves the secret changeset out', async () => {
    const repo = await pushedRepo(s, owner, org);
    await ok('hg', ['phase', '-R', repo.dir, '--force', '--secret', '-r', 'tip'], repo.dir);
    for (const args of [[], ['--stream']]) {
      const c = await cloneOf(repo.clone, ...args);
      expect(c.out).not.toContain('streaming all changes');
      expect(c.out).toContain('adding changesets');
      expect(c.nodes).toBe(await nodesOf(repo.dir, 'not secret()'));
      expect(c.nodes.split('\n').filter(Boolean)).toHaveLength(1);
    }
  }, 60_000);

  test.each([
    ['allow', 'only a clone that asks for a stream is streamed', false, true],
    ['off', 'no clone is streamed', false, false],
  ])(
    'when TRIAD_HG_STREAM_CLONES is %s, then %s',
    async (setting, _what, plain, asked) => {
      const other = await startTestServer({ TRIAD_HG_STREAM_CLONES: setting });
      try {
        const user = await other.newUser();
        const repo = await pushedRepo(other, user, await other.newOrg(user));
        const c1 = await cloneOf(repo.clone);
        const c2 = await cloneOf(repo.clone, '--stream');
        expect([c1.out.includes('streaming all changes'), c2.out.includes('streaming all changes')]).toEqual([
          plain,
          asked,
        ]);
        for (const c of [c1, c2]) expect(c.nodes).toBe(await nodesOf(repo.dir));
      } finally {
        await other.close();
      }
    },
    60_000,
  );
});
