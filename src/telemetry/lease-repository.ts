import type { Db } from '../db/query.ts';

/** The queries of the cluster leases (table `cluster_leases`). */

/**
 * Takes or renews the lease `name` for `holder` for `seconds` (one statement, autocommit): it is
 * granted when nobody holds it, when `holder` already does, or when the holder's time ran out.
 * Answers whether `holder` holds it now.
 */
export async function takeLease(db: Db, name: string, holder: string, seconds: number): Promise<boolean> {
  const rows = await db.execute<{ holder: string }[]>(
    `insert into cluster_leases (name, holder, expires_at)
     values (?, ?, now() + make_interval(secs => ?))
     on conflict (name) do update set holder = excluded.holder, expires_at = excluded.expires_at
     where cluster_leases.holder = excluded.holder or cluster_leases.expires_at < now()
     returning holder`,
    [name, holder, seconds],
  );
  return rows.length === 1;
}

/** Gives the lease up (when `holder` holds it), so another replica takes it at once. */
export async function releaseLease(db: Db, name: string, holder: string): Promise<void> {
  await db.execute('delete from cluster_leases where name = ? and holder = ?', [name, holder]);
}
