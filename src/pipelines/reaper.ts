import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Db } from '../db/query.ts';
import type { AgentsService } from '../agents/service.ts';
import type { UsersService } from '../users/service.ts';
import type { AgentCaller, PipelineStatusHook } from './model.ts';
import * as agentDb from './agent-repository.ts';
import { formatDuration } from './pipeline-file.ts';

/** What the reaper asks the agents service: names and liveness of agent instances and processes. */
export type AgentLiveness = Pick<AgentsService, 'names' | 'seenAmong' | 'goneBefore' | 'forgetOldProcesses'>;

type Orphan = { id: number; message: string };

export type ReaperDeps = {
  em: () => EntityManager;
  log: Logger;
  agents: AgentLiveness;
  users: Pick<UsersService, 'revokeCloneTokens'>;
  agentTimeoutMs: number;
  /**
   * The pipelines' time limit (TRIAD_PIPELINE_TIMEOUT): the agent stops a pipeline at it; one
   * still running after a grace (an agent that did not) becomes `error`.
   */
  pipelineTimeoutSeconds?: number;
  onErrored: (n: number) => void;
  /** Told of the pipelines errored, in the transaction (commit statuses). */
  onStatus?: PipelineStatusHook;
};

/**
 * How long after its time limit a pipeline still running is ended by the server: a minute, or
 * a tenth of the limit when that is shorter, but at least 5 seconds: the agent counts the limit
 * from its own start of the pipeline (after the claim reached it) and then stops the step and
 * reports, which on a loaded machine takes seconds, not the one second this floor once was.
 */
export function overtimeGraceMs(limitSeconds: number): number {
  return Math.min(60_000, Math.max(5000, limitSeconds * 100));
}

/**
 * Running pipelines whose agent process is gone become `error` with a reason, so nothing stays
 * `running` forever: the agent instance went silent (the periodic reap), the instance was
 * restarted (a new process nonce appeared after the claiming one was last seen), or the claiming
 * process says in its heartbeat that it does not run the pipeline.
 */
export class Reaper {
  private readonly d: ReaperDeps;
  private timer: NodeJS.Timeout | undefined;

  constructor(deps: ReaperDeps) {
    this.d = deps;
  }

  start(): void {
    const every = Math.max(250, Math.min(5000, Math.floor(this.d.agentTimeoutMs / 4)));
    this.timer = setInterval(() => {
      this.reapStale().catch((err: unknown) => this.d.log.warn({ err }, 'pipeline reaper failed'));
    }, every);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
  }

  /**
   * A running pipeline whose agent instance has not been seen for the agent timeout becomes
   * `error` naming the agent; its running steps fail and its pending steps are skipped.
   */
  async reapStale(): Promise<number[]> {
    const timeout = this.d.agentTimeoutMs;
    const ids = await this.d
      .em()
      .fork()
      .transactional(async (tx) => {
        const stale = await this.staleOrphans(tx, timeout);
        const over = (await this.overtime(tx)).filter((o) => !stale.some((s) => s.id === o.id));
        const done = await this.markErrored(tx, [...stale, ...over]);
        await this.d.agents.forgetOldProcesses(tx);
        return done;
      });
    if (ids.length > 0) this.d.onErrored(ids.length);
    if (ids.length > 0)
      this.d.log.warn({ pipelines: ids }, 'pipelines errored: agent gone, or past the time limit');
    return ids;
  }

  /** Running pipelines past their time limit and its grace. */
  private async overtime(tx: Db): Promise<Orphan[]> {
    const limit = this.d.pipelineTimeoutSeconds;
    if (limit === undefined) return [];
    const over = await agentDb.runningStartedBefore(tx, limit * 1000 + overtimeGraceMs(limit));
    return over.map((p) => ({
      id: p.id,
      message: `the pipeline ran past its time limit of ${formatDuration(limit)} and its agent did not stop it`,
    }));
  }

  /** Running pipelines whose agent instance has not been seen for `timeoutMs` (nor started within it). */
  private async staleOrphans(tx: Db, timeoutMs: number): Promise<Orphan[]> {
    const old = await agentDb.runningStartedBefore(tx, timeoutMs);
    if (old.length === 0) return [];
    const claimed = old.flatMap((p) =>
      p.agent_id === null ? [] : [{ agentId: p.agent_id, instance: p.agent_instance }],
    );
    const live = new Set(
      (await this.d.agents.seenAmong(tx, claimed, timeoutMs)).map((k) => `${k.agentId}\n${k.instance}`),
    );
    const stale = old.filter((p) => p.agent_id === null || !live.has(`${p.agent_id}\n${p.agent_instance}`));
    const names = await this.d.agents.names(
      tx,
      stale.flatMap((p) => (p.agent_id === null ? [] : [p.agent_id])),
    );
    const seconds = Math.trunc(timeoutMs / 1000);
    return stale.map((p) => ({
      id: p.id,
      message: `agent ${(p.agent_id === null ? undefined : names.get(p.agent_id)) ?? 'deleted agent'} (instance ${p.agent_instance}) missed heartbeats for ${seconds} s`,
    }));
  }

  /**
   * What a heartbeat of `caller` tells about its instance's pipelines:
   * - claimed under another nonce whose process was last seen before this one first appeared: that
   *   process is gone (a restart reusing the instance name; two live processes sharing a name are
   *   not mistaken for one another, as both keep being seen);
   * - claimed by this very process, older than `graceMs` (a poll answer may still be on its way)
   *   and not in `running`: the process does not run it any more.
   */
  async heartbeatOrphans(
    tx: Db,
    caller: AgentCaller & { nonce: string },
    running: readonly number[] | undefined,
    graceMs: number,
  ): Promise<Orphan[]> {
    const key = { agentId: caller.agentId, instance: caller.instance ?? 'default' };
    const name = (await this.d.agents.names(tx, [key.agentId])).get(key.agentId) ?? '';
    const others = await agentDb.runningOfOthers(tx, key.agentId, key.instance, caller.nonce);
    const gone = new Set(
      await this.d.agents.goneBefore(
        tx,
        key,
        caller.nonce,
        others.flatMap((p) => (p.agent_nonce === null ? [] : [p.agent_nonce])),
      ),
    );
    const restarted = others
      .filter((p) => p.agent_nonce !== null && gone.has(p.agent_nonce))
      .map((p) => ({
        id: p.id,
        message: `agent ${name} (instance ${p.agent_instance}) restarted: the process that claimed this pipeline is gone`,
      }));
    if (running === undefined) return restarted;
    const dropped = await agentDb.runningOfProcess(
      tx,
      key.agentId,
      key.instance,
      caller.nonce,
      graceMs,
      running,
    );
    return [
      ...restarted,
      ...dropped.map((p) => ({
        id: p.id,
        message: `agent ${name} (instance ${p.agent_instance}) is no longer running this pipeline`,
      })),
    ];
  }

  /**
   * Marks pipelines `error` with their message, in the caller's transaction: running steps fail,
   * pending ones are skipped, clone tokens are revoked. Only pipelines still `running` (and not
   * held by another transaction) change. `agent_done` stays false, so an agent that still runs
   * one is told to stop it.
   */
  async markErrored(tx: Db, orphans: readonly Orphan[]): Promise<number[]> {
    const locked = new Set(
      await agentDb.lockRunning(
        tx,
        orphans.map((o) => o.id),
      ),
    );
    const done: number[] = [];
    for (const o of orphans) {
      if (locked.has(o.id) && (await agentDb.markError(tx, o.id, o.message))) done.push(o.id);
    }
    if (done.length > 0) {
      await agentDb.stopSteps(tx, done);
      await this.d.users.revokeCloneTokens(tx, done);
      await this.d.onStatus?.(tx, done);
    }
    return done;
  }
}
