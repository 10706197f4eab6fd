import { count, first, type Db } from '../db/query.ts';
import { intArray, textArray } from '../db/sql.ts';
import type { PipelineStatus } from '../pipelines/model.ts';
import type { StatusRow, StatusState } from './schemas.ts';

/** The queries of commit statuses (`commit_statuses`): one row per report, newest wins per context. */

const COLUMNS = `id, commit, state, context, description, target_url, creator_id, created_at, updated_at`;

export type NewStatus = {
  commit: string;
  state: StatusState;
  context: string;
  description: string | null;
  target_url: string | null;
  creatorId: number | null;
};

export async function insertStatus(tx: Db, repoId: number, s: NewStatus): Promise<StatusRow> {
  const rows = await tx.execute<Omit<StatusRow, 'latest'>[]>(
    `insert into commit_statuses (repo_id, commit, state, context, description, target_url, creator_id)
     values (?, ?, ?, ?, ?, ?, ?) returning ${COLUMNS}`,
    [repoId, s.commit, s.state, s.context, s.description, s.target_url, s.creatorId],
  );
  return { ...rows[0]!, latest: true };
}

export function countForCommit(db: Db, repoId: number, commit: string): Promise<number> {
  return count(db, 'select count(*) as n from commit_statuses where repo_id = ? and commit = ?', [
    repoId,
    commit,
  ]);
}

/** A page of a commit's statuses: the latest of each context first, then the older ones; newest first. */
export function pageForCommit(
  db: Db,
  repoId: number,
  commit: string,
  limit: number,
  offset: number,
): Promise<StatusRow[]> {
  return db.execute<StatusRow[]>(
    `select ${COLUMNS}, latest from (
       select ${COLUMNS}, row_number() over (partition by context order by id desc) = 1 as latest
         from commit_statuses where repo_id = ? and commit = ?) s
      order by latest desc, id desc limit ? offset ?`,
    [repoId, commit, limit, offset],
  );
}

/** The latest status of every context on each of these commits. */
export function latestFor(db: Db, repoId: number, commits: readonly string[]): Promise<StatusRow[]> {
  if (commits.length === 0) return Promise.resolve([]);
  return db.execute<StatusRow[]>(
    `select distinct on (commit, context) ${COLUMNS}, true as latest from commit_statuses
      where repo_id = ? and commit = any(?::text[]) order by commit, context, id desc`,
    [repoId, textArray(commits)],
  );
}

/** The latest status of one context on a commit. */
export function latestOf(
  db: Db,
  repoId: number,
  commit: string,
  context: string,
): Promise<Pick<StatusRow, 'state' | 'target_url' | 'description'> | undefined> {
  return first(
    db,
    `select state, target_url, description from commit_statuses
      where repo_id = ? and commit = ? and context = ? order by id desc limit 1`,
    [repoId, commit, context],
  );
}

export type PipelineFacts = {
  id: number;
  repo_id: number;
  number: number;
  commit_node: string;
  status: PipelineStatus;
};

/** What a pipeline's status report needs, for these pipelines. */
export function pipelineFacts(db: Db, ids: readonly number[]): Promise<PipelineFacts[]> {
  if (ids.length === 0) return Promise.resolve([]);
  return db.execute<PipelineFacts[]>(
    `select id, repo_id, number, commit_node, status from pipelines where id = any(?::int[]) order by id`,
    [intArray(ids)],
  );
}
