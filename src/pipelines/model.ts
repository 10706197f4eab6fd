import type { Db } from '../db/query.ts';

/** Pipeline and step statuses, the limits and channels of CI, and the facts passed between its parts. */
export const PIPELINE_STATUSES = ['pending', 'running', 'success', 'failure', 'cancelled', 'error'] as const;
export const STEP_STATUSES = ['pending', 'running', 'success', 'failure', 'skipped', 'cancelled'] as const;
export type PipelineStatus = (typeof PIPELINE_STATUSES)[number];
export type StepStatus = (typeof STEP_STATUSES)[number];
export const FINAL: readonly string[] = ['success', 'failure', 'cancelled', 'error'];
export const STEP_FINAL: readonly string[] = ['success', 'failure', 'skipped', 'cancelled'];

export const LOG_APPEND_LIMIT = 1024 * 1024;
/** The blob store keys of step logs: every chunk of a pipeline's steps under one prefix. */
export const logPrefix = (pipelineId: number): string => `logs/${pipelineId}/`;
export const logKey = (pipelineId: number, stepId: number, offset: number): string =>
  `${logPrefix(pipelineId)}${stepId}/${String(offset).padStart(14, '0')}`;

export const LOG_READ_CAP = 16 * 1024 * 1024;
export const NOTIFY_CHANNEL = 'triad_pipelines';
/** Notified with a pipeline's id when it or one of its steps changes (migration 0018's triggers). */
export const CHANGES_CHANNEL = 'triad_pipeline_changes';
export const CLONE_TOKEN_TTL_MS = 6 * 3600 * 1000;

/** Who is calling on the agent side: the agent, its instance name and its process nonce. */
export type AgentCaller = { agentId: number; instance: string | undefined; nonce?: string | undefined };

/** The queue figures of one label set (or of all pipelines) and their version (see queue.ts). */
export type QueueFigures = { pending: number; running: number; agents: number; version: string };

/** A push event that may start a pipeline. */
export type Trigger = {
  commit: string;
  event: string;
  branch: string;
  tag: string;
  senderId: number | null;
};

/** The bounds of every pipeline (server settings a pipeline file cannot change). */
export type PipelineLimits = {
  /** The whole pipeline's run time from its claim (TRIAD_PIPELINE_TIMEOUT). */
  timeoutSeconds: number;
  /** Steps one pipeline file may declare (TRIAD_PIPELINE_MAX_STEPS). */
  maxSteps: number;
  /** Most bytes a workspace may take while a step runs (TRIAD_STEP_DISK_MAX). */
  diskMaxBytes: number;
  /** Largest pipeline file read (TRIAD_PIPELINE_FILE_MAX_BYTES); a larger one is an error. */
  fileMaxBytes: number;
};

export const DEFAULT_PIPELINE_LIMITS: PipelineLimits = {
  timeoutSeconds: 7200,
  maxSteps: 50,
  diskMaxBytes: 10 * 1024 ** 3,
  fileMaxBytes: 256 * 1024,
};

/**
 * Told, in the transaction of the change, which pipelines changed status (created, reported by an
 * agent, cancelled, errored by the reaper): Triad's own commit statuses (`triad/pipeline`).
 */
export type PipelineStatusHook = (tx: Db, pipelineIds: readonly number[]) => Promise<void>;
