import { count, first, one, type Db } from '../db/query.ts';
import { nextNumber } from '../db/numbers.ts';
import { textArray } from '../db/sql.ts';
import type { PipelineEvent } from './pipeline-file.ts';
import type { StepResources } from './quantity.ts';
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
  labels: Record<string, string>;
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
  /** The step's `resources` from the pipeline file (null: none asked for). */
  resources: StepResources | null;
};
export type LogChunkRow = { offset: string; size: number; blob_key: string };

const PIPELINE = `id, repo_id, number, commit_node, branch, tag, event, events, labels, status, trigger_by,
  error_message, agent_id, agent_instance, created_at, started_at, finished_at`;

/** Wakes the agents long-polling for work (see queue-waker.ts); delivered at commit. */
export async function notifyQueued(tx: Db): Promise<void> {
  await tx.execute(`select pg_notify('${NOTIFY_CHANNEL}', '')`);
}

export function countByStatus(db: Db, status: PipelineStatus): Promise<number> {
  return count(db, 'select count(*) as n from pipelines where status = ?', [status]);
}

/** Pending and running pipelines: all of them, or those of one label set. */
export async function queueDepth(
  db: Db,
  labels?: Record<string, string>,
): Promise<{ pending: number; running: number }> {
  const r = await one<{ pending: string; running: string }>(
    db,
    `select count(*) filter (where status = 'pending') as pending,
            count(*) filter (where status = 'running') as running from pipelines
      where status in ('pending', 'running')${labels === undefined ? '' : ' and labels = ?::jsonb'}`,
    labels === undefined ? [] : [JSON.stringify(labels)],
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

/** The log chunks of a step that hold bytes of `start` (inclusive) to `end` (exclusive). */
export function logChunksFrom(db: Db, stepId: number, start: number, end: number): Promise<LogChunkRow[]> {
  return db.execute<LogChunkRow[]>(
    `select "offset", size, blob_key from step_log_chunks
      where step_id = ? and "offset" + size > ? and "offset" < ? order by "offset"`,
    [stepId, start, end],
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
  /** The repository's organization (claims take turns between organizations). */
  orgId: number;
  commit: string;
  branch: string;
  tag: string;
  events: readonly string[];
  status: PipelineStatus;
  triggerBy: number | null;
  /** The pool labels of the pipeline file (`{}` when none). */
  labels: Record<string, string>;
  errorMessage: string | null;
  steps: readonly {
    name: string;
    image: string;
    commands: readonly string[];
    environment: Record<string, string>;
    status: StepStatus;
    timeoutSeconds: number | null;
    resources?: StepResources | undefined;
  }[];
};

/** Inserts a pipeline (numbered by the per-repository allocator) and its steps; returns its id. */
export async function insertPipeline(tx: Db, p: NewPipeline): Promise<number> {
  const number = await nextNumber(tx, 'pipelines', p.repoId);
  const row = await one<{ id: number }>(
    tx,
    `insert into pipelines (repo_id, org_id, number, commit_node, branch, tag, event, events, status, trigger_by,
                            error_message, labels, finished_at)
     values (?, ?, ?, ?, ?, ?, ?, ?::text[], ?, ?, ?, ?::jsonb, ${p.status === 'pending' ? 'null' : 'now()'}) returning id`,
    [
      p.repoId,
      p.orgId,
      number,
      p.commit,
      p.branch,
      p.tag,
      p.events[0],
      textArray(p.events),
      p.status,
      p.triggerBy,
      p.errorMessage,
      JSON.stringify(p.labels),
    ],
  );
  for (const [i, s] of p.steps.entries()) {
    await tx.execute(
      `insert into pipeline_steps (pipeline_id, number, name, image, commands, environment, status,
                                   timeout_seconds, resources)
       values (?, ?, ?, ?, ?::text[], ?, ?, ?, ?::jsonb)`,
      [
        row.id,
        i + 1,
        s.name,
        s.image,
        textArray(s.commands),
        JSON.stringify(s.environment),
        s.status,
        s.timeoutSeconds,
        s.resources === undefined ? null : JSON.stringify(s.resources),
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

/**
 * Claims a pending pipeline whose labels are exactly the agent's for an agent process (skipping
 * rows others hold), taking turns between organizations: the pipeline of the organization with
 * the fewest running pipelines, then of the one whose last claim is oldest, then the oldest
 * pipeline. So one organization's hundred queued pipelines do not hold back another's one.
 */
export async function claimNext(
  tx: Db,
  agent: { agentId: number; instance: string; nonce: string | null; labels: Record<string, string> },
): Promise<Claimed | undefined> {
  const claimed = await first<Claimed & { org_id: number }>(
    tx,
    `update pipelines set status = 'running', agent_id = ?, agent_instance = ?, agent_nonce = ?, started_at = now()
      where id = (
        with busy as (select org_id, count(*) as n from pipelines where status = 'running' group by org_id)
        select p.id from pipelines p
          left join busy b on b.org_id = p.org_id
          left join ci_org_turns t on t.org_id = p.org_id
         where p.status = 'pending' and p.labels = ?::jsonb
         order by coalesce(b.n, 0), t.last_claimed_at nulls first, p.id
         for update of p skip locked limit 1)
      returning id, trigger_by, repo_id, org_id`,
    [agent.agentId, agent.instance, agent.nonce, JSON.stringify(agent.labels)],
  );
  if (claimed === undefined) return undefined;
  await tx.execute(
    `insert into ci_org_turns (org_id, last_claimed_at) values (?, clock_timestamp())
       on conflict (org_id) do update set last_claimed_at = excluded.last_claimed_at`,
    [claimed.org_id],
  );
  return { id: claimed.id, trigger_by: claimed.trigger_by, repo_id: claimed.repo_id };
}

/** Puts a claimed pipeline back in the queue (when it is still running). */
export async function unclaim(tx: Db, id: number): Promise<void> {
  await tx.execute(
    `update pipelines set status = 'pending', agent_id = null, agent_instance = null, agent_nonce = null,
       started_at = null where id = ? and status = 'running'`,
    [id],
  );
}
