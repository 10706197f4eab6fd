/**
 * Server repositories for the backup tests, made by each driver's `init` (so the layout is the
 * one Triad stores) and changed by the stock clients working on the local path: a git working
 * clone pushing to the bare repository, an hg clone pushing to the repository, a Fossil check-out
 * opened on the repository file (its commits write the file). `state` prints what a restore must
 * reproduce, in a form two repositories compare by.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fossilDriver } from '../../src/vcs/fossil/driver.ts';
import { gitDriver } from '../../src/vcs/git/driver.ts';
import { createHgDriver } from '../../src/vcs/hg/driver.ts';
import type { VcsKind } from '../../src/vcs/index.ts';
import { ProcessPool } from '../../src/vcs/process/pool.ts';
import { ok, sh, writeFile } from './vcs.ts';

export type Files = Record<string, string | Buffer>;

export type ServerRepo = {
  kind: VcsKind;
  /** The repository as Triad stores it (bare git dir, hg dir, fossil file). */
  srv: string;
  /** The client's working directory. */
  work: string;
  /** Commits `files` on the working copy's current line; answers the new commit's id (not pushed). */
  commit(files: Files, message: string): Promise<string>;
};

async function write(dir: string, files: Files): Promise<void> {
  for (const [f, content] of Object.entries(files)) await writeFile(dir, f, content);
}

export async function gitServer(root: string): Promise<ServerRepo> {
  const srv = path.join(root, 'srv.git');
  const work = path.join(root, 'work');
  await gitDriver.init(srv);
  await ok('git', ['clone', '-q', srv, work], root);
  await ok('git', ['symbolic-ref', 'HEAD', 'refs/heads/main'], work);
  return {
    kind: 'git',
    srv,
    work,
    async commit(files, message) {
      await write(work, files);
      await ok('git', ['add', '-A'], work);
      await ok('git', ['commit', '-q', '-m', message], work);
      return (await ok('git', ['rev-parse', 'HEAD'], work)).trim();
    },
  };
}

export async function hgServer(root: string): Promise<ServerRepo> {
  const srv = path.join(root, 'srv.hg');
  const work = path.join(root, 'work');
  // `init` does not use the pool (only the push bookkeeping does).
  await createHgDriver(new ProcessPool()).init(srv);
  await ok('hg', ['clone', '-q', srv, work], root);
  return {
    kind: 'hg',
    srv,
    work,
    async commit(files, message) {
      await write(work, files);
      await ok('hg', ['commit', '-q', '-A', '-m', message], work);
      return (await ok('hg', ['log', '-r', '.', '-T', '{node}'], work)).trim();
    },
  };
}

export async function fossilServer(root: string): Promise<ServerRepo> {
  const srv = path.join(root, 'srv.fossil');
  const work = path.join(root, 'work');
  await fossilDriver.init(srv, 'acme/backup');
  // the client's user (USER=ada in the tests' environment) must exist in the repository
  await ok('fossil', ['user', 'new', 'ada', 'ada@example.test', 'secret', '-R', srv], root);
  await fs.mkdir(work);
  await ok('fossil', ['open', srv], work);
  return {
    kind: 'fossil',
    srv,
    work,
    async commit(files, message) {
      await write(work, files);
      await ok('fossil', ['addremove'], work);
      const out = await ok('fossil', ['commit', '--hash', '--no-warnings', '-m', message], work);
      const id = /New_Version: ([0-9a-f]+)/.exec(out)?.[1];
      if (id === undefined) throw new Error(`fossil commit: ${out}`);
      return id;
    },
  };
}

/** `hg push` that accepts "nothing to push" (exit 1). */
export async function hgPush(work: string, ...args: string[]): Promise<void> {
  const r = await sh('hg', ['push', '-q', ...args], work);
  if (r.code !== 0 && r.code !== 1) throw new Error(`hg push failed (${r.code}): ${r.stdout}${r.stderr}`);
}

export async function sha256(file: string): Promise<string> {
  return createHash('sha256')
    .update(await fs.readFile(file))
    .digest('hex');
}

/** Everything a restore must reproduce of a repository, as text (equal text: equal repositories). */
export async function state(kind: VcsKind, repo: string): Promise<string> {
  const cwd = path.dirname(repo);
  switch (kind) {
    case 'git': {
      const refs = await ok(
        'git',
        ['-C', repo, 'for-each-ref', '--format=%(refname) %(objectname) %(objecttype) %(*objectname)'],
        cwd,
      );
      const log = await ok('git', ['-C', repo, 'log', '--all', '--format=%H %P'], cwd);
      const head = await ok('git', ['-C', repo, 'symbolic-ref', 'HEAD'], cwd);
      return `refs:\n${refs}log:\n${log}HEAD: ${head}`;
    }
    case 'hg': {
      const hg = (...args: string[]) => ok('hg', ['-R', repo, ...args], cwd);
      const log = await hg('log', '-r', 'all()', '-T', '{rev} {node} {phase} {branch} {bookmarks} {tags}\n');
      const heads = await hg('heads', '--closed', '-T', '{node} {branch}\n');
      return `log:\n${log}bookmarks:\n${await hg('bookmarks')}heads:\n${heads}tags:\n${await hg('tags')}`;
    }
    case 'fossil': {
      const fossil = (...args: string[]) => ok('fossil', [...args, '-R', repo], cwd);
      const branches = await fossil('branch', 'list', '--all');
      const tags = await fossil('tag', 'list');
      const timeline = await fossil(
        'sql',
        `select b.uuid, e.type from event e join blob b on b.rid = e.objid order by e.objid`,
      );
      return `branches:\n${branches}tags:\n${tags}timeline:\n${timeline}`;
    }
  }
}
