import { first, type Db } from '../db/query.ts';
import type { DeletableRow } from './deletion-repository.ts';

/** The queries of the retention policy (retention.ts): its lock and the pipelines it takes. */

/** Advisory lock class of the retention run (any constant every Triad process shares): "rtnt". */
const RETENTION_LOCK = 0x72746e74;

/**
 * Takes the retention lock for the transaction, or answers false when another replica holds it.
 * Transaction-scoped, so it works through a transaction-mode pooler and goes with the commit.
 */
export async function tryLock(tx: Db): Promise<boolean> {
  const row = await first<{ ok: boolean }>(tx, 'select pg_try_advisory_xact_lock(?) as ok', [RETENTION_LOCK]);
  return row?.ok === true;
}

export type RetentionPolicy = {
  /** Pipelines finished more than this many days ago go. */
  days: number | undefined;
  /** Only the newest this many finished pipelines of each repository stay. */
  keep: number | undefined;
};

const FINISHED = `status in ('success', 'failure', 'cancelled', 'error')`;

/**
 * Up to `limit` finished pipelines the policy deletes, locked (rows another transaction holds are
 * left for the next run): finished more than `days` ago, or beyond the newest `keep` finished
 * pipelines of their repository (by number), except the newest finished pipeline of each branch
 * or tag of a repository. Pending and running pipelines are never taken.
 */
export function expired(tx: Db, policy: RetentionPolicy, limit: number): Promise<DeletableRow[]> {
  return tx.execute<DeletableRow[]>(
    `select id, repo_id, number, status from pipelines
      where ${FINISHED} and id in (
        select id from (
          select id, coalesce(finished_at, created_at) as ended,
                 row_number() over (partition by repo_id order by number desc) as place,
                 row_number() over (partition by repo_id, branch, tag order by number desc) as ref_place
            from pipelines where ${FINISHED}) f
         where ref_place > 1
           and ((?::int is not null and ended < now() - ?::int * interval '1 day')
             or (?::int is not null and place > ?::int)))
      order by id limit ? for update skip locked`,
    [policy.days ?? null, policy.days ?? null, policy.keep ?? null, policy.keep ?? null, limit],
  );
}
