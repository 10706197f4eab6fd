/**
 * Mercurial snapshots (named-branch heads, bookmarks, tags, the tip revision number), ref
 * moves (a bookmark that moved gains the new changesets among its ancestors; the new changesets
 * no moved bookmark covers count for their named branch) and the heads pull request refs name.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { HG } from '../constants.ts';
import type {
  BranchMove,
  CappedFile,
  CommitInfo,
  MoveOptions,
  RefMove,
  Snapshot,
  VcsDriver,
} from '../driver.ts';
import { commitRecords, eachAt, FIELD, RECORD, tagMoves } from '../refs.ts';
import type { ProcessPool } from '../process/pool.ts';
import { runcommand, warm } from './cmdserver.ts';

/** `hg ARGS` on a repository, through its pooled command server. */
type Hg = (dir: string, ...args: string[]) => Promise<string>;

/**
 * The bookkeeping of every push (a snapshot before and after, the new changesets per ref, the
 * pipeline file at the pushed head) runs through the pool's command servers: no `hg` start per
 * call. `prepare` starts the server of a repository whose push is being received.
 */
export function bookkeeping(
  pool: ProcessPool,
): Pick<VcsDriver, 'prepare' | 'snapshot' | 'moves' | 'filesAt' | 'refHeads'> {
  const hg: Hg = (dir, ...args) => runcommand(pool, dir, args);
  return {
    prepare: (dir) => warm(pool, dir),
    snapshot: (dir) => snapshot(hg, dir),
    moves: (...a) => moves(hg, ...a),
    filesAt: (...a) => filesAt(hg, ...a),
    refHeads,
  };
}

/**
 * What pull request refs name at a snapshot, as `triadops` resolves them: every named branch's
 * newest head without a bookmark (a bookmarked head is a line of its own), else its newest head;
 * `@` as the default named branch's while no bookmark has that name; bookmarks over both (a
 * bookmark wins a name clash).
 */
export function refHeads(s: Snapshot): Map<string, string> {
  const out = new Map<string, string>();
  const marked = new Set(s.bookmarks.values());
  for (const [branch, list] of s.branches) {
    const heads = list.split(',');
    out.set(branch, heads.findLast((h) => !marked.has(h)) ?? heads.at(-1)!);
  }
  const main = out.get(HG.defaultBranch);
  if (main !== undefined) out.set(HG.mainBookmark, main);
  for (const [name, node] of s.bookmarks) out.set(name, node);
  return out;
}

/**
 * The named branches with their heads, oldest first (closed heads count), the bookmarks, the tags
 * and the tip.
 */
async function snapshot(hg: Hg, dir: string): Promise<Snapshot> {
  // No changelog, no changesets: a repository's first push needs no command for its snapshot
  // before, while the bookkeeping server (started as the push arrived) is still starting.
  if (!(await hasChangelog(dir)))
    return { tip: '', branches: new Map(), bookmarks: new Map(), tags: new Map(), mark: -1 };
  const text = await hg(
    dir,
    'log',
    '--hidden',
    '-r',
    'sort(head() or bookmark() or tag() or tip, rev)',
    '-T',
    // `revset(...)` is computed once per command (the template engine caches it)
    `{node}${FIELD}{rev}${FIELD}{branch}${FIELD}{join(bookmarks,"\x1d")}${FIELD}{join(tags,"\x1d")}${FIELD}{ifcontains(rev, revset("head()"), "h")}\n`,
  );
  const branches = new Map<string, string>();
  const bookmarks = new Map<string, string>();
  const tags = new Map<string, string>();
  let tip = '';
  let mark = -1;
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [node = '', rev = '', branch = '', bms = '', tgs = '', head = ''] = line.split(FIELD);
    if (rev === '-1') continue; // the null revision of an empty repository
    for (const b of bms.split('\x1d')) if (b !== '') bookmarks.set(b, node);
    for (const t of tgs.split('\x1d')) {
      if (t === 'tip') {
        tip = node;
        mark = Number(rev);
      } else if (t !== '') tags.set(t, node);
    }
    if (head === '') continue; // a bookmark, tag or tip that is no head of its branch
    const heads = branches.get(branch);
    branches.set(branch, heads === undefined ? node : `${heads},${node}`);
  }
  return { tip, branches, bookmarks, tags, mark };
}

function hasChangelog(dir: string): Promise<boolean> {
  return fs.access(path.join(dir, '.hg', 'store', '00changelog.i')).then(
    () => true,
    () => false,
  );
}

async function commits(hg: Hg, dir: string, revset: string, limit: number): Promise<CommitInfo[]> {
  const text = await hg(
    dir,
    'log',
    '-r',
    revset,
    '-l',
    String(limit),
    '-T',
    `{node}${FIELD}{person(author)}${FIELD}{email(author)}${FIELD}{date|rfc3339date}${FIELD}{desc}${RECORD}`,
  );
  return commitRecords(text);
}

/**
 * The first `max` changesets of a revset, newest first, and how many it has counted up to
 * `max + 1` (a push event tells no more), in one command.
 */
async function listed(hg: Hg, dir: string, revset: string, max: number) {
  const list = await commits(hg, dir, revset, max + 1);
  return { commits: list.slice(0, max), total: list.length };
}

/**
 * The named branches having changesets in `revset` (a set closed under descendants on the same
 * branch, as the new changesets are), in the order of their first changeset there. Each such
 * branch has one of its heads in the set (following a changeset's children on its branch ends
 * at a head), so the heads are read, not every changeset: a first push of 10,000 changesets
 * reads a few lines.
 */
async function branchesIn(hg: Hg, dir: string, revset: string): Promise<string[]> {
  const heads = await hg(dir, 'log', '-r', `head() and (${revset})`, '-T', '{branch}\n');
  const names = [...new Set(heads.split('\n').filter((b) => b !== ''))];
  if (names.length < 2) return names;
  const firsts = names.map((b) => `first((${revset}) and ${branchSet(b)})`).join(' or ');
  const ordered = await hg(dir, 'log', '-r', `sort(${firsts}, rev)`, '-T', '{branch}\n');
  return [...new Set(ordered.split('\n').filter((b) => b !== ''))];
}

const branchSet = (name: string) => `branch(${JSON.stringify(`literal:${name}`)})`;

async function moves(
  hg: Hg,
  dir: string,
  before: Snapshot,
  after: Snapshot,
  opts: MoveOptions,
): Promise<RefMove[]> {
  const out: BranchMove[] = [];
  const fresh = `${before.mark + 1}:`;
  const covered: string[] = [];
  for (const [bm, node] of after.bookmarks) {
    const old = before.bookmarks.get(bm);
    if (old === node) continue;
    const revset = `reverse(ancestors(${node}) and ${fresh})`;
    covered.push(`ancestors(${node})`);
    // A bookmark moved onto changesets the repository already had: no new commits (and `N:`
    // past the tip would be an unknown revision).
    const gained =
      after.mark > before.mark ? await listed(hg, dir, revset, opts.maxCommits) : { commits: [], total: 0 };
    out.push({
      type: 'bookmark',
      name: bm,
      isDefault: bm === HG.mainBookmark,
      before: old === undefined ? '' : before.tip,
      after: after.tip,
      created: old === undefined,
      head: node,
      ...gained,
    });
  }
  if (after.mark > before.mark) {
    const rest = `${fresh}${covered.length > 0 ? ` and not (${covered.join(' or ')})` : ''}`;
    for (const branch of await branchesIn(hg, dir, rest)) {
      const gained = await listed(hg, dir, `reverse((${rest}) and ${branchSet(branch)})`, opts.maxCommits);
      const existed = before.branches.has(branch);
      out.push({
        type: 'branch',
        name: branch,
        isDefault: branch === opts.defaultBranch,
        before: existed ? before.tip : '',
        after: after.tip,
        created: !existed,
        head: gained.commits[0]?.id ?? after.tip,
        ...gained,
      });
    }
  }
  const tags = await tagMoves(before, after, (ids) =>
    commits(hg, dir, ids.join(' or '), ids.length).catch(() => []),
  );
  return [...out, ...tags];
}

/**
 * The file at each revision, through the bookkeeping command server (a few ms each): its size
 * first, its content only when the size is within the cap.
 */
const filesAt = (hg: Hg, dir: string, revs: readonly string[], file: string, maxBytes: number) =>
  // `path:` makes the file relative to the repository root, not the working directory
  eachAt(revs, async (rev): Promise<CappedFile | undefined> => {
    const size = Number(await hg(dir, 'files', '-r', rev, '-T', '{size}\n', `path:${file}`).catch(() => ''));
    if (!Number.isSafeInteger(size) || size < 0) return undefined;
    if (size > maxBytes) return { tooLarge: size };
    return hg(dir, 'cat', '-r', rev, `path:${file}`).catch(() => undefined);
  });
