import { z } from 'zod';
import { isoTime } from '../db/sql.ts';
import { pageQuery } from '../http/pagination.ts';
import { timestampInput } from '../http/input.ts';
import type { PipelineEvent } from './pipeline-file.ts';
import type { PipelineJson, StepJson } from './schemas.ts';

/** Pipeline and step statuses, rows, their JSON form and the request bodies of the CI protocol. */
export const PIPELINE_STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled', 'error'] as const;
export const STEP_STATUSES = ['pending', 'running', 'success', 'failure', 'skipped', 'cancelled'] as const;
export type PipelineStatus = (typeof PIPELINE_STATUSES)[number];
export type StepStatus = (typeof STEP_STATUSES)[number];
export const FINAL: readonly string[] = ['success', 'failure', 'cancelled', 'error'];

export const LOG_APPEND_LIMIT = 1024 * 1024;
export const LOG_READ_CAP = 16 * 1024 * 1024;
export const NUMBER_LOCK = 0x70697065; // "pipe"
export const NOTIFY_CHANNEL = 'triad_pipelines';
export const CLONE_TOKEN_TTL_MS = 6 * 3600 * 1000;

const timestamp = timestampInput.nullish();
export const stepStatusBody = z.object({
  status: z.enum(STEP_STATUSES),
  exit_code: z.number().int().min(-2147483648).max(2147483647).nullish(),
  started_at: timestamp,
  finished_at: timestamp,
  /** The agent cut the middle of the log to stay under the step log limit. */
  log_truncated: z.boolean().optional(),
});
export const heartbeatBody = z.object({
  /** Ids of the pipelines this agent process is running now. */
  running: z.array(z.number().int().min(1).max(2147483647)).max(10_000).optional(),
});
export const STEP_FINAL: readonly string[] = ['success', 'failure', 'skipped', 'cancelled'];

/** Who is calling on the agent side: the agent, its instance name and its process nonce. */
export type AgentCaller = { agentId: number; instance: string | undefined; nonce?: string | undefined };
export const pipelineStatusBody = z.object({
  status: z.enum(PIPELINE_STATUSES),
  finished_at: timestamp,
  started_at: timestamp,
  error_message: z.string().max(10_000).nullish(),
});
export const listQuery = pageQuery(20, 50).extend({ status: z.enum(PIPELINE_STATUSES).optional() });

export type RepoInfo = { id: number; name: string; org: string; vcs: string; isPrivate: boolean };
export type Trigger = {
  commit: string;
  event: string;
  branch: string;
  tag: string;
  senderId: number | null;
};

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
  trigger_username: string | null;
  error_message: string | null;
  agent_id: number | null;
  agent_instance: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
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
  started_at: Date | null;
  finished_at: Date | null;
  log_size: string;
  timeout_seconds: number | null;
  log_truncated: boolean;
};

export const PIPELINE_COLUMNS = `p.id, p.repo_id, p.number, p.commit_node, p.branch, p.tag, p.event, p.events, p.status,
  p.trigger_by, u.username as trigger_username, p.error_message, p.agent_id, p.agent_instance,
  p.created_at, p.started_at, p.finished_at`;
export const PIPELINE_FROM = 'pipelines p left join users u on u.id = p.trigger_by';

const iso = (d: Date | string | null): string | null => (d === null ? null : isoTime(d));

export function pipelineJson(p: PipelineRow, steps?: StepRow[]): PipelineJson {
  return {
    id: p.id,
    number: p.number,
    commit_node: p.commit_node,
    branch: p.branch,
    tag: p.tag,
    event: p.event,
    events: p.events,
    status: p.status,
    trigger_by: p.trigger_by,
    trigger_user: p.trigger_by === null ? null : { id: p.trigger_by, username: p.trigger_username },
    created_at: isoTime(p.created_at),
    started_at: iso(p.started_at),
    finished_at: iso(p.finished_at),
    ...(p.error_message === null ? {} : { error_message: p.error_message }),
    ...(steps === undefined ? {} : { steps: steps.map(stepJson) }),
  };
}
export type { PipelineJson };

export function stepJson(s: StepRow): StepJson {
  return {
    id: s.id,
    number: s.number,
    name: s.name,
    image: s.image,
    status: s.status,
    exit_code: s.exit_code,
    started_at: iso(s.started_at),
    finished_at: iso(s.finished_at),
  };
}
