import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import path from 'node:path';
import { gitDriver } from '../../src/vcs/git/driver.ts';
import { ok, tempDir, writeFile } from '../helpers/vcs.ts';

// The Git push snapshot: branch heads, tags peeled to their commits, and the tip (the commit of
// the branch HEAD names), as the push bookkeeping compares them.
const driver = gitDriver;
let dir: string;
let repo: string;
let work: string;
const git = (args: string[]) =>
  ok('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.test', ...args], work);
const rev = async (r: string) => (await git(['rev-parse', r])).trim();

beforeAll(async () => {
  dir = await tempDir();
  repo = path.join(dir, 'repo.git');
  await driver.init(repo);
  work = path.join(dir, 'w');
  await fs.mkdir(work);
  await git(['init', '-q', '-b', 'main', '.']);
  await writeFile(work, 'a.txt', 'one\n');
  await git(['add', '.']);
  await git(['commit', '-q', '-m', 'one']);
  await git(['tag', '-a', '-m', 'annotated', 'v1']);
  await git(['checkout', '-q', '-b', 'feature/x']);
  await writeFile(work, 'a.txt', 'two\n');
  await git(['commit', '-q', '-am', 'two']);
  await git(['tag', 'light']);
  await git(['push', '-q', repo, 'main', 'feature/x', 'v1', 'light']);
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('Git snapshots', () => {
  test('branches (nested names too), tags peeled to commits, and the tip of the branch HEAD names', async () => {
    const s = await driver.snapshot(repo);
    expect([...s.branches].sort()).toEqual([
      ['feature/x', await rev('feature/x')],
      ['main', await rev('main')],
    ]);
    expect([...s.tags].sort()).toEqual([
      ['light', await rev('feature/x')],
      ['v1', await rev('main')],
    ]);
    expect(s.tip).toBe(await rev('main'));
  });

  test('HEAD naming another branch moves the tip; a branch that does not exist, or a detached HEAD, gives none', async () => {
    const head = path.join(repo, 'HEAD');
    await fs.writeFile(head, 'ref: refs/heads/feature/x\n');
    expect((await driver.snapshot(repo)).tip).toBe(await rev('feature/x'));
    await fs.writeFile(head, 'ref: refs/heads/nothing\n');
    expect((await driver.snapshot(repo)).tip).toBe('');
    await fs.writeFile(head, `${await rev('main')}\n`);
    expect((await driver.snapshot(repo)).tip).toBe('');
    await fs.writeFile(head, 'ref: refs/heads/main\n');
  });
});
