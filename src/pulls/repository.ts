import { Assignments, byNumbersIn, count, first, one, type Db } from '../db/query.ts';
import { isUniqueViolation, textArray } from '../db/sql.ts';
import { textSource, type TextSource } from '../db/search.ts';
import type { MergeableState, PullStatus } from './schemas.ts';

/** The queries of pull requests: `pulls` and `pull_comments` only. */

export type PullRow = {
  id: number;
  repo_id: number;
  number: number;
  title: string;
  body: string;
  status: PullStatus;
  source_ref: string;
  target_ref: string;
  author_id: number | null;
  head_commit: string;
  base_commit: string;
  mergeable_state: MergeableState;
  conflicted_files: string[];
  commits_ahead: number;
  commits_behind: number;
  merged_by: number | null;
  merged_at: Date | string | null;
  merge_commit: string | null;
  comment_count: number;
  created_at: Date | string;
  updated_at: Date | string;
  closed_at: Date | string | null;
};
export type PullCommentRow = {
  id: number;
  body: string;
  author_id: number | null;
  created_at: Date | string;
};

/** The last known mergeability stored on a row. */
export type StoredCheck = Pick<
  PullRow,
  'head_commit' | 'base_commit' | 'mergeable_state' | 'conflicted_files' | 'commits_ahead' | 'commits_behind'
>;

const PULL = `p.id, p.repo_id, p.number, p.title, p.body, p.status, p.source_ref, p.target_ref, p.author_id,
  p.head_commit, p.base_commit, p.mergeable_state, p.conflicted_files, p.commits_ahead, p.commits_behind,
  p.merged_by, p.merged_at, p.merge_commit, p.comment_count, p.created_at, p.updated_at, p.closed_at`;
const COMMENT = 'id, body, author_id, created_at';

export function insertPull(
  tx: Db,
  p: Pick<PullRow, 'repo_id' | 'number' | 'title' | 'body' | 'source_ref' | 'target_ref' | 'author_id'> &
    StoredCheck,
): Promise<PullRow | undefined> {
  // `on conflict do nothing`: another open pull request of the same refs exists (the partial index).
  return first<PullRow>(
    tx,
    `insert into pulls as p (repo_id, number, title, body, status, source_ref, target_ref, author_id,
       head_commit, base_commit, mergeable_state, conflicted_files, commits_ahead, commits_behind)
     values (?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?::text[], ?, ?)
     on conflict do nothing returning ${PULL}`,
    [
      p.repo_id,
      p.number,
      p.title,
      p.body,
      p.source_ref,
      p.target_ref,
      p.author_id,
      p.head_commit,
      p.base_commit,
      p.mergeable_state,
      textArray(p.conflicted_files),
      p.commits_ahead,
      p.commits_behind,
    ],
  );
}

export function pullByNumber(
  db: Db,
  repoId: number,
  number: number,
  lock: boolean,
): Promise<PullRow | undefined> {
  return first<PullRow>(
    db,
    `select ${PULL} from pulls p where p.repo_id = ? and p.number = ?${lock ? ' for update' : ''}`,
    [repoId, number],
  );
}

export function countByStatus(db: Db, repoId: number, status: PullStatus): Promise<number> {
  return count(db, 'select count(*) as n from pulls where repo_id = ? and status = ?', [repoId, status]);
}

export function page(
  db: Db,
  repoId: number,
  status: PullStatus,
  limit: number,
  offset: number,
): Promise<PullRow[]> {
  return db.execute<PullRow[]>(
    `select ${PULL} from pulls p where p.repo_id = ? and p.status = ?
      order by p.number desc limit ? offset ?`,
    [repoId, status, limit, offset],
  );
}

/** Open pull requests whose source or target is one of `refs`, locked for the change. */
export function openTouching(tx: Db, repoId: number, refs: readonly string[]): Promise<PullRow[]> {
  if (refs.length === 0) return Promise.resolve([]);
  return tx.execute<PullRow[]>(
    `select ${PULL} from pulls p
      where p.repo_id = ? and p.status = 'open'
        and (p.source_ref = any(?::text[]) or p.target_ref = any(?::text[]))
      order by p.number for update`,
    [repoId, textArray(refs), textArray(refs)],
  );
}

export type PullChange = {
  title?: string;
  body?: string;
  status?: PullStatus;
  check?: StoredCheck;
  merged?: { by: number | null; commit: string };
};

/**
 * Applies a change; `status` sets or clears `closed_at`, `merged` sets the merge fields (and
 * `closed_at`). Undefined when the change would make a second open pull request of the same refs.
 */
export async function updatePull(tx: Db, id: number, c: PullChange): Promise<PullRow | undefined> {
  const a = new Assignments('updated_at = now()');
  if (c.title !== undefined) a.add('title = ?', c.title);
  if (c.body !== undefined) a.add('body = ?', c.body);
  if (c.status !== undefined) {
    a.add('status = ?', c.status);
    a.add(c.status === 'open' ? 'closed_at = null' : 'closed_at = now()');
  }
  if (c.check !== undefined) {
    const k = c.check;
    a.add(
      'head_commit = ?, base_commit = ?, mergeable_state = ?, conflicted_files = ?::text[], commits_ahead = ?, commits_behind = ?',
      k.head_commit,
      k.base_commit,
      k.mergeable_state,
      textArray(k.conflicted_files),
      k.commits_ahead,
      k.commits_behind,
    );
  }
  if (c.merged !== undefined)
    a.add('merged_by = ?, merged_at = now(), merge_commit = ?', c.merged.by, c.merged.commit);
  try {
    return await first<PullRow>(tx, `update pulls p set ${a.sql} where p.id = ? returning ${PULL}`, [
      ...a.params,
      id,
    ]);
  } catch (e) {
    if (isUniqueViolation(e)) return undefined;
    throw e;
  }
}

export async function insertComment(
  tx: Db,
  pullId: number,
  authorId: number,
  body: string,
): Promise<PullCommentRow> {
  const c = await one<PullCommentRow>(
    tx,
    `insert into pull_comments (pull_id, author_id, body) values (?, ?, ?) returning ${COMMENT}`,
    [pullId, authorId, body],
  );
  await tx.execute('update pulls set comment_count = comment_count + 1, updated_at = now() where id = ?', [
    pullId,
  ]);
  return c;
}

export function comments(db: Db, pullId: number): Promise<PullCommentRow[]> {
  return db.execute<PullCommentRow[]>(`select ${COMMENT} from pull_comments where pull_id = ? order by id`, [
    pullId,
  ]);
}

// ----- search ------------------------------------------------------------------------------------

/** The pull requests of these numbers, in the order given (numbers naming none are left out). */
export function byNumbers(db: Db, repoId: number, numbers: readonly number[]): Promise<PullRow[]> {
  return byNumbersIn<PullRow>(db, `select ${PULL} from pulls p`, 'p', repoId, numbers);
}

/** Full-text search of the repository's pull requests (title and body; see db/search.ts). */
export function textSearch(em: () => Db): TextSource {
  return textSource('pulls', em);
}
