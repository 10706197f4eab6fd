/**
 * Ref lists for the refs tests: repositories with branches, bookmarks and tags built with the
 * real clients, and what those clients show of them (`git branch -a`, `git tag`, `hg branches`,
 * `hg bookmarks`, `hg tags`, `fossil branch ls`, `fossil tag list`) with each ref's head commit.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { ok, tempDir, writeFile } from '../helpers/vcs.ts';
import type { VcsKind } from '../../src/vcs/index.ts';

const git = (args: string[], cwd: string) => ok('git', args, cwd);
const hg = (args: string[], cwd: string) => ok('/usr/bin/hg', args, cwd);
const fossil = (args: string[], cwd: string) => ok('fossil', args, cwd);
const later = () => new Promise((r) => setTimeout(r, 1100));

/** A ref as the API should show it, from the VCS's own listing. */
export type NativeRef = {
  name: string;
  default: boolean;
  commit: { id: string; author: string; subject: string; date: string };
};
export type NativeRefs = { branch: NativeRef[]; bookmark: NativeRef[] | undefined; tag: NativeRef[] };

/** Names in byte order (the order the API promises). */
const byName = (refs: NativeRef[]) =>
  refs.sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');
const utc = (d: string) => new Date(d).toISOString().replace('.000Z', 'Z');

/**
 * Git: main (default), feature, a-first, Zeta; an annotated tag v1.0, a lightweight tag light and
 * a tag of a tree (treetag, which names no commit).
 */
async function buildGit(store: string): Promise<void> {
  const work = await tempDir('triad-refs-git-');
  await git(['init', '-q', '-b', 'main', '.'], work);
  await writeFile(work, 'README.md', 'one\n');
  await git(['add', '.'], work);
  await git(['commit', '-q', '-m', 'first commit\n\nbody'], work);
  await git(['tag', '-a', '-m', 'release one', 'v1.0'], work);
  await git(['branch', 'a-first'], work);
  await writeFile(work, 'README.md', 'two\n');
  await git(['commit', '-q', '-am', 'second commit'], work);
  await git(['tag', 'light'], work);
  await git(['branch', 'Zeta'], work);
  await git(['tag', 'treetag', 'HEAD^{tree}'], work);
  await git(['checkout', '-q', '-b', 'feature'], work);
  await writeFile(work, 'feature.txt', 'f\n');
  await git(['add', '.'], work);
  await git(['commit', '-q', '-m', 'feature work'], work);
  await git(['push', '-q', store, '--all'], work);
  await git(['push', '-q', store, '--tags'], work);
  await fs.rm(work, { recursive: true, force: true });
}

async function gitCommit(store: string, id: string): Promise<NativeRef['commit']> {
  const out = await git(['-C', store, 'log', '-1', '--format=%H%x09%an <%ae>%x09%aI%x09%s', id], store);
  const [hash = '', author = '', date = '', subject = ''] = out.trim().split('\t');
  return { id: hash, author, date: utc(date), subject };
}

async function gitRefs(store: string): Promise<NativeRefs> {
  const branches = lines(
    await git(['-C', store, 'branch', '-a', '--format=%(HEAD)%09%(refname:short)%09%(objectname)'], store),
  ).map((l) => l.split('\t'));
  const branch = await Promise.all(
    branches.map(async ([head = '', name = '', id = '']) => ({
      name,
      default: head === '*',
      commit: await gitCommit(store, id),
    })),
  );
  const tag: NativeRef[] = [];
  for (const name of lines(await git(['-C', store, 'tag'], store))) {
    // a tag that names no commit (a tree's) has no place in a list of commits
    const id = await git(['-C', store, 'rev-parse', '-q', '--verify', `${name}^{commit}`], store).catch(
      () => '',
    );
    if (id.trim() !== '') tag.push({ name, default: false, commit: await gitCommit(store, id.trim()) });
  }
  return { branch: byName(branch), bookmark: undefined, tag: byName(tag) };
}

/**
 * Mercurial: default (two heads: the newest, a bookmarked feature commit, is its head), stable
 * (two heads), old (closed: not listed); bookmarks @ and feature; the tags v1.0 and light.
 */
async function buildHg(store: string): Promise<void> {
  const work = await tempDir('triad-refs-hg-');
  const id = async () => (await hg(['log', '-r', '.', '-T', '{node}'], work)).trim();
  await hg(['init', '.'], work);
  await writeFile(work, 'README.md', 'one\n');
  await hg(['add', '-q'], work);
  await hg(['commit', '-m', 'first commit\n\nbody'], work);
  const c1 = await id();
  await writeFile(work, 'README.md', 'two\n');
  await hg(['commit', '-m', 'second commit'], work);
  const c2 = await id();
  await hg(['tag', '-r', c1, 'v1.0'], work);
  await hg(['tag', '-r', c2, 'light'], work);
  await hg(['bookmark', '@'], work);
  await hg(['branch', '-q', 'stable'], work);
  await hg(['commit', '-m', 'stable one'], work);
  const s1 = await id();
  await writeFile(work, 'stable.txt', 'two\n');
  await hg(['add', '-q', 'stable.txt'], work);
  await hg(['commit', '-m', 'stable two'], work);
  await hg(['update', '-q', s1], work);
  await writeFile(work, 'stable.txt', 'three\n');
  await hg(['add', '-q', 'stable.txt'], work);
  await hg(['commit', '-m', 'stable three'], work);
  await hg(['update', '-q', c2], work);
  await hg(['branch', '-q', 'old'], work);
  await hg(['commit', '-m', 'old work'], work);
  await hg(['commit', '--close-branch', '-m', 'close old'], work);
  await hg(['update', '-q', c2], work);
  await writeFile(work, 'feature.txt', 'f\n');
  await hg(['add', '-q', 'feature.txt'], work);
  await hg(['commit', '-m', 'feature work'], work);
  await hg(['bookmark', 'feature'], work);
  await hg(['push', '-q', '-f', '-B', '@', '-B', 'feature', store], work);
  await fs.rm(work, { recursive: true, force: true });
}

async function hgRefs(store: string): Promise<NativeRefs> {
  const list = async (args: string[], template: string, dflt: string) => {
    const out = await hg(['-R', store, ...args, '-T', `${template}\t{node}\n`], store);
    const refs: NativeRef[] = [];
    for (const [name = '', node = ''] of lines(out).map((l) => l.split('\t'))) {
      if (name === 'tip') continue;
      const c = await hg(
        ['-R', store, 'log', '-r', node, '-T', '{node}\t{author}\t{date|rfc3339date}\t{desc|firstline}'],
        store,
      );
      const [cid = '', author = '', date = '', subject = ''] = c.split('\t');
      refs.push({ name, default: name === dflt, commit: { id: cid, author, date: utc(date), subject } });
    }
    return byName(refs);
  };
  return {
    branch: await list(['branches'], '{branch}', 'default'),
    bookmark: await list(['bookmarks'], '{bookmark}', '@'),
    tag: await list(['tags'], '{tag}', ''),
  };
}

/**
 * Fossil (the store Triad created, with its initial check-in on trunk): trunk, feature, old
 * (closed: not listed); the tags v1.0 and light (a branch's own tag is no tag).
 */
async function buildFossil(store: string): Promise<void> {
  const work = await tempDir('triad-refs-fossil-');
  await fossil(['open', '--force', store], work);
  await fossil(['user', 'default', 'triad'], work);
  await writeFile(work, 'README.md', 'one\n');
  await fossil(['add', '.'], work);
  await later();
  await fossil(['commit', '--no-warnings', '-m', 'first commit'], work);
  await fossil(['tag', 'add', 'v1.0', 'current'], work);
  await writeFile(work, 'feature.txt', 'f\n');
  await fossil(['add', 'feature.txt'], work);
  await fossil(['commit', '--branch', 'feature', '-m', 'feature work'], work);
  await fossil(['update', 'trunk'], work);
  await writeFile(work, 'old.txt', 'o\n');
  await fossil(['add', 'old.txt'], work);
  await fossil(['commit', '--branch', 'old', '-m', 'old work'], work);
  await later();
  await fossil(['commit', '--close', '--allow-empty', '-m', 'close old'], work);
  await fossil(['update', 'trunk'], work);
  await later();
  await writeFile(work, 'README.md', 'two\n');
  await fossil(['commit', '-m', 'second commit'], work);
  await fossil(['tag', 'add', 'light', 'current'], work);
  await fossil(['close', '--force'], work);
  await fs.rm(work, { recursive: true, force: true });
}

async function fossilRefs(store: string): Promise<NativeRefs> {
  const cwd = path.dirname(store);
  const named = async (names: string[], dflt: string) => {
    const refs: NativeRef[] = [];
    for (const name of names) {
      const info = await fossil(['info', '-R', store, name], cwd);
      const hash = /^hash:\s+([0-9a-f]+) (\S+ \S+) UTC$/m.exec(info);
      const comment = /^comment:\s+(.*) \(user: (.*)\)$/m.exec(info);
      // `fossil info` shortens the hash to 40 digits
      const id = await fossil(
        ['sql', '-R', store, `SELECT uuid FROM blob WHERE uuid GLOB '${hash?.[1] ?? '-'}*'`],
        cwd,
      );
      refs.push({
        name,
        default: name === dflt,
        commit: {
          id: id.replace(/'/g, '').trim(),
          date: utc(`${(hash?.[2] ?? '').replace(' ', 'T')}Z`),
          subject: comment?.[1] ?? '',
          author: comment?.[2] ?? '',
        },
      });
    }
    return byName(refs);
  };
  const branches = lines(await fossil(['branch', 'ls', '-R', store], cwd)).map((l) =>
    l.replace(/^\s*\*?\s*/, ''),
  );
  const tags = lines(await fossil(['tag', 'list', '--tagtype', 'singleton', '-R', store], cwd));
  return { branch: await named(branches, 'trunk'), bookmark: undefined, tag: await named(tags, '') };
}

export const refFixture: Record<
  VcsKind,
  { build: (store: string) => Promise<void>; native: (store: string) => Promise<NativeRefs> }
> = {
  git: { build: buildGit, native: gitRefs },
  hg: { build: buildHg, native: hgRefs },
  fossil: { build: buildFossil, native: fossilRefs },
};
