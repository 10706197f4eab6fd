import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestampInput } from '../http/input.ts';
import { timestamp } from '../http/responses.ts';
import { vcsEnum } from '../repos/schemas.ts';
import { PIPELINE_EVENTS } from './pipeline-file.ts';
import { PIPELINE_STATUSES, STEP_STATUSES, type PipelineLimits } from './model.ts';
import type { PipelineRow, StepRow } from './repository.ts';
import type { RepoHandle } from '../domain/repo.ts';

// ----- requests (the user side and the agent protocol) ------------------------------------------

const reportedTime = timestampInput.nullish();
export const stepStatusBody = z.object({
  status: z.enum(STEP_STATUSES),
  exit_code: z.number().int().min(-2147483648).max(2147483647).nullish(),
  started_at: reportedTime,
  finished_at: reportedTime,
  /** The agent cut the middle of the log to stay under the step log limit. */
  log_truncated: z.boolean().optional(),
});
export type StepStatusBody = z.infer<typeof stepStatusBody>;
export const heartbeatBody = z.object({
  /** Ids of the pipelines this agent process is running now. */
  running: z.array(z.number().int().min(1).max(2147483647)).max(10_000).optional(),
});
export const pipelineStatusBody = z.object({
  status: z.enum(PIPELINE_STATUSES),
  finished_at: reportedTime,
  started_at: reportedTime,
  error_message: z.string().max(10_000).nullish(),
});
export type PipelineStatusBody = z.infer<typeof pipelineStatusBody>;
export const listQuery = pageQuery(20, 50).extend({ status: z.enum(PIPELINE_STATUSES).optional() });
export type ListQuery = z.infer<typeof listQuery>;

// ----- responses ---------------------------------------------------------------------------------

/** Response shapes of pipelines and of the agent protocol, and the mappers from rows. */
export const pipelineStatusEnum = z.enum(PIPELINE_STATUSES).meta({ id: 'PipelineStatus' });
export const stepStatusEnum = z.enum(STEP_STATUSES).meta({ id: 'StepStatus' });
const eventEnum = z.enum(PIPELINE_EVENTS).meta({ id: 'PipelineEvent' });

export const stepSchema = z
  .object({
    id: z.int(),
    number: z.int(),
    name: z.string(),
    image: z.string(),
    status: stepStatusEnum,
    exit_code: z.int().nullable(),
    started_at: timestamp.nullable(),
    finished_at: timestamp.nullable(),
  })
  .meta({ id: 'Step' });
export type StepJson = z.infer<typeof stepSchema>;

export const pipelineSchema = z
  .object({
    id: z.int(),
    number: z.int().meta({ description: 'per-repository number used in paths' }),
    commit_node: z.string(),
    branch: z.string(),
    tag: z.string().meta({ description: 'tag name for tag-triggered pipelines, else empty' }),
    event: eventEnum,
    events: z.array(eventEnum),
    labels: z
      .record(z.string(), z.string())
      .meta({ description: 'the pool labels of the pipeline file (`{}` when none)' }),
    status: pipelineStatusEnum,
    trigger_by: z.int().nullable().meta({ description: 'id of the triggering user' }),
    trigger_user: z
      .object({ id: z.int(), username: z.string().nullable() })
      .nullable()
      .meta({ description: 'the triggering user, when there is one' }),
    created_at: timestamp,
    started_at: timestamp.nullable(),
    finished_at: timestamp.nullable(),
    error_message: z.string().optional().meta({ description: 'why it failed; only when set' }),
    steps: z.array(stepSchema).optional().meta({ description: 'single-pipeline reads only' }),
  })
  .meta({ id: 'Pipeline' });
export type PipelineJson = z.infer<typeof pipelineSchema>;

export const pipelineListSchema = z
  .object({
    total: z.int().min(0),
    page: z.int().min(1),
    per_page: z.int().min(1),
    pipelines: z.array(pipelineSchema),
  })
  .meta({ id: 'PipelineList' });

export const jobSchema = z
  .object({
    pipeline_id: z.int(),
    number: z.int(),
    commit_node: z.string(),
    branch: z.string(),
    tag: z.string(),
    event: eventEnum,
    events: z.array(eventEnum),
    labels: z
      .record(z.string(), z.string())
      .meta({ description: 'the pool labels of the pipeline file (`{}` when none)' }),
    clone_url: z.string(),
    clone_token: z
      .string()
      .nullable()
      .meta({ description: 'short-lived repo:read credential for the clone' }),
    vcs: vcsEnum,
    org: z.string(),
    repo: z.string(),
    steps: z.array(
      z
        .object({
          id: z.int(),
          number: z.int(),
          name: z.string(),
          image: z.string(),
          commands: z.array(z.string()),
          environment: z.record(z.string(), z.string()),
          status: stepStatusEnum,
          timeout_seconds: z
            .int()
            .min(1)
            .meta({ description: 'the step is stopped after this many seconds' }),
          resources: z.object({ cpu: z.string().optional(), memory: z.string().optional() }).optional().meta({
            description:
              'requests and limits of the step (Kubernetes quantities) from the pipeline file; absent when none',
          }),
        })
        .meta({ id: 'JobStep' }),
    ),
    ci_env: z.record(z.string(), z.string()),
    log_max_bytes: z.int().min(1).meta({ description: 'most bytes a step log keeps (head and tail)' }),
    pipeline_timeout_seconds: z
      .int()
      .min(1)
      .meta({ description: 'the whole pipeline is stopped this many seconds after its claim' }),
    disk_max_bytes: z
      .int()
      .min(1)
      .meta({ description: 'most bytes the workspace may take while a step runs' }),
  })
  .meta({ id: 'Job' });
export type JobJson = z.infer<typeof jobSchema>;

export const heartbeatSchema = z
  .object({ cancelled_pipelines: z.array(z.int()).meta({ description: 'stop these pipelines' }) })
  .meta({ id: 'Heartbeat' });
export const stepReportSchema = z
  .object({ data: stepSchema, pipeline_status: pipelineStatusEnum })
  .meta({ id: 'StepReport' });
export const logAckSchema = z
  .object({
    size: z.int().min(0).meta({ description: 'bytes of the log stored after this request' }),
    stored: z.int().min(0).meta({ description: 'bytes of this chunk that were new' }),
    truncated: z.boolean().optional().meta({
      description: 'the step log reached its size limit: bytes beyond it are acknowledged, not stored',
    }),
  })
  .meta({ id: 'LogAck' });
export const queueSchema = z
  .object({
    pending: z.int().min(0),
    running: z.int().min(0),
    agents: z.int().min(0),
    version: z.string().meta({
      description:
        'identifies these figures (the same figures give the same version); pass it back as `since`',
    }),
  })
  .meta({ id: 'Queue' });

const isoOrNull = (d: Date | string | null): string | null => (d === null ? null : isoTime(d));

/** What a pipeline runs on and why: shared by the pipeline record and the agent's job. */
function commitFields(p: PipelineRow) {
  const { number, commit_node, branch, tag, event, events, labels } = p;
  return { number, commit_node, branch, tag, event, events, labels };
}

/** A pipeline (with its steps for single reads); `username` names the triggering user. */
export function pipelineJson(p: PipelineRow, username: string | null, steps?: StepRow[]): PipelineJson {
  return {
    id: p.id,
    ...commitFields(p),
    status: p.status,
    trigger_by: p.trigger_by,
    trigger_user: p.trigger_by === null ? null : { id: p.trigger_by, username },
    created_at: isoTime(p.created_at),
    started_at: isoOrNull(p.started_at),
    finished_at: isoOrNull(p.finished_at),
    ...(p.error_message === null ? {} : { error_message: p.error_message }),
    ...(steps === undefined ? {} : { steps: steps.map(stepJson) }),
  };
}

export function stepJson(s: StepRow): StepJson {
  return {
    id: s.id,
    number: s.number,
    name: s.name,
    image: s.image,
    status: s.status,
    exit_code: s.exit_code,
    started_at: isoOrNull(s.started_at),
    finished_at: isoOrNull(s.finished_at),
  };
}

/** Where and how the agent runs a claimed pipeline. */
export type JobContext = {
  repo: Pick<RepoHandle, 'vcs' | 'org' | 'name'>;
  cloneUrl: string;
  cloneToken: string | null;
  /** The server's longest step (a step's own `timeout` may only be shorter). */
  maxStepSeconds: number;
  logMaxBytes: number;
  limits: Pick<PipelineLimits, 'timeoutSeconds' | 'diskMaxBytes'>;
};

/** The job an agent gets for a claimed pipeline: steps, clone credential and CI environment. */
export function jobJson(p: PipelineRow, steps: readonly StepRow[], c: JobContext): JobJson {
  const max = c.maxStepSeconds;
  return {
    pipeline_id: p.id,
    ...commitFields(p),
    clone_url: c.cloneUrl,
    clone_token: c.cloneToken,
    vcs: c.repo.vcs,
    org: c.repo.org,
    repo: c.repo.name,
    steps: steps.map((s) => ({
      id: s.id,
      number: s.number,
      name: s.name,
      image: s.image,
      commands: s.commands,
      environment: s.environment,
      status: s.status,
      timeout_seconds: Math.min(s.timeout_seconds ?? max, max),
      ...(s.resources === null ? {} : { resources: s.resources }),
    })),
    ci_env: {
      CI: 'true',
      CI_PIPELINE_ID: String(p.id),
      CI_PIPELINE_NUMBER: String(p.number),
      CI_COMMIT: p.commit_node,
      CI_BRANCH: p.branch,
      CI_TAG: p.tag,
      CI_EVENT: p.event,
      CI_REPO: `${c.repo.org}/${c.repo.name}`,
    },
    log_max_bytes: c.logMaxBytes,
    pipeline_timeout_seconds: c.limits.timeoutSeconds,
    disk_max_bytes: c.limits.diskMaxBytes,
  };
}
