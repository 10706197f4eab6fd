import { count, first, type Db } from '../db/query.ts';

/**
 * The queries of pinned issues (`issue_pins`): a repository's pins in pin order, and pinning and
 * unpinning under a per-repository lock, so concurrent pins never pass the cap.
 */

/** Lock class of the pins of one repository ("pins"). */
const PINS_LOCK = 0x70696e73;

/** Queues the pin changes of one repository until the transaction ends. */
export async function lockPins(tx: Db, repoId: number): Promise<void> {
  await tx.execute('select pg_advisory_xact_lock(?, ?)', [PINS_LOCK, repoId]);
}

/** The numbers of the repository's pinned issues, in pin order. */
export async function pinnedNumbers(db: Db, repoId: number): Promise<number[]> {
  const rows = await db.execute<{ number: number }[]>(
    `select i.number from issue_pins p join issues i on i.id = p.issue_id
      where p.repo_id = ? order by p.position`,
    [repoId],
  );
  return rows.map((r) => r.number);
}

export function pinCount(db: Db, repoId: number): Promise<number> {
  return count(db, 'select count(*)::int as n from issue_pins where repo_id = ?', [repoId]);
}

export async function isPinned(db: Db, issueId: number): Promise<boolean> {
  return (await first(db, 'select 1 from issue_pins where issue_id = ?', [issueId])) !== undefined;
}

/** Pins an issue last in the repository's order (nothing when it is pinned already). */
export async function insertPin(tx: Db, repoId: number, issueId: number, userId: number): Promise<void> {
  await tx.execute(
    `insert into issue_pins (issue_id, repo_id, position, pinned_by)
     select ?, ?, coalesce(max(position), 0) + 1, ? from issue_pins where repo_id = ?
     on conflict (issue_id) do nothing`,
    [issueId, repoId, userId, repoId],
  );
}

export async function deletePin(tx: Db, issueId: number): Promise<void> {
  await tx.execute('delete from issue_pins where issue_id = ?', [issueId]);
}
