/** Git snapshots (branch heads, peeled tags) and the commits a branch gained. */
import { GIT } from '../constants.ts';
import type { CommitInfo, Snapshot, VcsDriver } from '../driver.ts';
import { branchMoves, commitRecords, FIELD, output, RECORD, tagMoves } from '../refs.ts';

const git = (dir: string, ...args: string[]) => output(GIT.bin, ['-C', dir, ...args], GIT.env);

export async function snapshot(dir: string): Promise<Snapshot> {
  const refs = await git(
    dir,
    'for-each-ref',
    `--format=%(refname)${FIELD}%(objectname)${FIELD}%(*objectname)`,
  );
  const branches = new Map<string, string>();
  const tags = new Map<string, string>();
  for (const line of refs.split('\n')) {
    const [ref = '', obj = '', peeled = ''] = line.split(FIELD);
    if (ref.startsWith('refs/heads/')) branches.set(ref.slice(11), obj);
    else if (ref.startsWith('refs/tags/')) tags.set(ref.slice(10), peeled !== '' ? peeled : obj);
  }
  const head = (await git(dir, 'symbolic-ref', '--quiet', 'HEAD').catch(() => '')).trim();
  const tip = branches.get(head.replace(/^refs\/heads\//, '')) ?? '';
  return { tip, branches, bookmarks: new Map(), tags, mark: 0 };
}

async function commits(dir: string, ids: string[]): Promise<CommitInfo[]> {
  if (ids.length === 0) return [];
  const text = await git(
    dir,
    'log',
    '--no-walk=unsorted',
    `--format=%H${FIELD}%an${FIELD}%ae${FIELD}%aI${FIELD}%B${RECORD}`,
    ...ids,
  );
  return commitRecords(text);
}

/** Commits reachable from `head` and from no branch head of `before`, newest first. */
async function newIds(dir: string, head: string, before: Snapshot, max: number) {
  const not = [...new Set(before.branches.values())];
  const ids = (await git(dir, 'rev-list', head, ...(not.length > 0 ? ['--not', ...not] : [])))
    .split('\n')
    .filter((l) => l !== '');
  return { ids: ids.slice(0, max), total: ids.length };
}

export const moves: VcsDriver['moves'] = async (dir, before, after, opts) => {
  const branches = await branchMoves(before, after, opts, async (head) => {
    const { ids, total } = await newIds(dir, head, before, opts.maxCommits);
    return { commits: await commits(dir, ids), total };
  });
  const tags = await tagMoves(before, after, (ids) => commits(dir, ids).catch(() => []));
  return [...branches, ...tags];
};

export async function fileAt(dir: string, rev: string, file: string): Promise<string | undefined> {
  return git(dir, 'show', `${rev}:${file}`).catch(() => undefined);
}
