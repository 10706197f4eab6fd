import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import type { Logger } from 'pino';
import { ApiError } from '../http/errors.ts';
import { hashToken } from '../http/auth.ts';
import type { BlobStore } from '../storage/index.ts';
import { newTokenValue } from '../users/service.ts';
import { textArray } from '../db/sql.ts';
import {
  CLONE_TOKEN_TTL_MS,
  FINAL,
  LOG_APPEND_LIMIT,
  NOTIFY_CHANNEL,
  PIPELINE_COLUMNS,
  PIPELINE_FROM,
  STEP_FINAL,
  pipelineJson,
  stepJson,
  type AgentCaller,
  type PipelineJson,
  type PipelineRow,
  type PipelineStatus,
  type StepRow,
  type pipelineStatusBody,
  type stepStatusBody,
} from './model.ts';
import type { QueueWaker } from './queue-waker.ts';
import { heartbeatOrphans, markErrored, staleOrphans } from './orphans.ts';
import type { JobJson } from './schemas.ts';
import type { VcsKind } from '../vcs/index.ts';

export type AgentProtocolDeps = {
  em: () => EntityManager;
  blobs: BlobStore;
  log: Logger;
  waker: QueueWaker;
  agentTimeoutMs: number;
  stepTimeoutSeconds: number;
  logMaxBytes: number;
  baseUrl: () => string;
  repoInfo: (repoId: number) => Promise<{ name: string; org: string; vcs: string }>;
  onClaimed: () => void;
  onFinished: (status: string, n?: number) => void;
};

/**
 * The agent side of CI (`/api/v1/ci/*`): claiming pipelines, heartbeats (which also find
 * pipelines whose agent process is gone), step and pipeline reports, and log appends, each
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

  /** The server is shutting down (long polls answer at once). */
  get closing(): boolean {
    return this.d.waker.isClosed;
  }

  /** How long a claim may be missing from its agent's heartbeat (the poll answer may be on its way). */
  private get claimGraceMs(): number {
    return Math.min(10_000, Math.floor(this.d.agentTimeoutMs / 2));
  }

  /**
   * Claims the oldest pending pipeline (FOR UPDATE SKIP LOCKED), waiting up to `waitMs` for one.
   * When the agent has gone away meanwhile (`gone` aborted), a claimed pipeline is put back. At
   * shutdown a waiting poll answers at once with nothing.
   */
  async poll(agent: AgentCaller, waitMs: number, gone?: AbortSignal) {
    const deadline = Date.now() + waitMs;
    const over = () => gone?.aborted === true || this.d.waker.isClosed;
    for (;;) {
      if (over()) return undefined;
      const job = await this.claim(agent);
      if (job !== undefined) {
        if (over()) {
          await this.release(job.pipeline_id);
          return undefined;
        }
        return job;
      }
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await this.d.waker.wait(Math.min(left, 5000), gone);
    }
  }

  /** Undoes a claim whose poll response could not be delivered. */
  private async release(pipelineId: number): Promise<void> {
    await this.em()
      .fork()
      .transactional(async (tx) => {
        await tx.execute(
          `update pipelines set status = 'pending', agent_id = null, agent_instance = null, agent_nonce = null,
             started_at = null where id = ? and status = 'running'`,
          [pipelineId],
        );
        await tx.execute('delete from api_tokens where pipeline_id = ?', [pipelineId]);
        await tx.execute(`select pg_notify('${NOTIFY_CHANNEL}', '')`);
      });
    this.d.log.info({ pipeline: pipelineId }, 'agent went away during its poll: pipeline back in the queue');
  }

  private async claim(agent: AgentCaller): Promise<JobJson | undefined> {
    const em = this.em().fork();
    const claimed = await em.transactional(async (tx) => {
      const [p] = await tx.execute<{ id: number; trigger_by: number | null; repo_id: number }[]>(
        `update pipelines set status = 'running', agent_id = ?, agent_instance = ?, agent_nonce = ?, started_at = now()
          where id = (select id from pipelines where status = 'pending' order by id for update skip locked limit 1)
          returning id, trigger_by, repo_id`,
        [agent.agentId, agent.instance ?? 'default', agent.nonce ?? null],
      );
      if (p === undefined) return undefined;
      let cloneToken: string | null = null;
      if (p.trigger_by !== null) {
        cloneToken = newTokenValue();
        await tx.execute(
          `insert into api_tokens (user_id, name, token_hash, scopes, level, target_org_id, target_repo_id,
                                   expires_at, pipeline_id)
           select ?, ?, ?, ?::text[], 'repo', r.org_id, r.id, ?, ? from repos r where r.id = ?`,
          [
            p.trigger_by,
            `ci clone for pipeline ${p.id}`,
            hashToken(cloneToken),
            textArray(['repo:read']),
            new Date(Date.now() + CLONE_TOKEN_TTL_MS),
            p.id,
            p.repo_id,
          ],
        );
      }
      return { id: p.id, cloneToken };
    });
    if (claimed === undefined) return undefined;
    this.d.onClaimed();
    const [p] = await em.execute<PipelineRow[]>(
      `select ${PIPELINE_COLUMNS} from ${PIPELINE_FROM} where p.id = ?`,
      [claimed.id],
    );
    const steps = await em.execute<StepRow[]>(
      'select * from pipeline_steps where pipeline_id = ? order by number',
      [claimed.id],
    );
    const repo = await this.d.repoInfo(p!.repo_id);
    const max = this.d.stepTimeoutSeconds;
    return {
      pipeline_id: p!.id,
      number: p!.number,
      commit_node: p!.commit_node,
      branch: p!.branch,
      tag: p!.tag,
      event: p!.event,
      events: p!.events,
      clone_url: `${this.d.baseUrl()}/${repo.org}/${repo.name}`,
      clone_token: claimed.cloneToken,
      vcs: repo.vcs as VcsKind,
      org: repo.org,
      repo: repo.name,
      steps: steps.map((s) => ({
        id: s.id,
        number: s.number,
        name: s.name,
        image: s.image,
        commands: s.commands,
        environment: s.environment,
        status: s.status,
        timeout_seconds: Math.min(s.timeout_seconds ?? max, max),
      })),
      ci_env: {
        CI: 'true',
        CI_PIPELINE_ID: String(p!.id),
        CI_PIPELINE_NUMBER: String(p!.number),
        CI_COMMIT: p!.commit_node,
        CI_BRANCH: p!.branch,
        CI_TAG: p!.tag,
        CI_EVENT: p!.event,
        CI_REPO: `${repo.org}/${repo.name}`,
      },
      log_max_bytes: this.d.logMaxBytes,
    };
  }

  /**
   * A heartbeat: errors the pipelines whose claiming process is gone (see orphans.ts) and
   * answers which pipelines the agent must stop. With `running` (the pipelines the process runs),
   * those of them that are no longer running on the server (cancelled, errored); without it
   * (older agents), the cancelled pipelines of the instance not yet acknowledged.
   */
  async heartbeat(agent: AgentCaller, running: readonly number[] | undefined): Promise<number[]> {
    const nonce = agent.nonce;
    if (nonce !== undefined) {
      const errored = await this.em()
        .fork()
        .transactional(async (tx) =>
          markErrored(tx, await heartbeatOrphans(tx, { ...agent, nonce }, running, this.claimGraceMs)),
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
      const rows = await this.em().execute<{ id: number }[]>(
        `select id from pipelines where agent_id = ? and status <> 'running'
          and id in (${running.map(() => '?').join(',')}) order by id`,
        [agent.agentId, ...running],
      );
      return rows.map((r) => r.id);
    }
    const rows = await this.em().execute<{ id: number }[]>(
      `select id from pipelines where agent_id = ? and agent_instance = ? and status = 'cancelled' and not agent_done`,
      [agent.agentId, agent.instance ?? 'default'],
    );
    return rows.map((r) => r.id);
  }

  /**
   * An agent reports a step. Nothing changes once the pipeline is finished (a report racing a
   * cancel waits for it and is then ignored) or once the step itself is finished; the answer
   * carries the pipeline's status (anything but `running` means stop).
   */
  async stepStatus(agentId: number, stepId: number, body: z.infer<typeof stepStatusBody>) {
    return this.em()
      .fork()
      .transactional(async (tx) => {
        const [s] = Number.isSafeInteger(stepId)
          ? await tx.execute<{ status: string; pipeline_status: PipelineStatus }[]>(
              `select s.status, p.status as pipeline_status from pipeline_steps s
                 join pipelines p on p.id = s.pipeline_id
                where s.id = ? and p.agent_id = ? for share of p`,
              [stepId, agentId],
            )
          : [];
        if (s === undefined) throw ApiError.notFound('step');
        if (s.pipeline_status === 'running' && !STEP_FINAL.includes(s.status)) {
          await tx.execute(
            `update pipeline_steps set status = ?, exit_code = ?, started_at = coalesce(?, started_at,
               case when ? = 'running' then now() end), finished_at = coalesce(?, finished_at,
               case when ? in ('success', 'failure', 'skipped', 'cancelled') then now() end),
               log_truncated = log_truncated or ?
              where id = ?`,
            [
              body.status,
              body.exit_code ?? null,
              body.started_at ?? null,
              body.status,
              body.finished_at ?? null,
              body.status,
              body.log_truncated === true,
              stepId,
            ],
          );
        }
        const [after] = await tx.execute<StepRow[]>('select * from pipeline_steps where id = ?', [stepId]);
        return { data: stepJson(after!), pipeline_status: s.pipeline_status };
      });
  }

  async pipelineStatus(
    agentId: number,
    pipelineId: number,
    body: z.infer<typeof pipelineStatusBody>,
  ): Promise<PipelineJson> {
    const final = FINAL.includes(body.status);
    const changed = await this.em()
      .fork()
      .transactional(async (tx) => {
        const [p] = Number.isSafeInteger(pipelineId)
          ? await tx.execute<{ status: string }[]>(
              'select status from pipelines where id = ? and agent_id = ? for update',
              [pipelineId, agentId],
            )
          : [];
        if (p === undefined) throw ApiError.notFound('pipeline');
        if (FINAL.includes(p.status)) {
          // Already decided (cancelled by a user, or errored): acknowledge only.
          await tx.execute('update pipelines set agent_done = true where id = ?', [pipelineId]);
          return false;
        }
        if (body.status === 'pending') {
          throw ApiError.conflict('an agent cannot put a pipeline back in the queue');
        }
        await tx.execute(
          `update pipelines set status = ?, error_message = coalesce(?, error_message),
             started_at = coalesce(?, started_at), agent_done = ?,
             finished_at = case when ? then coalesce(?, now()) else finished_at end
           where id = ?`,
          [
            body.status,
            body.error_message ?? null,
            body.started_at ?? null,
            final,
            final,
            body.finished_at ?? null,
            pipelineId,
          ],
        );
        if (final) await tx.execute('delete from api_tokens where pipeline_id = ?', [pipelineId]);
        return final;
      });
    if (changed) this.d.onFinished(body.status);
    const [p] = await this.em().execute<PipelineRow[]>(
      `select ${PIPELINE_COLUMNS} from ${PIPELINE_FROM} where p.id = ?`,
      [pipelineId],
    );
    const steps = await this.em().execute<StepRow[]>(
      'select * from pipeline_steps where pipeline_id = ? order by number',
      [pipelineId],
    );
    return pipelineJson(p!, steps);
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
        const [s] = Number.isSafeInteger(stepId)
          ? await tx.execute<{ log_size: string; pipeline_id: number }[]>(
              `select s.log_size, s.pipeline_id from pipeline_steps s join pipelines p on p.id = s.pipeline_id
                where s.id = ? and p.agent_id = ? for update of s`,
              [stepId, agentId],
            )
          : [];
        if (s === undefined) throw ApiError.notFound('step');
        const size = Number(s.log_size);
        const at = offset ?? size;
        if (size >= cap) {
          if (at + data.length > size) {
            await tx.execute('update pipeline_steps set log_truncated = true where id = ?', [stepId]);
          }
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
        const key = `logs/${s.pipeline_id}/${stepId}/${String(size).padStart(14, '0')}`;
        await this.d.blobs.put(key, fresh);
        await tx.execute(
          'insert into step_log_chunks (step_id, "offset", size, blob_key) values (?, ?, ?, ?)',
          [stepId, size, fresh.length, key],
        );
        await tx.execute(
          'update pipeline_steps set log_size = log_size + ?, log_truncated = log_truncated or ? where id = ?',
          [fresh.length, over, stepId],
        );
        return { size: size + fresh.length, stored: fresh.length, ...(over ? { truncated: true } : {}) };
      });
  }

  async queue(liveAgents: number) {
    const [r] = await this.em().execute<{ pending: string; running: string }[]>(
      `select count(*) filter (where status = 'pending') as pending,
              count(*) filter (where status = 'running') as running from pipelines
        where status in ('pending', 'running')`,
    );
    return { pending: Number(r?.pending ?? 0), running: Number(r?.running ?? 0), agents: liveAgents };
  }

  /**
   * A running pipeline whose agent instance has not been seen for the agent timeout becomes
   * `error` naming the agent; its running steps fail and its pending steps are skipped.
   */
  async reapStale(): Promise<number[]> {
    const timeout = this.d.agentTimeoutMs;
    const ids = await this.em()
      .fork()
      .transactional(async (tx) => {
        const done = await markErrored(tx, await staleOrphans(tx, timeout));
        // processes not seen for a day are forgotten (their pipelines are long decided)
        await tx.execute(`delete from agent_processes where last_seen_at < now() - interval '1 day'`);
        return done;
      });
    if (ids.length > 0) this.d.onFinished('error', ids.length);
    if (ids.length > 0) this.d.log.warn({ pipelines: ids }, 'pipelines errored: agent missed heartbeats');
    return ids;
  }
}
