import type { Db } from '../db/query.ts';
import { textArray } from '../db/sql.ts';

/**
 * The queries of the recorded commit sequence (table `commit_revs`): for kinds whose VCS numbers
 * no commits itself, each commit's `rev`, its position in the order commits arrived.
 */

/** Lock class of a repository's sequence (any constant every Triad process uses). */
const SEQUENCE_LOCK = 0x72657673; // "revs"

/** The recorded numbers of these commits (those recorded). */
export async function recordedRevs(
  db: Db,
  repoId: number,
  ids: readonly string[],
): Promise<Map<string, number>> {
  if (ids.length === 0) return new Map();
  const rows = await db.execute<{ commit_id: string; rev: number }[]>(
    'select commit_id, rev from commit_revs where repo_id = ? and commit_id = any(?::text[])',
    [repoId, textArray(ids)],
  );
  return new Map(rows.map((r) => [r.commit_id, Number(r.rev)]));
}

/**
 * Appends the commits of `ids` not recorded yet to the repository's sequence, in the order given,
 * numbered on from the highest number (0 for the first). A transaction-scoped lock per repository
 * queues concurrent appends (a change and a read catching up), so numbers never collide or move.
 */
export async function appendRevs(tx: Db, repoId: number, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  await tx.execute('select pg_advisory_xact_lock(?, ?)', [SEQUENCE_LOCK, repoId]);
  await tx.execute(
    `insert into commit_revs (repo_id, commit_id, rev)
     select ?, c.id,
            (select coalesce(max(rev), -1) from commit_revs where repo_id = ?) + row_number() over (order by c.ord)
       from unnest(?::text[]) with ordinality as c(id, ord)
      where not exists (select 1 from commit_revs r where r.repo_id = ? and r.commit_id = c.id)`,
    [repoId, repoId, textArray([...new Set(ids)]), repoId],
  );
}
