import { count, type Db } from '../db/query.ts';
import { intArray } from '../db/sql.ts';
import type { PipelineStatus } from './model.ts';

/** The queries of pipeline deletion (web only): which rows a deletion takes, and the delete. */

export type DeletableRow = { id: number; repo_id: number; number: number; status: PipelineStatus };

const FAILED = `status in ('failure', 'error')`;

/** The pipelines of `repoId` with these numbers, locked for the deleting transaction. */
export function lockNumbers(tx: Db, repoId: number, numbers: readonly number[]): Promise<DeletableRow[]> {
  return tx.execute<DeletableRow[]>(
    `select id, repo_id, number, status from pipelines
      where repo_id = ? and number = any(?::int[]) order by number for update`,
    [repoId, intArray(numbers)],
  );
}

/** The failed pipelines of `repoId` numbered up to `upTo`, locked for the deleting transaction. */
export function lockFailed(tx: Db, repoId: number, upTo: number): Promise<DeletableRow[]> {
  return tx.execute<DeletableRow[]>(
    `select id, repo_id, number, status from pipelines
      where repo_id = ? and number <= ? and ${FAILED} order by number for update`,
    [repoId, upTo],
  );
}

/** How many pipelines of `repoId` failed, and the newest number among all of them (0: none). */
export async function failedSummary(db: Db, repoId: number): Promise<{ failed: number; newest: number }> {
  const failed = await count(db, `select count(*) as n from pipelines where repo_id = ? and ${FAILED}`, [
    repoId,
  ]);
  return { failed, newest: await newestNumber(db, repoId) };
}

/** The highest number the repository's pipelines ever had among those still stored. */
export function newestNumber(tx: Db, repoId: number): Promise<number> {
  return count(tx, 'select coalesce(max(number), 0) as n from pipelines where repo_id = ?', [repoId]);
}

/** Deletes pipelines by id; their steps, log chunk records and clone tokens go by cascade. */
export async function deleteIds(tx: Db, ids: readonly number[]): Promise<void> {
  await tx.execute('delete from pipelines where id = any(?::int[])', [intArray(ids)]);
}
