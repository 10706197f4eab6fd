import fs from 'node:fs/promises';
import path from 'node:path';
import { ok, tempDir, writeFile } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

/** Bytes with NUL and an invalid UTF-8 sequence: must come back base64. */
export const LOGO = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x02, 0xff, 0xfe]);
export const MAIN_C1 = 'int main(void) { return 0; }\n';
export const MAIN_C3 = 'int main(void) {\n  return 1;\n}\n';

export type Fixture = {
  /** Check-ins reachable from tip, newest first. */
  mainline: string[];
  c1: string;
  c2: string;
  c3: string;
  /** The default branch name and a second branch (git branch, hg bookmark, fossil branch). */
  defaultBranch: string;
  feature: string;
};

const git = (args: string[], cwd: string) => ok('git', args, cwd);
const hg = (args: string[], cwd: string) => ok('/usr/bin/hg', args, cwd);
const fossil = (args: string[], cwd: string) => ok('fossil', args, cwd);

async function writeC1(dir: string): Promise<void> {
  await writeFile(dir, 'README.md', 'hello\n');
  await writeFile(dir, 'src/main.c', MAIN_C1);
  await writeFile(dir, 'src/lib/util.c', 'int util;\n');
  await writeFile(dir, 'logo.png', LOGO);
}

/** The full hash of a Fossil checkout's current check-in (`fossil info` shortens it). */
async function fossilCheckout(work: string): Promise<string> {
  const out = await fossil(
    ['sql', "SELECT uuid FROM blob WHERE rid = (SELECT value FROM vvar WHERE name = 'checkout')"],
    work,
  );
  return out.replace(/'/g, '').trim();
}

/**
 * Fills the repository storage with: c1 (files), c2 (README change, tagged v1.0), a `feature`
 * line with feature.txt branching from c2, then c3 on the default line (changes src/main.c).
 */
export async function populate(vcs: VcsKind, store: string): Promise<Fixture> {
  const work = await tempDir(`triad-contents-${vcs}-`);
  try {
    if (vcs === 'git') {
      await git(['init', '-q', '-b', 'main', '.'], work);
      await writeC1(work);
      await git(['add', '.'], work);
      await git(['commit', '-q', '-m', 'first commit\n\nbody line'], work);
      const c1 = (await git(['rev-parse', 'HEAD'], work)).trim();
      await writeFile(work, 'README.md', 'hello\nworld\n');
      await git(['commit', '-q', '-am', 'second commit'], work);
      const c2 = (await git(['rev-parse', 'HEAD'], work)).trim();
      await git(['tag', '-a', '-m', 'release', 'v1.0'], work);
      await git(['checkout', '-q', '-b', 'feature'], work);
      await writeFile(work, 'feature.txt', 'feature\n');
      await git(['add', '.'], work);
      await git(['commit', '-q', '-m', 'feature work'], work);
      await git(['checkout', '-q', 'main'], work);
      await writeFile(work, 'src/main.c', MAIN_C3);
      await git(['commit', '-q', '-am', 'third commit'], work);
      const c3 = (await git(['rev-parse', 'HEAD'], work)).trim();
      await git(['push', '-q', store, 'main', 'feature', '--tags'], work);
      const mainline = (await git(['rev-list', 'main'], work)).trim().split('\n');
      return { mainline, c1, c2, c3, defaultBranch: 'main', feature: 'feature' };
    }
    if (vcs === 'hg') {
      await hg(['init', '.'], work);
      await writeC1(work);
      await hg(['add', '-q'], work);
      await hg(['commit', '-m', 'first commit\n\nbody line'], work);
      const id = async () => (await hg(['log', '-r', '.', '-T', '{node}'], work)).trim();
      const c1 = await id();
      await writeFile(work, 'README.md', 'hello\nworld\n');
      await hg(['commit', '-m', 'second commit'], work);
      const c2 = await id();
      await hg(['tag', '-r', c2, 'v1.0'], work);
      await hg(['update', '-q', c2], work);
      await writeFile(work, 'feature.txt', 'feature\n');
      await hg(['add', '-q', 'feature.txt'], work);
      await hg(['commit', '-m', 'feature work'], work);
      await hg(['bookmark', 'feature'], work);
      await hg(['update', '-q', '-r', `children(${c2}) and not bookmark()`], work);
      await writeFile(work, 'src/main.c', MAIN_C3);
      await hg(['commit', '-m', 'third commit'], work);
      const c3 = await id();
      await hg(['push', '-q', '-f', '-r', 'tip', '-B', 'feature', store], work);
      const mainline = (await hg(['log', '-R', store, '-r', 'reverse(::tip)', '-T', '{node}\\n'], work))
        .trim()
        .split('\n');
      return { mainline, c1, c2, c3, defaultBranch: 'default', feature: 'feature' };
    }
    // Fossil: commit straight into the stored repository through a checkout of it.
    await fossil(['open', '--force', store], work);
    // The repository's admin user (created by Triad); `ada` does not exist in it.
    await fossil(['user', 'default', 'triad'], work);
    await writeC1(work);
    await fossil(['add', '.'], work);
    await fossil(['commit', '--no-warnings', '-m', 'first commit\n\nbody line'], work);
    const id = () => fossilCheckout(work);
    const c1 = await id();
    await writeFile(work, 'README.md', 'hello\nworld\n');
    await fossil(['commit', '-m', 'second commit'], work);
    const c2 = await id();
    await fossil(['tag', 'add', 'v1.0', c2], work);
    await writeFile(work, 'feature.txt', 'feature\n');
    await fossil(['add', 'feature.txt'], work);
    await fossil(['commit', '--branch', 'feature', '-m', 'feature work'], work);
    await fossil(['update', 'trunk'], work);
    await writeFile(work, 'src/main.c', MAIN_C3);
    // Fossil orders by time: make c3 strictly newer than the feature check-in.
    await new Promise((r) => setTimeout(r, 1100));
    await fossil(['commit', '-m', 'third commit'], work);
    const c3 = await id();
    await fossil(['close', '--force'], work);
    const mainline = (
      await fossil(['timeline', 'ancestors', c3, '-n', '0', '-t', 'ci', '-F', '%H', '-R', store], work)
    )
      .split('\n')
      .filter((l) => /^[0-9a-f]{40,64}$/.test(l.trim()))
      .map((l) => l.trim());
    return { mainline, c1, c2, c3, defaultBranch: 'trunk', feature: 'feature' };
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

/**
 * Adds one commit with `files` (by default later.txt) on the default line of the stored
 * repository; returns its id.
 */
export async function addCommit(
  vcs: VcsKind,
  store: string,
  files: Record<string, string | Buffer> = { 'later.txt': 'later\n' },
): Promise<string> {
  const names = Object.keys(files);
  const write = async (w: string) => {
    for (const [name, content] of Object.entries(files)) await writeFile(w, name, content);
  };
  const work = await tempDir(`triad-contents-more-${vcs}-`);
  try {
    if (vcs === 'git') {
      await git(['clone', '-q', store, 'w'], work);
      const w = path.join(work, 'w');
      await write(w);
      await git(['add', '.'], w);
      await git(['commit', '-q', '-m', 'later'], w);
      await git(['push', '-q', 'origin', 'main'], w);
      return (await git(['rev-parse', 'HEAD'], w)).trim();
    }
    if (vcs === 'hg') {
      await hg(['clone', '-q', '-u', 'tip', store, 'w'], work);
      const w = path.join(work, 'w');
      await write(w);
      await hg(['add', '-q', '--', ...names], w);
      await hg(['commit', '-m', 'later'], w);
      await hg(['push', '-q', store], w);
      return (await hg(['log', '-r', '.', '-T', '{node}'], w)).trim();
    }
    await fossil(['open', '--force', store], work);
    await fossil(['user', 'default', 'triad'], work);
    await fossil(['update', 'trunk'], work);
    await write(work);
    await fossil(['add', '--', ...names], work);
    await new Promise((r) => setTimeout(r, 1100));
    await fossil(['commit', '--no-warnings', '-m', 'later'], work);
    const id = await fossilCheckout(work);
    await fossil(['close', '--force'], work);
    return id;
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}
