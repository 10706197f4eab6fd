import { first, type Db } from '../db/query.ts';
import { intArray } from '../db/sql.ts';
import type { LogChunkRow } from './repository.ts';

/**
 * The queries of step-log compaction (tables `step_log_compactions`, `step_log_chunks`,
 * `log_blob_garbage`; migration 0023): steps marked for compaction, the swap of a step's chunk
 * rows for one, and objects waiting to be deleted.
 */

/**
 * Claims up to `limit` due steps for `leaseMs` (their marker moves past the lease, so another
 * replica does not take them meanwhile, and a process that dies leaves them due again).
 */
export async function claimDue(db: Db, limit: number, leaseMs: number): Promise<number[]> {
  const rows = await db.execute<{ step_id: number }[]>(
    `update step_log_compactions set due_at = now() + (? * interval '1 millisecond')
      where step_id in (select step_id from step_log_compactions where due_at <= now()
                         order by due_at limit ? for update skip locked)
      returning step_id`,
    [leaseMs, limit],
  );
  return rows.map((r) => r.step_id).sort((a, b) => a - b);
}

/** Every chunk of a step with its pipeline (undefined when the step is gone). */
export async function chunksOf(
  db: Db,
  stepId: number,
): Promise<{ pipelineId: number; chunks: LogChunkRow[] } | undefined> {
  const step = await first<{ pipeline_id: number }>(
    db,
    'select pipeline_id from pipeline_steps where id = ?',
    [stepId],
  );
  if (step === undefined) return undefined;
  const chunks = await db.execute<LogChunkRow[]>(
    'select "offset", size, blob_key from step_log_chunks where step_id = ? order by "offset"',
    [stepId],
  );
  return { pipelineId: step.pipeline_id, chunks };
}

/** Locks the step row (as a log append does), so no chunk is stored meanwhile; false when it is gone. */
export async function lockStep(tx: Db, stepId: number): Promise<boolean> {
  return (await first(tx, 'select id from pipeline_steps where id = ? for update', [stepId])) !== undefined;
}

/** The chunks of a step within `[start, end)` (by their start offset). */
export function chunksBetween(tx: Db, stepId: number, start: number, end: number): Promise<LogChunkRow[]> {
  return tx.execute<LogChunkRow[]>(
    `select "offset", size, blob_key from step_log_chunks
      where step_id = ? and "offset" >= ? and "offset" < ? order by "offset"`,
    [stepId, start, end],
  );
}

/** Replaces the chunks starting in `[start, end)` by one row for `key`. */
export async function replaceChunks(
  tx: Db,
  stepId: number,
  start: number,
  end: number,
  key: string,
): Promise<void> {
  await tx.execute('delete from step_log_chunks where step_id = ? and "offset" >= ? and "offset" < ?', [
    stepId,
    start,
    end,
  ]);
  await tx.execute('insert into step_log_chunks (step_id, "offset", size, blob_key) values (?, ?, ?, ?)', [
    stepId,
    start,
    end - start,
    key,
  ]);
}

/** How many chunk rows the step has. */
export async function chunkCount(tx: Db, stepId: number): Promise<number> {
  const row = await first<{ n: string }>(tx, 'select count(*) as n from step_log_chunks where step_id = ?', [
    stepId,
  ]);
  return Number(row?.n ?? 0);
}

/** The step is done: its marker goes (or, `again`, it becomes due at once: chunks came meanwhile). */
export async function finish(tx: Db, stepId: number, again: boolean): Promise<void> {
  if (again) await tx.execute('update step_log_compactions set due_at = now() where step_id = ?', [stepId]);
  else await tx.execute('delete from step_log_compactions where step_id = ?', [stepId]);
}

/** The step failed to compact: it is tried again after `ms`. */
export async function postpone(db: Db, stepId: number, ms: number): Promise<void> {
  await db.execute(
    `update step_log_compactions set due_at = now() + (? * interval '1 millisecond') where step_id = ?`,
    [ms, stepId],
  );
}

// ----- objects to delete ---------------------------------------------------------------------------

/** Objects to delete after `ms` (unless a chunk row points to them then); answers their ids. */
export async function addGarbage(
  db: Db,
  stepId: number,
  keys: readonly string[],
  ms: number,
): Promise<number[]> {
  if (keys.length === 0) return [];
  const rows = await db.execute<{ id: string }[]>(
    `insert into log_blob_garbage (step_id, blob_key, delete_after)
       select ?, k, now() + (? * interval '1 millisecond') from unnest(?::text[]) as k returning id`,
    [stepId, ms, textArray(keys)],
  );
  return rows.map((r) => Number(r.id));
}

/** Forgets garbage records (their object is in use, or deleted). */
export async function dropGarbage(db: Db, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await db.execute('delete from log_blob_garbage where id = any(?::bigint[])', [intArray(ids)]);
}

export type GarbageRow = { id: number; blob_key: string; referenced: boolean };

/** Objects due for deletion, oldest first; `referenced` when a chunk row points to one (then it stays). */
export async function dueGarbage(db: Db, limit: number): Promise<GarbageRow[]> {
  const rows = await db.execute<{ id: string; blob_key: string; referenced: boolean }[]>(
    `select g.id, g.blob_key, exists (select 1 from step_log_chunks c
                                        where c.step_id = g.step_id and c.blob_key = g.blob_key) as referenced
       from log_blob_garbage g where g.delete_after <= now() order by g.delete_after limit ?`,
    [limit],
  );
  return rows.map((r) => ({ id: Number(r.id), blob_key: r.blob_key, referenced: r.referenced }));
}

/** A PostgreSQL text array literal. */
function textArray(items: readonly string[]): string {
  return `{${items.map((k) => `"${k.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(',')}}`;
}
