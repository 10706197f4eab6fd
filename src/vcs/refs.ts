/**
 * Helpers the kinds share to answer `snapshot` and `moves` (driver.ts): running a command for its
 * output, parsing commit records, and the git/Fossil rule "one move per branch whose head changed"
 * plus the tag rule common to all kinds.
 */
import type {
  BranchMove,
  CommitInfo,
  HeadMove,
  MoveOptions,
  Snapshot,
  TagMove,
  VcsDriver,
} from './driver.ts';
import { execute, VcsCommandFailed } from './process/run.ts';

/**
 * Standard output of a command, which has no time limit (throws `VcsCommandFailed` when it exits
 * non-zero, is killed or cannot start). Started by the spawner, as `runCommand`.
 */
export async function output(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  maxBytes?: number,
): Promise<string> {
  const r = await execute(cmd, args, { env, ...(maxBytes === undefined ? {} : { maxBytes }) });
  if (r.code !== 0)
    throw new VcsCommandFailed(`Command failed: ${cmd} ${args.join(' ')}\n${r.stderr}`, r.code, r.stderr);
  return r.stdout.toString('utf8');
}

/** `filesAt` for a kind that reads one revision at a time. */
export async function eachAt<T>(
  revs: readonly string[],
  read: (rev: string) => Promise<T | undefined>,
): Promise<Map<string, T | undefined>> {
  const out = new Map<string, T | undefined>();
  for (const rev of new Set(revs)) out.set(rev, await read(rev));
  return out;
}

/** Separators of fields and records in commit listings (characters no VCS field contains). */
export const FIELD = '\x1f';
export const RECORD = '\x1e';

/** Records `id FIELD name FIELD email FIELD date FIELD message RECORD`, in order. */
export function commitRecords(text: string): CommitInfo[] {
  return text
    .split(RECORD)
    .map((r) => r.replace(/^\n/, ''))
    .filter((r) => r !== '')
    .map((r) => {
      const [id = '', name = '', email = '', date = '', message = ''] = r.split(FIELD);
      return { id, message: message.replace(/\n+$/, ''), author: { name, email, date: toUtc(date) } };
    });
}

function toUtc(d: string): string {
  const t = new Date(d);
  return Number.isNaN(t.getTime()) ? d : t.toISOString().replace('.000Z', 'Z');
}

/** Git and Fossil: one move per branch whose head changed, with the commits it gained. */
export async function branchMoves(
  before: Snapshot,
  after: Snapshot,
  opts: MoveOptions,
  gained: (head: string, branch: string) => Promise<{ commits: CommitInfo[]; total: number }>,
): Promise<BranchMove[]> {
  const moves: BranchMove[] = [];
  for (const [branch, head] of after.branches) {
    const old = before.branches.get(branch);
    if (old === head) continue;
    const { commits, total } = await gained(head, branch);
    moves.push({
      type: 'branch',
      name: branch,
      isDefault: branch === opts.defaultBranch,
      before: old ?? '',
      after: head,
      created: old === undefined,
      head,
      commits,
      total,
    });
  }
  return moves;
}

/** Tags created or moved, with their target commits as `commitsById` reads them. */
export async function tagMoves(
  before: Snapshot,
  after: Snapshot,
  commitsById: (ids: string[]) => Promise<CommitInfo[]>,
): Promise<TagMove[]> {
  const changed = [...after.tags].filter(([name, target]) => before.tags.get(name) !== target);
  if (changed.length === 0) return [];
  const infos = new Map((await commitsById([...new Set(changed.map(([, t]) => t))])).map((c) => [c.id, c]));
  return changed.map(([name, target]) => ({ type: 'tag', name, target, commit: infos.get(target) }));
}

/** Git and Fossil `refHeads`: a pull request names a branch. */
export const branchHeads = (s: Snapshot): Map<string, string> => new Map(s.branches);

/**
 * The pull request refs whose head differs between two snapshots (`VcsDriver.refHeads`), created
 * ones included; a ref that names nothing any more is not reported.
 */
export function headMoves(
  driver: Pick<VcsDriver, 'refHeads'>,
  before: Snapshot,
  after: Snapshot,
): Map<string, HeadMove> {
  const old = driver.refHeads(before);
  const out = new Map<string, HeadMove>();
  for (const [name, head] of driver.refHeads(after)) {
    const was = old.get(name) ?? '';
    if (was !== head) out.set(name, { oldHead: was, head });
  }
  return out;
}
