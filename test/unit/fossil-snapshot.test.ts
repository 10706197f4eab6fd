import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fossilDriver } from '../../src/vcs/fossil/driver.ts';
import type { Snapshot } from '../../src/vcs/driver.ts';
import { ok, tempDir, writeFile } from '../helpers/vcs.ts';

// The Fossil push snapshot is one SQL run, remembered while the repository file is unchanged:
// every committed write must be seen by the next snapshot.
const driver = fossilDriver;
let dir: string;
let repo: string;
let work: string;

const plain = (s: Snapshot) => ({
  ...s,
  branches: [...s.branches],
  tags: [...s.tags],
  bookmarks: [...s.bookmarks],
});
/** The full hash of a check-in (`fossil info` shows a prefix). */
const tipOf = async (rev: string) => {
  const prefix = (await ok('fossil', ['info', '-R', repo, rev], dir)).match(/hash:\s+([0-9a-f]{16,})/)?.[1];
  const q = `SELECT uuid FROM blob WHERE uuid GLOB '${prefix ?? 'none'}*'`;
  return (await ok('fossil', ['sql', '-R', repo, '--readonly', q], dir)).trim().replace(/'/g, '');
};

async function commit(content: string, extra: string[] = []): Promise<void> {
  await writeFile(work, 'a.txt', content);
  await ok('fossil', ['addremove'], work);
  await ok('fossil', ['commit', '--user', 'triad', '--no-warnings', '-m', content, ...extra], work);
}

beforeAll(async () => {
  dir = await tempDir();
  repo = path.join(dir, 'repo.fossil');
  await driver.init(repo);
  work = path.join(dir, 'w');
  await ok('fossil', ['open', '-f', '--workdir', work, repo], dir);
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

describe('Fossil snapshots', () => {
  test('each committed write shows in the next snapshot; an unchanged file answers the same refs', async () => {
    const empty = await driver.snapshot(repo);
    expect(plain(empty)).toEqual(plain(await driver.snapshot(repo)));
    expect([...empty.branches.keys()]).toEqual(['trunk']);

    await commit('one\n');
    const one = await driver.snapshot(repo);
    expect(one.tip).toBe(await tipOf('trunk'));
    expect(one.branches.get('trunk')).toBe(one.tip);
    expect(one.mark).toBeGreaterThan(empty.mark);

    await commit('second\n', ['--branch', 'feat', '--tag', "it's"]);
    const two = await driver.snapshot(repo);
    expect(two.branches.get('feat')).toBe(await tipOf('feat'));
    expect(two.branches.get('trunk')).toBe(one.tip);
    expect(two.tags.get("it's")).toBe(await tipOf('feat'));

    // A tag added to an existing check-in (no new check-in) is a write too.
    await ok('fossil', ['tag', 'add', '--user', 'triad', 'rel1', one.tip, '-R', repo], dir);
    const three = await driver.snapshot(repo);
    expect(three.tags.get('rel1')).toBe(one.tip);
    expect(plain(three)).toEqual(plain(await driver.snapshot(repo)));
  });
});
