import { first, placeholders, type Db } from '../db/query.ts';
import { intArray } from '../db/sql.ts';
import type { PipelineStatus, StepStatus } from './model.ts';

/**
 * The queries of the agent side of CI (tables `pipelines`, `pipeline_steps`, `step_log_chunks`):
 * what agents report, and the pipelines whose agent is gone. Split from `repository.ts` (the
 * pipeline and step rows, reads, triggers, user actions and the queue) to keep files short.
 */

// ----- agent reports -----------------------------------------------------------------------------

/** Of `ids`, the pipelines of the agent that are no longer running. */
export async function notRunningAmong(db: Db, agentId: number, ids: readonly number[]): Promise<number[]> {
  const rows = await db.execute<{ id: number }[]>(
    `select id from pipelines where agent_id = ? and status <> 'running' and id in (${placeholders(ids)}) order by id`,
    [agentId, ...ids],
  );
  return rows.map((r) => r.id);
}

/** Cancelled pipelines of the instance the agent has not acknowledged. */
export async function unacknowledgedCancels(db: Db, agentId: number, instance: string): Promise<number[]> {
  const rows = await db.execute<{ id: number }[]>(
    `select id from pipelines where agent_id = ? and agent_instance = ? and status = 'cancelled' and not agent_done`,
    [agentId, instance],
  );
  return rows.map((r) => r.id);
}

/** A step of a pipeline the agent claimed, with what a report and a log append check. */
export type AgentStepRow = {
  status: StepStatus;
  pipeline_status: PipelineStatus;
  log_size: string;
  pipeline_id: number;
};

/**
 * A step of a pipeline the agent claimed. `report` share-locks the pipeline (a report waits for a
 * cancel in flight); `log` locks the step (log appends to one step queue).
 */
export function agentStep(
  tx: Db,
  stepId: number,
  agentId: number,
  lock: 'report' | 'log',
): Promise<AgentStepRow | undefined> {
  return first(
    tx,
    `select s.status, p.status as pipeline_status, s.log_size, s.pipeline_id from pipeline_steps s
       join pipelines p on p.id = s.pipeline_id
      where s.id = ? and p.agent_id = ? ${lock === 'report' ? 'for share of p' : 'for update of s'}`,
    [stepId, agentId],
  );
}

export type StepReport = {
  status: StepStatus;
  exitCode: number | null;
  startedAt: string | null;
  finishedAt: string | null;
  logTruncated: boolean;
};

/** Records a step report; times the agent leaves out are taken now when the status implies them. */
export async function reportStep(tx: Db, stepId: number, r: StepReport): Promise<void> {
  await tx.execute(
    `update pipeline_steps set status = ?, exit_code = ?, started_at = coalesce(?, started_at,
       case when ? = 'running' then now() end), finished_at = coalesce(?, finished_at,
       case when ? in ('success', 'failure', 'skipped', 'cancelled') then now() end),
       log_truncated = log_truncated or ?
      where id = ?`,
    [r.status, r.exitCode, r.startedAt, r.status, r.finishedAt, r.status, r.logTruncated, stepId],
  );
}

export async function acknowledge(tx: Db, id: number): Promise<void> {
  await tx.execute('update pipelines set agent_done = true where id = ?', [id]);
}

export type PipelineReport = {
  status: PipelineStatus;
  errorMessage: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  final: boolean;
};

export async function reportPipeline(tx: Db, id: number, r: PipelineReport): Promise<void> {
  await tx.execute(
    `update pipelines set status = ?, error_message = coalesce(?, error_message),
       started_at = coalesce(?, started_at), agent_done = ?,
       finished_at = case when ? then coalesce(?, now()) else finished_at end
     where id = ?`,
    [r.status, r.errorMessage, r.startedAt, r.final, r.final, r.finishedAt, id],
  );
}

export async function flagLogTruncated(tx: Db, stepId: number): Promise<void> {
  await tx.execute('update pipeline_steps set log_truncated = true where id = ?', [stepId]);
}

export async function appendLogChunk(
  tx: Db,
  stepId: number,
  chunk: { offset: number; size: number; key: string; truncated: boolean },
): Promise<void> {
  await tx.execute('insert into step_log_chunks (step_id, "offset", size, blob_key) values (?, ?, ?, ?)', [
    stepId,
    chunk.offset,
    chunk.size,
    chunk.key,
  ]);
  await tx.execute(
    'update pipeline_steps set log_size = log_size + ?, log_truncated = log_truncated or ? where id = ?',
    [chunk.size, chunk.truncated, stepId],
  );
}

// ----- orphans -----------------------------------------------------------------------------------

export type RunningRow = {
  id: number;
  agent_id: number | null;
  agent_instance: string;
  agent_nonce: string | null;
};

/** The running pipelines of these agents. */
export function runningOfAgents(
  db: Db,
  agentIds: readonly number[],
): Promise<{ id: number; agent_id: number; agent_instance: string }[]> {
  if (agentIds.length === 0) return Promise.resolve([]);
  return db.execute<{ id: number; agent_id: number; agent_instance: string }[]>(
    `select id, agent_id, agent_instance from pipelines where status = 'running' and agent_id = any(?::int[]) order by id`,
    [intArray(agentIds)],
  );
}

/** Running pipelines started more than `ms` ago. */
export function runningStartedBefore(tx: Db, ms: number): Promise<RunningRow[]> {
  return tx.execute<RunningRow[]>(
    `select id, agent_id, agent_instance, agent_nonce from pipelines
      where status = 'running' and started_at < now() - (? * interval '1 millisecond')`,
    [ms],
  );
}

/** Running pipelines of an agent instance claimed by another process than `nonce`. */
export function runningOfOthers(
  tx: Db,
  agentId: number,
  instance: string,
  nonce: string,
): Promise<RunningRow[]> {
  return tx.execute<RunningRow[]>(
    `select id, agent_id, agent_instance, agent_nonce from pipelines
      where status = 'running' and agent_id = ? and agent_instance = ? and agent_nonce <> ?`,
    [agentId, instance, nonce],
  );
}

/** Running pipelines claimed by the process `nonce` more than `ms` ago, except `keep`. */
export function runningOfProcess(
  tx: Db,
  agentId: number,
  instance: string,
  nonce: string,
  ms: number,
  keep: readonly number[],
): Promise<RunningRow[]> {
  return tx.execute<RunningRow[]>(
    `select id, agent_id, agent_instance, agent_nonce from pipelines
      where status = 'running' and agent_id = ? and agent_instance = ? and agent_nonce = ?
        and started_at < now() - (? * interval '1 millisecond')
        ${keep.length > 0 ? `and id not in (${placeholders(keep)})` : ''}`,
    [agentId, instance, nonce, ms, ...keep],
  );
}

/**
 * The running pipelines of an agent (of one process of it when `instance` and `nonce` are
 * given), locked; a report in flight on one is waited for (at most `waitMs` when given, then the
 * statement fails), so none is passed over while it is held.
 */
export async function lockRunningOf(
  tx: Db,
  of: { agentId: number; instance?: string; nonce?: string },
  waitMs?: number,
): Promise<{ id: number }[]> {
  const bounded = waitMs !== undefined;
  if (bounded) await tx.execute(`set local lock_timeout = ${Math.max(1, Math.floor(waitMs))}`);
  const oneProcess = of.instance !== undefined && of.nonce !== undefined;
  const rows = await tx.execute<{ id: number }[]>(
    `select id from pipelines where status = 'running' and agent_id = ?
      ${oneProcess ? 'and agent_instance = ? and agent_nonce = ?' : ''} order by id for update`,
    oneProcess ? [of.agentId, of.instance, of.nonce] : [of.agentId],
  );
  // the bound is for this wait only: the steps' update after it waits for a log append in flight
  if (bounded) await tx.execute('set local lock_timeout to default');
  return rows;
}

/** Of `ids`, those still running, locked; rows another transaction holds are skipped. */
export async function lockRunning(tx: Db, ids: readonly number[]): Promise<number[]> {
  if (ids.length === 0) return [];
  const rows = await tx.execute<{ id: number }[]>(
    `select id from pipelines where id = any(?::int[]) and status = 'running' order by id for update skip locked`,
    [intArray(ids)],
  );
  return rows.map((r) => r.id);
}

/** A running pipeline becomes `error` with its message; false when it is not running. */
export async function markError(tx: Db, id: number, message: string): Promise<boolean> {
  const rows = await tx.execute(
    `update pipelines set status = 'error', finished_at = now(), error_message = ?
      where id = ? and status = 'running' returning id`,
    [message, id],
  );
  return rows.length > 0;
}

/** The running steps of these pipelines fail and their pending ones are skipped. */
export async function stopSteps(tx: Db, pipelineIds: readonly number[]): Promise<void> {
  if (pipelineIds.length === 0) return;
  await tx.execute(
    `update pipeline_steps set status = case when status = 'running' then 'failure' else 'skipped' end,
       finished_at = now() where pipeline_id in (${placeholders(pipelineIds)}) and status in ('pending', 'running')`,
    [...pipelineIds],
  );
}
