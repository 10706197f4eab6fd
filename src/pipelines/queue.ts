import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { ReposService } from '../repos/service.ts';
import type { UsersService } from '../users/service.ts';
import type { Labels } from './labels.ts';
import { CLONE_TOKEN_TTL_MS, type AgentCaller, type PipelineLimits, type QueueFigures } from './model.ts';
import type { QueueWaker } from './queue-waker.ts';
import * as db from './repository.ts';
import { jobJson, type JobJson } from './schemas.ts';

export type QueueDeps = {
  em: () => EntityManager;
  log: Logger;
  waker: QueueWaker;
  users: Pick<UsersService, 'createCloneToken' | 'revokeCloneTokens'>;
  repos: Pick<ReposService, 'handleById'>;
  stepTimeoutSeconds: number;
  logMaxBytes: number;
  limits: PipelineLimits;
  baseUrl: () => string;
  onClaimed: () => void;
};

/**
 * The CI queue: agents claim the oldest pending pipeline (long-polling until one is queued), with
 * a short-lived clone credential of the user who triggered it; and the queue depth for autoscalers.
 */
export class PipelineQueue {
  private readonly d: QueueDeps;

  constructor(deps: QueueDeps) {
    this.d = deps;
  }

  /** The server is shutting down (long polls answer at once). */
  get closing(): boolean {
    return this.d.waker.isClosed;
  }

  /**
   * Claims the oldest pending pipeline whose labels are the agent's (FOR UPDATE SKIP LOCKED),
   * waiting up to `waitMs` for one.
   * When the agent has gone away meanwhile (`gone` aborted), a claimed pipeline is put back. At
   * shutdown a waiting poll answers at once with nothing.
   */
  async poll(
    agent: AgentCaller,
    labels: Labels,
    waitMs: number,
    gone?: AbortSignal,
  ): Promise<JobJson | undefined> {
    const deadline = Date.now() + waitMs;
    const over = () => gone?.aborted === true || this.d.waker.isClosed;
    for (;;) {
      if (over()) return undefined;
      const seen = this.d.waker.seen; // before the claim: a NOTIFY during it is not missed
      const job = await this.claim(agent, labels);
      if (job !== undefined) {
        if (over()) {
          await this.release(job.pipeline_id);
          return undefined;
        }
        return job;
      }
      const left = deadline - Date.now();
      if (left <= 0) return undefined;
      await this.d.waker.wait(Math.min(left, 5000), gone, seen);
    }
  }

  /**
   * The queue figures of a label set (undefined: of every pipeline) with `agents`, the live agent
   * instances `liveAgents` counts. The version is derived from the figures alone, so it is the
   * same on every server replica and changes exactly when a figure does.
   */
  async depth(labels: Labels | undefined, liveAgents: () => Promise<number>): Promise<QueueFigures> {
    const { pending, running } = await db.queueDepth(this.d.em(), labels);
    const agents = await liveAgents();
    return { pending, running, agents, version: `${pending}.${running}.${agents}` };
  }

  /**
   * The figures once their version differs from `since` (at once when it already does), or when
   * `waitMs` elapse. Woken by the NOTIFY of every pipeline change; agent counts (liveness) are
   * looked at again every few seconds.
   */
  async watch(
    labels: Labels | undefined,
    liveAgents: () => Promise<number>,
    since: string | undefined,
    waitMs: number,
    gone?: AbortSignal,
  ): Promise<QueueFigures> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const seen = this.d.waker.seen; // before the figures: a NOTIFY meanwhile is not missed
      const figures = await this.depth(labels, liveAgents);
      const left = deadline - Date.now();
      if (since === undefined || figures.version !== since || left <= 0) return figures;
      if (gone?.aborted === true || this.d.waker.isClosed) return figures;
      await this.d.waker.wait(Math.min(left, 3000), gone, seen);
    }
  }

  /** Undoes a claim whose poll response could not be delivered. */
  private async release(pipelineId: number): Promise<void> {
    await this.d
      .em()
      .fork()
      .transactional(async (tx) => {
        await db.unclaim(tx, pipelineId);
        await this.d.users.revokeCloneTokens(tx, [pipelineId]);
        await db.notifyQueued(tx);
      });
    this.d.log.info({ pipeline: pipelineId }, 'agent went away during its poll: pipeline back in the queue');
  }

  private async claim(agent: AgentCaller, labels: Labels): Promise<JobJson | undefined> {
    const em = this.d.em().fork();
    const claimed = await em.transactional(async (tx) => {
      const p = await db.claimNext(tx, {
        agentId: agent.agentId,
        instance: agent.instance ?? 'default',
        nonce: agent.nonce ?? null,
        labels,
      });
      if (p === undefined) return undefined;
      const repo = await this.d.repos.handleById(p.repo_id);
      const cloneToken =
        p.trigger_by === null
          ? null
          : await this.d.users.createCloneToken(tx, {
              userId: p.trigger_by,
              pipelineId: p.id,
              orgId: repo.orgId,
              repoId: repo.id,
              expiresAt: new Date(Date.now() + CLONE_TOKEN_TTL_MS),
            });
      return { id: p.id, repo, cloneToken };
    });
    if (claimed === undefined) return undefined;
    this.d.onClaimed();
    const p = await db.byId(em, claimed.id);
    if (p === undefined) return undefined; // deleted with its repository since
    const steps = await db.steps(em, claimed.id);
    return jobJson(p, steps, {
      repo: claimed.repo,
      cloneUrl: `${this.d.baseUrl()}/${claimed.repo.org}/${claimed.repo.name}`,
      cloneToken: claimed.cloneToken,
      maxStepSeconds: this.d.stepTimeoutSeconds,
      logMaxBytes: this.d.logMaxBytes,
      limits: this.d.limits,
    });
  }
}
