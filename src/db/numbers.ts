import { one, type Db } from './query.ts';

/**
 * The one allocator of per-repository numbers (the `number` in `/repos/:org/:repo/<kind>/:number`).
 * Call it inside the transaction that inserts the row: a transaction-scoped advisory lock per
 * (kind, repository) queues concurrent creates, so they get consecutive numbers and never collide;
 * a rolled-back create frees its number. Each kind has its own sequence; a number once used is not
 * handed out again after its row is deleted (`keepNumbersUsed`).
 */
const KINDS = {
  // lock class ids: any constant works as long as every Triad process uses the same one
  issues: { table: 'issues', lock: 0x69737375 }, // "issu"
  pipelines: { table: 'pipelines', lock: 0x70697065 }, // "pipe"
  pulls: { table: 'pulls', lock: 0x70756c6c }, // "pull"
} as const;
export type NumberedKind = keyof typeof KINDS;

export async function nextNumber(tx: Db, kind: NumberedKind, repoId: number): Promise<number> {
  const k = KINDS[kind];
  await tx.execute('select pg_advisory_xact_lock(?, ?)', [k.lock, repoId]);
  const row = await one<{ n: number }>(
    tx,
    `select greatest(
       (select coalesce(max(number), 0) from ${k.table} where repo_id = ?),
       (select coalesce(max(floor), 0) from number_floors where repo_id = ? and kind = ?)) + 1 as n`,
    [repoId, repoId, kind],
  );
  return Number(row.n);
}

/**
 * Records that numbers up to `upTo` of `kind` were used in the repository, so a deletion of the
 * newest rows never hands their numbers out again. Call it in the deleting transaction.
 */
export async function keepNumbersUsed(
  tx: Db,
  kind: NumberedKind,
  repoId: number,
  upTo: number,
): Promise<void> {
  await tx.execute(
    `insert into number_floors as f (repo_id, kind, floor) values (?, ?, ?)
     on conflict (repo_id, kind) do update set floor = greatest(f.floor, excluded.floor)`,
    [repoId, kind, upTo],
  );
}
