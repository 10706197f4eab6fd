/**
 * Git backups: one bundle per backup of the objects new since the previous one (`git bundle create
 * --all` minus everything reachable from the previous manifest's ref targets), none when nothing is
 * new (a ref deleted, or moved to a commit the store already has). The refs themselves are the
 * manifest's: a restore unbundles every bundle in order, then sets each ref and HEAD exactly.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { GIT } from '../../vcs/constants.ts';
import { gitDriver } from '../../vcs/git/driver.ts';
import { runChecked } from '../../vcs/process/run.ts';
import { COMMAND_TIMEOUT_MS, type Captured, type GitRefs, type KindBackup } from './manifest.ts';

async function git(dir: string, args: string[], input?: string): Promise<string> {
  const r = await runChecked(GIT.bin, ['-C', dir, ...args], {
    env: GIT.env,
    timeoutMs: COMMAND_TIMEOUT_MS,
    ...(input === undefined ? {} : { input }),
  });
  return r.stdout.toString('utf8');
}

type Ref = { id: string; type: string };

/** Every ref with the object it names and that object's type (`commit`, `tag`, …). */
async function readRefs(dir: string): Promise<Map<string, Ref>> {
  const out = await git(dir, ['for-each-ref', '--format=%(objectname) %(objecttype) %(refname)']);
  const refs = new Map<string, Ref>();
  for (const line of out.split('\n')) {
    const [id = '', type = '', name = ''] = line.split(' ');
    if (name !== '') refs.set(name, { id, type });
  }
  return refs;
}

/** HEAD as its file holds it (`ref: refs/heads/x` or an id): the one symbolic ref a repository has. */
async function readHead(dir: string): Promise<string> {
  return (await fs.readFile(path.join(dir, 'HEAD'), 'utf8')).trim();
}

/** The ids among `ids` that name an object of the repository (an old target may have been pruned since). */
async function present(dir: string, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const out = await git(dir, ['cat-file', '--batch-check'], ids.map((id) => `${id}\n`).join(''));
  return out
    .split('\n')
    .filter((l) => l !== '' && !l.endsWith(' missing'))
    .map((l) => l.split(' ')[0]!);
}

/**
 * Whether the refs name anything the previous backups lack. Cheaper than asking `git bundle`,
 * which refuses an empty bundle only by an error message: a target that is not a commit (an
 * annotated tag) and is not a previous target is new; commits are new when one is not reachable
 * from the previous targets.
 */
async function hasNew(dir: string, targets: readonly Ref[], known: readonly string[]): Promise<boolean> {
  const knownSet = new Set(known);
  const fresh = targets.filter((r) => !knownSet.has(r.id));
  if (fresh.some((r) => r.type !== 'commit')) return true;
  if (fresh.length === 0) return false;
  const commits = [...new Set(fresh.map((r) => r.id))];
  const out = await git(dir, ['rev-list', '--max-count=1', '--stdin'], revInput(commits, known));
  return out.trim() !== '';
}

/** rev-list arguments on standard input (a repository's targets can be too many for a command line). */
const revInput = (include: readonly string[], exclude: readonly string[]) =>
  [...include, ...exclude.map((id) => `^${id}`)].map((l) => `${l}\n`).join('');

export const gitBackup: KindBackup<GitRefs> = {
  ext: 'bundle',
  replaces: false,
  async capture(dir, prev, work): Promise<Captured<GitRefs>> {
    const refs = await readRefs(dir);
    const head = await readHead(dir);
    const targets = [...refs.values()];
    // A detached HEAD's commit is a target too: `--all` bundles it.
    if (!head.startsWith('ref: ')) targets.push({ id: head, type: 'commit' });
    const heads = [...new Set(targets.map((r) => r.id))].sort();
    const known = await present(dir, prev?.heads ?? []);
    let data: string | undefined;
    if (await hasNew(dir, targets, known)) {
      data = path.join(work, 'new.bundle');
      await git(dir, ['bundle', 'create', '--quiet', data, '--all', '--stdin'], revInput([], known));
    }
    return { data, heads, refs: { head, refs: Object.fromEntries([...refs].map(([n, r]) => [n, r.id])) } };
  },

  async restore(stage, objects, m, work) {
    await gitDriver.init(stage);
    for (const [i, key] of objects.keys.entries()) {
      const file = path.join(work, `${i}.bundle`);
      await objects.fetch(key, file);
      // Checks the bundle's prerequisites (the earlier bundles brought them), then indexes its pack.
      await git(stage, ['bundle', 'unbundle', file]);
      await fs.rm(file);
    }
    const now = await readRefs(stage);
    const commands = [
      ...[...now.keys()].filter((n) => m.refs.refs[n] === undefined).map((n) => `delete ${n}\n`),
      ...Object.entries(m.refs.refs).map(([n, id]) => `update ${n} ${id}\n`),
    ];
    if (commands.length > 0) await git(stage, ['update-ref', '--stdin'], commands.join(''));
    const head = m.refs.head;
    if (head.startsWith('ref: ')) await git(stage, ['symbolic-ref', 'HEAD', head.slice(5)]);
    else await git(stage, ['update-ref', '--no-deref', 'HEAD', head]);
    // What the store held must give exactly the recorded refs; anything else is a failed restore.
    const after = await readRefs(stage);
    const got = JSON.stringify([...after].map(([n, r]) => [n, r.id]).sort());
    const want = JSON.stringify(Object.entries(m.refs.refs).sort());
    if (got !== want || (await readHead(stage)) !== head)
      throw new Error(`git restore: the refs differ from the manifest`);
  },
};
