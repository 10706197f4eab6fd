import { one, type Db } from './query.ts';

/**
 * The one allocator of per-repository numbers (the `number` in `/repos/:org/:repo/<kind>/:number`).
 * Call it inside the transaction that inserts the row: a transaction-scoped advisory lock per
 * (kind, repository) queues concurrent creates, so they get consecutive numbers and never collide;
 * a rolled-back create frees its number. Each kind has its own sequence.
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
    `select coalesce(max(number), 0) + 1 as n from ${k.table} where repo_id = ?`,
    [repoId],
  );
  return Number(row.n);
}
