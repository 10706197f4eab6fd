import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import { isDbId } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import { offsetOf } from '../http/pagination.ts';
import type { BlobStore } from '../storage/index.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { RepoHandle } from '../domain/repo.ts';
import type { ReposService } from '../repos/service.ts';
import type { UsersService } from '../users/service.ts';
import {
  DEFAULT_PIPELINE_LIMITS,
  LOG_READ_CAP,
  type PipelineLimits,
  type PipelineStatusHook,
  type Trigger,
} from './model.ts';
import { QueueWaker } from './queue-waker.ts';
import { PipelineQueue } from './queue.ts';
import { AgentProtocol } from './agent-protocol.ts';
import { PipelineDeletion } from './deletion.ts';
import { StepLogs } from './step-logs.ts';
import { primed, readLog } from './log-reader.ts';
import { LogCompactor } from './log-compaction.ts';
import { PipelineRetention } from './retention.ts';
import { DEFAULT_HOUSEKEEPING, type HousekeepingSettings } from './housekeeping-settings.ts';
import { Reaper, type AgentLiveness } from './reaper.ts';
import { PipelineTrigger } from './trigger.ts';
import * as db from './repository.ts';
import type { PipelineRow, StepRow } from './repository.ts';
import { pipelineJson, type ListQuery, type PipelineJson } from './schemas.ts';

export type { Trigger };

export type PipelinesDeps = {
  em: () => EntityManager;
  blobs: BlobStore;
  log: Logger;
  metrics: Metrics;
  databaseUrl: string;
  agentTimeoutMs: number;
  /** Longest a step may run (TRIAD_STEP_TIMEOUT); a pipeline file's `timeout` may only be shorter. */
  stepTimeoutSeconds: number;
  /** Most bytes a step log may hold (TRIAD_STEP_LOG_MAX_BYTES). */
  logMaxBytes: number;
  baseUrl: () => string;
  /** Bounds of every pipeline (defaults: DEFAULT_PIPELINE_LIMITS). */
  limits?: PipelineLimits;
  /** The repositories pipelines run for. */
  repos: Pick<ReposService, 'handleById'>;
  users: Pick<UsersService, 'createCloneToken' | 'revokeCloneTokens' | 'usernames'>;
  agents: AgentLiveness;
  /** Retention policy and step-log compaction (defaults: DEFAULT_HOUSEKEEPING). */
  housekeeping?: HousekeepingSettings;
  /** Told of every pipeline status change, in its transaction (commit statuses). */
  onStatus?: PipelineStatusHook;
};

/** A step log to send: its headers and its bytes. */
export type LogStream = { headers: Record<string, string>; body: AsyncIterable<Buffer> };

/**
 * CI pipelines: the user side here (list, read, cancel, rerun, step logs), composed with the
 * parts of the other use cases: `triggers` (pipelines from pushes), `queue` (agents claim work),
 * `agentSide` (agent reports) and the reaper (pipelines whose agent is gone).
 */
export class PipelinesService {
  private readonly d: PipelinesDeps;
  private readonly waker: QueueWaker;
  private readonly finished;
  private readonly reaper: Reaper;
  readonly triggers: PipelineTrigger;
  readonly queue: PipelineQueue;
  readonly agentSide: AgentProtocol;
  /** Deletion (web only). */
  readonly deletion: PipelineDeletion;
  /** Whole and live step logs (web only). */
  readonly stepLogs: StepLogs;
  /** Step logs compacted into one object once their step ended (a periodic worker). */
  readonly compactor: LogCompactor;
  /** The retention policy of pipelines (TRIAD_RETENTION_DAYS, TRIAD_RETENTION_KEEP). */
  readonly retention: PipelineRetention;

  constructor(deps: PipelinesDeps) {
    this.d = deps;
    this.waker = new QueueWaker(deps.databaseUrl, deps.log);
    const count = (status: 'pending' | 'running') => db.countByStatus(deps.em().fork(), status);
    deps.metrics.clusterGauge('triad_ci_pipelines_pending', 'Pipelines waiting for an agent', () =>
      count('pending'),
    );
    deps.metrics.clusterGauge('triad_ci_pipelines_running', 'Pipelines claimed by an agent', () =>
      count('running'),
    );
    const claimed = deps.metrics.counter(
      'triad_ci_pipelines_claimed_total',
      'Pipelines claimed by agents',
      [],
    );
    const finished = deps.metrics.counter(
      'triad_ci_pipelines_finished_total',
      'Pipelines finished, by status',
      ['status'],
    );
    this.finished = finished;
    const onFinished = (status: string, n = 1) => finished.inc({ status }, n);
    const limits = deps.limits ?? DEFAULT_PIPELINE_LIMITS;
    const onStatus: PipelineStatusHook = deps.onStatus ?? (() => Promise.resolve());
    this.triggers = new PipelineTrigger({ limits, onStatus });
    this.reaper = new Reaper({
      em: deps.em,
      log: deps.log,
      agents: deps.agents,
      users: deps.users,
      agentTimeoutMs: deps.agentTimeoutMs,
      pipelineTimeoutSeconds: limits.timeoutSeconds,
      onErrored: (n) => onFinished('error', n),
      onStatus,
    });
    this.queue = new PipelineQueue({
      em: deps.em,
      log: deps.log,
      waker: this.waker,
      users: deps.users,
      repos: deps.repos,
      stepTimeoutSeconds: deps.stepTimeoutSeconds,
      logMaxBytes: deps.logMaxBytes,
      limits,
      baseUrl: deps.baseUrl,
      onClaimed: () => claimed.inc(),
    });
    this.deletion = new PipelineDeletion({ em: deps.em, blobs: deps.blobs, log: deps.log });
    this.stepLogs = new StepLogs({ em: deps.em, blobs: deps.blobs, waker: this.waker });
    const housekeeping = deps.housekeeping ?? DEFAULT_HOUSEKEEPING;
    this.compactor = new LogCompactor({
      ...housekeeping.logCompaction,
      em: deps.em,
      blobs: deps.blobs,
      log: deps.log,
      metrics: deps.metrics,
    });
    this.retention = new PipelineRetention({
      em: deps.em,
      log: deps.log,
      metrics: deps.metrics,
      deletion: this.deletion,
      settings: housekeeping.retention,
    });
    this.agentSide = new AgentProtocol({
      em: deps.em,
      blobs: deps.blobs,
      log: deps.log,
      reaper: this.reaper,
      users: deps.users,
      agentTimeoutMs: deps.agentTimeoutMs,
      logMaxBytes: deps.logMaxBytes,
      onFinished,
      onStatus,
    });
  }

  async start(): Promise<void> {
    await this.waker.start();
    this.reaper.start();
    this.compactor.start();
    this.retention.start();
  }

  /** Stops the reaper; long polls in flight answer 204 at once and new ones do not wait. */
  async stop(): Promise<void> {
    this.reaper.stop();
    await Promise.all([this.compactor.stop(), this.retention.stop()]);
    await this.waker.close();
  }

  private em(): EntityManager {
    return this.d.em();
  }

  /** Creates pipelines for pushed commits in the push's transaction (see `PipelineTrigger`). */
  trigger(tx: Db, repo: RepoHandle, triggers: readonly Trigger[]): Promise<number[]> {
    return this.triggers.trigger(tx, repo, triggers);
  }

  private async find(repoId: number, number: number): Promise<PipelineRow> {
    const row = isDbId(number) ? await db.byNumber(this.em(), repoId, number) : undefined;
    if (row === undefined) throw ApiError.notFound('pipeline');
    return row;
  }

  /** Pipelines with their triggering users' names (one query for the page). */
  private async json(rows: readonly PipelineRow[], steps?: StepRow[]): Promise<PipelineJson[]> {
    const names = await this.d.users.usernames(rows.map((r) => r.trigger_by));
    return rows.map((r) =>
      pipelineJson(r, r.trigger_by === null ? null : (names.get(r.trigger_by) ?? null), steps),
    );
  }

  private async withSteps(p: PipelineRow): Promise<PipelineJson> {
    const [json] = await this.json([p], await db.steps(this.em(), p.id));
    return json!;
  }

  async list(repoId: number, q: ListQuery) {
    const { rows, total } = await db.page(this.em(), repoId, q.status, q.per_page, offsetOf(q));
    return { total, page: q.page, per_page: q.per_page, pipelines: await this.json(rows) };
  }

  async get(repoId: number, number: number): Promise<PipelineJson> {
    return this.withSteps(await this.find(repoId, number));
  }

  /**
   * Pending or running -> cancelled, with every pending/running step, and its clone credential
   * revoked; 409 for a finished pipeline.
   */
  async cancel(repoId: number, number: number): Promise<PipelineJson> {
    const p = await this.find(repoId, number);
    await this.em().transactional(async (tx) => {
      const status = await db.lockStatus(tx, p.id);
      if (status !== 'pending' && status !== 'running') {
        throw ApiError.conflict(`pipeline ${number} is ${status ?? 'gone'} and cannot be cancelled`);
      }
      await db.cancel(tx, p.id);
      await this.d.users.revokeCloneTokens(tx, [p.id]);
      await this.d.onStatus?.(tx, [p.id]);
    });
    this.finished.inc({ status: 'cancelled' });
    return this.get(repoId, number);
  }

  /** A new pipeline from the same commit and events, triggered by `userId`. */
  async rerun(repoId: number, number: number, userId: number): Promise<PipelineJson> {
    const p = await this.find(repoId, number);
    const repo = await this.d.repos.handleById(repoId);
    const id = await this.em().transactional((tx) =>
      this.triggers.create(tx, repo, {
        commit: p.commit_node,
        events: p.events,
        branch: p.branch,
        tag: p.tag,
        senderId: userId,
      }),
    );
    if (id === undefined) {
      throw new ApiError(422, 'unprocessable', `commit ${p.commit_node} no longer yields a pipeline`);
    }
    const created = await db.byId(this.em(), id);
    if (created === undefined) throw ApiError.notFound('pipeline');
    return this.withSteps(created);
  }

  /**
   * A step's log as text (capped at 16 MiB), with its headers. X-Svc-Log-Truncated says when it
   * is not the whole output: the read cap, or the step log limit (the agent or the server cut it).
   * `stepRef` is a step number or an exact step name.
   */
  async log(repoId: number, number: number, stepRef: string): Promise<LogStream> {
    const p = await this.find(repoId, number);
    const steps = await db.steps(this.em(), p.id);
    const step =
      (/^\d+$/.test(stepRef) ? steps.find((s) => s.number === Number(stepRef)) : undefined) ??
      steps.find((s) => s.name === stepRef);
    if (step === undefined) throw ApiError.notFound('step');
    // A step that never started has no log (404); a started one answers its log, even if empty.
    if (step.started_at === null && Number(step.log_size) === 0) throw ApiError.notFound('log');
    const total = Number(step.log_size);
    const length = Math.min(total, LOG_READ_CAP);
    const headers: Record<string, string> = {
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': String(length),
      'X-Svc-Step-Name': encodeURIComponent(step.name),
      'X-Svc-Step-Number': String(step.number),
    };
    if (total > LOG_READ_CAP || step.log_truncated) headers['X-Svc-Log-Truncated'] = 'true';
    // The log is opened before answering, so a blob store that cannot be read is a 503, not a
    // 200 cut short.
    const body = await primed(readLog(() => this.em(), this.d.blobs, step.id, 0, length));
    return { headers, body };
  }
}
