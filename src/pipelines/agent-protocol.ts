import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import { isDbId } from '../db/sql.ts';
import type { Db } from '../db/query.ts';
import type { BlobStore } from '../storage/index.ts';
import type { UsersService } from '../users/service.ts';
import {
  FINAL,
  LOG_APPEND_LIMIT,
  logKey,
  STEP_FINAL,
  type AgentCaller,
  type PipelineStatusHook,
} from './model.ts';
import type { Reaper } from './reaper.ts';
import * as db from './repository.ts';
import * as agentDb from './agent-repository.ts';
import {
  pipelineJson,
  stepJson,
  type PipelineJson,
  type PipelineStatusBody,
  type StepStatusBody,
} from './schemas.ts';

export type AgentProtocolDeps = {
  em: () => EntityManager;
  blobs: BlobStore;
  log: Logger;
  reaper: Reaper;
  users: Pick<UsersService, 'revokeCloneTokens' | 'usernames'>;
  agentTimeoutMs: number;
  logMaxBytes: number;
  onFinished: (status: string, n?: number) => void;
  /** Told of a pipeline's reported status, in the transaction (commit statuses). */
  onStatus?: PipelineStatusHook;
};

/**
 * The reports of agents on the pipelines they claimed (`/api/v1/ci/*`): heartbeats (which also
 * find pipelines whose agent process is gone), step and pipeline statuses, and log appends, each
 * refused or ignored once the pipeline is finished so a late report never revives it.
 */
export class AgentProtocol {
  private readonly d: AgentProtocolDeps;

  constructor(deps: AgentProtocolDeps) {
    this.d = deps;
  }

  private em(): EntityManager {
    return this.d.em();
  }

  /** How long a claim may be missing from its agent's heartbeat (the poll answer may be on its way). */
  private get claimGraceMs(): number {
    return Math.min(10_000, Math.floor(this.d.agentTimeoutMs / 2));
  }

  /**
   * A heartbeat: errors the pipelines whose claiming process is gone (see reaper.ts) and
   * answers which pipelines the agent must stop. With `running` (the pipelines the process runs),
   * those of them that are no longer running on the server (cancelled, errored); without it
   * (older agents), the cancelled pipelines of the instance not yet acknowledged.
   */
  async heartbeat(agent: AgentCaller, running: readonly number[] | undefined): Promise<number[]> {
    const nonce = agent.nonce;
    if (nonce !== undefined) {
      const reaper = this.d.reaper;
      const errored = await this.em()
        .fork()
        .transactional(async (tx) =>
          reaper.markErrored(
            tx,
            await reaper.heartbeatOrphans(tx, { ...agent, nonce }, running, this.claimGraceMs),
          ),
        );
      if (errored.length > 0) {
        this.d.onFinished('error', errored.length);
        this.d.log.warn(
          { pipelines: errored, agent: agent.agentId, instance: agent.instance },
          'pipelines errored: the agent process that claimed them is gone or no longer runs them',
        );
      }
    }
    if (running !== undefined) {
      if (running.length === 0) return [];
      return agentDb.notRunningAmong(this.em(), agent.agentId, running);
    }
    return agentDb.unacknowledgedCancels(this.em(), agent.agentId, agent.instance ?? 'default');
  }

  /** The running pipelines of each of these agents with the instance running each (ids ascending). */
  async runningByAgent(
    agentIds: readonly number[],
  ): Promise<Map<number, { id: number; instance: string }[]>> {
    const out = new Map<number, { id: number; instance: string }[]>();
    for (const r of await agentDb.runningOfAgents(this.em(), agentIds)) {
      out.set(r.agent_id, [...(out.get(r.agent_id) ?? []), { id: r.id, instance: r.agent_instance }]);
    }
    return out;
  }

  /**
   * An agent is being deregistered: its running pipelines become `error` at once (its processes
   * lose their token, so they could not report them) rather than when the reaper notices.
   */
  async abandon(agentId: number, name: string): Promise<void> {
    // a report in flight is waited for: its pipeline is not passed over (then left running)
    await this.errorAll(`agent ${name} was deregistered`, (tx) => agentDb.lockRunningOf(tx, { agentId }));
  }

  /**
   * A process of an agent stopped without reporting what it ran (the server's embedded agent
   * past the shutdown budget): its running pipelines become `error` with `message`. A report of
   * it still in flight is waited for (at most `waitMs`), so no pipeline is passed over.
   */
  async abandonProcess(agent: Required<AgentCaller>, message: string, waitMs: number): Promise<number[]> {
    const { agentId, nonce } = agent;
    const caller = { agentId, instance: agent.instance ?? 'default', nonce };
    return this.errorAll(message, (tx) => agentDb.lockRunningOf(tx, caller, waitMs));
  }

  private async errorAll(message: string, running: (tx: Db) => Promise<{ id: number }[]>): Promise<number[]> {
    const errored = await this.em()
      .fork()
      .transactional(async (tx) =>
        this.d.reaper.markErrored(
          tx,
          (await running(tx)).map((r) => ({ id: r.id, message })),
        ),
      );
    if (errored.length > 0) this.d.onFinished('error', errored.length);
    return errored;
  }

  /**
   * An agent reports a step. Nothing changes once the pipeline is finished (a report racing a
   * cancel waits for it and is then ignored) or once the step itself is finished; the answer
   * carries the pipeline's status (anything but `running` means stop).
   */
  async stepStatus(agentId: number, stepId: number, body: StepStatusBody) {
    return this.em()
      .fork()
      .transactional(async (tx) => {
        const s = isDbId(stepId) ? await agentDb.agentStep(tx, stepId, agentId, 'report') : undefined;
        if (s === undefined) throw ApiError.notFound('step');
        if (s.pipeline_status === 'running' && !STEP_FINAL.includes(s.status)) {
          await agentDb.reportStep(tx, stepId, {
            status: body.status,
            exitCode: body.exit_code ?? null,
            startedAt: body.started_at ?? null,
            finishedAt: body.finished_at ?? null,
            logTruncated: body.log_truncated === true,
          });
        }
        const after = await db.step(tx, stepId);
        if (after === undefined) throw ApiError.notFound('step');
        return { data: stepJson(after), pipeline_status: s.pipeline_status };
      });
  }

  async pipelineStatus(agentId: number, pipelineId: number, body: PipelineStatusBody): Promise<PipelineJson> {
    const final = FINAL.includes(body.status);
    const changed = await this.em()
      .fork()
      .transactional(async (tx) => {
        const status = isDbId(pipelineId) ? await db.lockStatus(tx, pipelineId, agentId) : undefined;
        if (status === undefined) throw ApiError.notFound('pipeline');
        if (FINAL.includes(status)) {
          // Already decided (cancelled by a user, or errored): acknowledge only.
          await agentDb.acknowledge(tx, pipelineId);
          return false;
        }
        if (body.status === 'pending') {
          throw ApiError.conflict('an agent cannot put a pipeline back in the queue');
        }
        await agentDb.reportPipeline(tx, pipelineId, {
          status: body.status,
          errorMessage: body.error_message ?? null,
          startedAt: body.started_at ?? null,
          finishedAt: body.finished_at ?? null,
          final,
        });
        if (final) await this.d.users.revokeCloneTokens(tx, [pipelineId]);
        await this.d.onStatus?.(tx, [pipelineId]);
        return final;
      });
    if (changed) this.d.onFinished(body.status);
    const p = await db.byId(this.em(), pipelineId);
    if (p === undefined) throw ApiError.notFound('pipeline');
    const users = await this.d.users.usernames([p.trigger_by]);
    const steps = await db.steps(this.em(), pipelineId);
    return pipelineJson(p, p.trigger_by === null ? null : (users.get(p.trigger_by) ?? null), steps);
  }

  /**
   * Appends a chunk to a step log. With `offset`, a chunk (or the part of it) already stored is
   * acknowledged without being stored twice; a gap answers 409 with the size the server has. A
   * log holds at most `logMaxBytes`: what goes beyond is acknowledged but not stored, and the
   * step is flagged truncated.
   */
  async appendLog(agentId: number, stepId: number, offset: number | undefined, data: Buffer) {
    if (data.length > LOG_APPEND_LIMIT)
      throw ApiError.tooLarge(`a log chunk may be at most ${LOG_APPEND_LIMIT} bytes`);
    const cap = this.d.logMaxBytes;
    return this.em()
      .fork()
      .transactional(async (tx) => {
        const s = isDbId(stepId) ? await agentDb.agentStep(tx, stepId, agentId, 'log') : undefined;
        if (s === undefined) throw ApiError.notFound('step');
        const size = Number(s.log_size);
        const at = offset ?? size;
        if (size >= cap) {
          if (at + data.length > size) await agentDb.flagLogTruncated(tx, stepId);
          return { size, stored: 0, truncated: true };
        }
        if (at > size) {
          throw new ApiError(409, 'conflict', `log offset ${at} is past the stored size ${size}`, {
            'X-Svc-Log-Size': String(size),
          });
        }
        let fresh = data.subarray(size - at);
        if (fresh.length === 0) return { size, stored: 0 };
        const over = size + fresh.length > cap;
        if (over) fresh = fresh.subarray(0, cap - size);
        const key = logKey(s.pipeline_id, stepId, size);
        await this.d.blobs.put(key, fresh);
        await agentDb.appendLogChunk(tx, stepId, { offset: size, size: fresh.length, key, truncated: over });
        return { size: size + fresh.length, stored: fresh.length, ...(over ? { truncated: true } : {}) };
      });
  }
}
