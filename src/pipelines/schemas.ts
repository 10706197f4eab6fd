import { z } from 'zod';
import { timestamp } from '../http/responses.ts';
import { vcsEnum } from '../repos/schemas.ts';
import { PIPELINE_EVENTS } from './pipeline-file.ts';
import { PIPELINE_STATUSES, STEP_STATUSES } from './model.ts';

/** Response shapes of pipelines and of the agent protocol; the service's mappers return these types. */
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
        })
        .meta({ id: 'JobStep' }),
    ),
    ci_env: z.record(z.string(), z.string()),
    log_max_bytes: z.int().min(1).meta({ description: 'most bytes a step log keeps (head and tail)' }),
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
  .object({ pending: z.int().min(0), running: z.int().min(0), agents: z.int().min(0) })
  .meta({ id: 'Queue' });
