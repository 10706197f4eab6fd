import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { UsersService } from '../users/service.ts';
import { CLONE_TOKEN_TTL_MS, type AgentCaller, type RepoInfo } from './model.ts';
import type { QueueWaker } from './queue-waker.ts';
import * as db from './repository.ts';
import { jobJson, type JobJson } from './schemas.ts';

export type QueueDeps = {
  em: () => EntityManager;
  log: Logger;
  waker: QueueWaker;
  users: Pick<UsersService, 'createCloneToken' | 'revokeCloneTokens'>;
  repoInfo: (repoId: number) => Promise<RepoInfo>;
  stepTimeoutSeconds: number;
  logMaxBytes: number;
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
   * Claims the oldest pending pipeline (FOR UPDATE SKIP LOCKED), waiting up to `waitMs` for one.
   * When the agent has gone away meanwhile (`gone` aborted), a claimed pipeline is put back. At
   * shutdown a waiting poll answers at once with nothing.
   */
  async poll(agent: AgentCaller, waitMs: number, gone?: AbortSignal): Promise<JobJson | undefined> {
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

  async depth(liveAgents: number): Promise<{ pending: number; running: number; agents: number }> {
    return { ...(await db.queueDepth(this.d.em())), agents: liveAgents };
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

  private async claim(agent: AgentCaller): Promise<JobJson | undefined> {
    const em = this.d.em().fork();
    const claimed = await em.transactional(async (tx) => {
      const p = await db.claimOldest(tx, {
        agentId: agent.agentId,
        instance: agent.instance ?? 'default',
        nonce: agent.nonce ?? null,
      });
      if (p === undefined) return undefined;
      const repo = await this.d.repoInfo(p.repo_id);
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
    });
  }
}
