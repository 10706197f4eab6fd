import { count, first, one, type Db } from '../db/query.ts';
import { nextNumber } from '../db/numbers.ts';
import { intArray, textArray } from '../db/sql.ts';
import type { PipelineEvent } from './pipeline-file.ts';
import { NOTIFY_CHANNEL, type PipelineStatus, type StepStatus } from './model.ts';

/** The queries of CI pipelines, their steps and step log chunks. */

export type PipelineRow = {
  id: number;
  repo_id: number;
  number: number;
  commit_node: string;
  branch: string;
  tag: string;
  event: PipelineEvent;
  events: PipelineEvent[];
  status: PipelineStatus;
  trigger_by: number | null;
  error_message: string | null;
  agent_id: number | null;
  agent_instance: string | null;
  created_at: Date | string;
  started_at: Date | string | null;
  finished_at: Date | string | null;
};
export type StepRow = {
  id: number;
  pipeline_id: number;
  number: number;
  name: string;
  image: string;
  commands: string[];
  environment: Record<string, string>;
  status: StepStatus;
  exit_code: number | null;
  started_at: Date | string | null;
  finished_at: Date | string | null;
  log_size: string;
  timeout_seconds: number | null;
  log_truncated: boolean;
};
export type LogChunkRow = { offset: string; size: number; blob_key: string };

const PIPELINE = `id, repo_id, number, commit_node, branch, tag, event, events, status, trigger_by,
  error_message, agent_id, agent_instance, created_at, started_at, finished_at`;
const list = (ids: readonly unknown[]) => ids.map(() => '?').join(',');

/** Wakes the agents long-polling for work (see queue-waker.ts); delivered at commit. */
export async function notifyQueued(tx: Db): Promise<void> {
  await tx.execute(`select pg_notify('${NOTIFY_CHANNEL}', '')`);
}

export function countByStatus(db: Db, status: PipelineStatus): Promise<number> {
  return count(db, 'select count(*) as n from pipelines where status = ?', [status]);
}

export async function queueDepth(db: Db): Promise<{ pending: number; running: number }> {
  const r = await one<{ pending: string; running: string }>(
    db,
    `select count(*) filter (where status = 'pending') as pending,
            count(*) filter (where status = 'running') as running from pipelines
      where status in ('pending', 'running')`,
  );
  return { pending: Number(r.pending), running: Number(r.running) };
}

// ----- reads -------------------------------------------------------------------------------------

export function byId(db: Db, id: number): Promise<PipelineRow | undefined> {
  return first<PipelineRow>(db, `select ${PIPELINE} from pipelines where id = ?`, [id]);
}

export function byNumber(db: Db, repoId: number, number: number): Promise<PipelineRow | undefined> {
  return first<PipelineRow>(db, `select ${PIPELINE} from pipelines where repo_id = ? and number = ?`, [
    repoId,
    number,
  ]);
}

/** One page of a repository's pipelines, newest first, and the total. */
export async function page(
  db: Db,
  repoId: number,
  status: PipelineStatus | undefined,
  limit: number,
  offset: number,
): Promise<{ rows: PipelineRow[]; total: number }> {
  const where = `repo_id = ?${status === undefined ? '' : ' and status = ?'}`;
  const params: unknown[] = status === undefined ? [repoId] : [repoId, status];
  const total = await count(db, `select count(*) as n from pipelines where ${where}`, params);
  const rows = await db.execute<PipelineRow[]>(
    `select ${PIPELINE} from pipelines where ${where} order by number desc limit ? offset ?`,
    [...params, limit, offset],
  );
  return { rows, total };
}

export function steps(db: Db, pipelineId: number): Promise<StepRow[]> {
  return db.execute<StepRow[]>('select * from pipeline_steps where pipeline_id = ? order by number', [
    pipelineId,
  ]);
}

export function step(db: Db, id: number): Promise<StepRow | undefined> {
  return first<StepRow>(db, 'select * from pipeline_steps where id = ?', [id]);
}

export function logChunks(db: Db, stepId: number): Promise<LogChunkRow[]> {
  return db.execute<LogChunkRow[]>(
    'select "offset", size, blob_key from step_log_chunks where step_id = ? order by "offset"',
    [stepId],
  );
}

// ----- triggers ----------------------------------------------------------------------------------

export type ActiveRow = {
  id: number;
  events: PipelineEvent[];
  tag: string;
  branch: string;
  status: PipelineStatus;
};

/** The newest pending or running pipeline of a commit, locked. */
export function activeForCommit(tx: Db, repoId: number, commit: string): Promise<ActiveRow | undefined> {
  return first<ActiveRow>(
    tx,
    `select id, events, tag, branch, status from pipelines
      where repo_id = ? and commit_node = ? and status in ('pending', 'running')
      order by id desc limit 1 for update`,
    [repoId, commit],
  );
}

export async function setEvents(tx: Db, id: number, events: readonly string[], tag: string): Promise<void> {
  await tx.execute('update pipelines set events = ?::text[], tag = ? where id = ?', [
    textArray(events),
    tag,
    id,
  ]);
}

/** A step skipped because its `when` did not match becomes pending. */
export async function unskipStep(tx: Db, pipelineId: number, number: number): Promise<void> {
  await tx.execute(
    `update pipeline_steps set status = 'pending' where pipeline_id = ? and number = ? and status = 'skipped'`,
    [pipelineId, number],
  );
}

export type NewPipeline = {
  repoId: number;
  commit: string;
  branch: string;
  tag: string;
  events: readonly string[];
  status: PipelineStatus;
  triggerBy: number | null;
  errorMessage: string | null;
  steps: readonly {
    name: string;
    image: string;
    commands: readonly string[];
    environment: Record<string, string>;
    status: StepStatus;
    timeoutSeconds: number | null;
  }[];
};

/** Inserts a pipeline (numbered by the per-repository allocator) and its steps; returns its id. */
export async function insertPipeline(tx: Db, p: NewPipeline): Promise<number> {
  const number = await nextNumber(tx, 'pipelines', p.repoId);
  const row = await one<{ id: number }>(
    tx,
    `insert into pipelines (repo_id, number, commit_node, branch, tag, event, events, status, trigger_by,
                            error_message, finished_at)
     values (?, ?, ?, ?, ?, ?, ?::text[], ?, ?, ?, ${p.status === 'pending' ? 'null' : 'now()'}) returning id`,
    [
      p.repoId,
      number,
      p.commit,
      p.branch,
      p.tag,
      p.events[0],
      textArray(p.events),
      p.status,
      p.triggerBy,
      p.errorMessage,
    ],
  );
  for (const [i, s] of p.steps.entries()) {
    await tx.execute(
      `insert into pipeline_steps (pipeline_id, number, name, image, commands, environment, status,
                                   timeout_seconds)
       values (?, ?, ?, ?, ?::text[], ?, ?, ?)`,
      [
        row.id,
        i + 1,
        s.name,
        s.image,
        textArray(s.commands),
        JSON.stringify(s.environment),
        s.status,
        s.timeoutSeconds,
      ],
    );
  }
  return row.id;
}

// ----- user actions ------------------------------------------------------------------------------

/** The status of a pipeline, locked for a change. */
export async function lockStatus(tx: Db, id: number, agentId?: number): Promise<PipelineStatus | undefined> {
  const row = await first<{ status: PipelineStatus }>(
    tx,
    `select status from pipelines where id = ?${agentId === undefined ? '' : ' and agent_id = ?'} for update`,
    agentId === undefined ? [id] : [id, agentId],
  );
  return row?.status;
}

/** Cancels a pipeline with its pending and running steps (an unclaimed one needs no agent answer). */
export async function cancel(tx: Db, id: number): Promise<void> {
  await tx.execute(
    `update pipelines set status = 'cancelled', finished_at = now(), agent_done = (agent_id is null) where id = ?`,
    [id],
  );
  await tx.execute(
    `update pipeline_steps set status = 'cancelled', finished_at = coalesce(finished_at, now())
      where pipeline_id = ? and status in ('pending', 'running')`,
    [id],
  );
}

// ----- the queue ---------------------------------------------------------------------------------

export type Claimed = { id: number; trigger_by: number | null; repo_id: number };

/** Claims the oldest pending pipeline for an agent process (skipping rows others hold). */
export function claimOldest(
  tx: Db,
  agent: { agentId: number; instance: string; nonce: string | null },
): Promise<Claimed | undefined> {
  return first<Claimed>(
    tx,
    `update pipelines set status = 'running', agent_id = ?, agent_instance = ?, agent_nonce = ?, started_at = now()
      where id = (select id from pipelines where status = 'pending' order by id for update skip locked limit 1)
      returning id, trigger_by, repo_id`,
    [agent.agentId, agent.instance, agent.nonce],
  );
}

/** Puts a claimed pipeline back in the queue (when it is still running). */
export async function unclaim(tx: Db, id: number): Promise<void> {
  await tx.execute(
    `update pipelines set status = 'pending', agent_id = null, agent_instance = null, agent_nonce = null,
       started_at = null where id = ? and status = 'running'`,
    [id],
  );
}

// ----- agent reports -----------------------------------------------------------------------------

/** Of `ids`, the pipelines of the agent that are no longer running. */
export async function notRunningAmong(db: Db, agentId: number, ids: readonly number[]): Promise<number[]> {
  const rows = await db.execute<{ id: number }[]>(
    `select id from pipelines where agent_id = ? and status <> 'running' and id in (${list(ids)}) order by id`,
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
        ${keep.length > 0 ? `and id not in (${list(keep)})` : ''}`,
    [agentId, instance, nonce, ms, ...keep],
  );
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
       finished_at = now() where pipeline_id in (${list(pipelineIds)}) and status in ('pending', 'running')`,
    [...pipelineIds],
  );
}
