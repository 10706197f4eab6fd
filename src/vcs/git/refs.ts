/** Git snapshots (branch heads, peeled tags) and the commits a branch gained. */
import fs from 'node:fs/promises';
import path from 'node:path';
import { GIT } from '../constants.ts';
import type { CappedFile, CommitInfo, Snapshot, VcsDriver } from '../driver.ts';
import { branchMoves, commitRecords, FIELD, output, RECORD, tagMoves } from '../refs.ts';
import { execute, runCommand, VcsCommandFailed } from '../process/run.ts';

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
  // HEAD names the default branch: read from its file, as `git symbolic-ref` would (a detached
  // HEAD or none: no tip), which saves a command per snapshot.
  const head = await fs.readFile(path.join(dir, 'HEAD'), 'utf8').catch(() => '');
  const symbolic = /^ref: refs\/heads\/(.+)$/.exec(head.trim());
  const tip = symbolic === null ? '' : (branches.get(symbolic[1]!) ?? '');
  return { tip, branches, bookmarks: new Map(), tags, mark: 0 };
}

const FORMAT = `--format=%H${FIELD}%an${FIELD}%ae${FIELD}%aI${FIELD}%B${RECORD}`;

async function commits(dir: string, ids: string[]): Promise<CommitInfo[]> {
  if (ids.length === 0) return [];
  return commitRecords(await git(dir, 'log', '--no-walk=unsorted', FORMAT, ...ids));
}

/**
 * Commits reachable from `head` and from no branch head of `before`, newest first: the first
 * `max` with their fields, and how many there are counted up to `max + 1` (all a push event
 * tells beyond the list), in one `git log` that stops there: a first push of a long history
 * reads 51 commits, not all of them.
 */
async function gained(dir: string, head: string, before: Snapshot, max: number) {
  const not = [...new Set(before.branches.values())];
  const text = await git(dir, 'log', `--max-count=${max + 1}`, FORMAT, head, '--not', ...not, '--');
  const list = commitRecords(text);
  return { commits: list.slice(0, max), total: list.length };
}

export const moves: VcsDriver['moves'] = async (dir, before, after, opts) => {
  const branches = await branchMoves(before, after, opts, (head) =>
    gained(dir, head, before, opts.maxCommits),
  );
  const tags = await tagMoves(before, after, (ids) => commits(dir, ids).catch(() => []));
  return [...branches, ...tags];
};

/**
 * The file at each revision: the sizes from one `git cat-file --batch-check` (per request line
 * `REV:FILE`, `OID TYPE SIZE` or `REV:FILE missing`), then the contents within the cap from one
 * `git cat-file --batch` (a header as above, then the content).
 */
export async function filesAt(
  dir: string,
  revs: readonly string[],
  file: string,
  maxBytes: number,
): Promise<Map<string, CappedFile | undefined>> {
  const out = new Map<string, CappedFile | undefined>();
  const sizes = await runCommand(GIT.bin, ['-C', dir, 'cat-file', '--batch-check'], {
    env: GIT.env,
    input: [...new Set(revs)].map((rev) => `${rev}:${file}\n`).join(''),
    timeoutMs: 60_000,
  }).then(
    (r) => r.stdout.toString('utf8').split('\n'),
    () => [] as string[],
  );
  const unique: string[] = [];
  for (const [i, rev] of [...new Set(revs)].entries()) {
    const head = /^[0-9a-f]+ blob (\d+)$/.exec(sizes[i] ?? '');
    if (head === null) continue;
    if (Number(head[1]) > maxBytes) out.set(rev, { tooLarge: Number(head[1]) });
    else unique.push(rev);
  }
  for (const rev of revs) if (!out.has(rev) && !unique.includes(rev)) out.set(rev, undefined);
  if (unique.length === 0) return out;
  const input = unique.map((rev) => `${rev}:${file}\n`).join('');
  const buf = await runCommand(GIT.bin, ['-C', dir, 'cat-file', '--batch'], {
    env: GIT.env,
    input,
    timeoutMs: 60_000,
  }).then(
    (r) => r.stdout,
    () => Buffer.alloc(0), // as for a missing file: no pipeline
  );
  let at = 0;
  for (const rev of unique) {
    const nl = buf.indexOf(10, at);
    if (nl < 0) break;
    const head = /^[0-9a-f]+ (\S+) (\d+)$/.exec(buf.toString('utf8', at, nl));
    at = nl + 1;
    if (head === null) continue;
    const size = Number(head[2]);
    if (head[1] === 'blob') out.set(rev, buf.toString('utf8', at, at + size));
    at += size + 1;
  }
  for (const rev of unique) if (!out.has(rev)) out.set(rev, undefined);
  return out;
}

/**
 * Commits reachable from every ref and from none of `known`, oldest first (parents before
 * children): `git rev-list --topo-order --reverse --all`, the `known` ids given as `^id` lines on
 * standard input (any number of them).
 */
export const arrivals: NonNullable<VcsDriver['arrivals']> = async (dir, known) => {
  const args = ['-C', dir, 'rev-list', '--topo-order', '--reverse', '--all', '--stdin'];
  const input = known.map((id) => `^${id}\n`).join('');
  const r = await execute(GIT.bin, args, { env: GIT.env, input, maxBytes: 1024 * 1024 * 1024 });
  if (r.code !== 0) throw new VcsCommandFailed(`git rev-list failed: ${r.stderr.trim()}`, r.code, r.stderr);
  return r.stdout
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '');
};
