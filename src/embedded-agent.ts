import { RequestContext } from '@mikro-orm/core';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Agent } from '../agent/agent.ts';
import { LocalExecutor } from '../agent/executors/local.ts';
import { DEFAULT_SANDBOX } from '../agent/executors/sandbox.ts';
import type { Config } from './config.ts';
import type { Orm } from './db/database.ts';
import { bytesQuantity } from './pipelines/quantity.ts';
import type { Services } from './services.ts';
import type { Logger } from './telemetry/logger.ts';

const INSTANCE = 'embedded';

type EmbeddedAgentDeps = { config: Config; orm: Orm; services: Services; log: Logger };

/**
 * How a shutdown budget is spent: the embedded agent and the HTTP drain share all of it but a
 * reserve for closing the database and PostgreSQL. The agent's drain and its reports' grace fit
 * in its share with room left for the server to error what the agent could not report.
 */
export function shutdownPlan(budgetMs: number) {
  const reserveMs = Math.min(5_000, budgetMs / 3);
  const drainWindowMs = Math.max(0, budgetMs - 250 - reserveMs);
  const agentGraceMs = Math.min(2_000, drainWindowMs / 3);
  const afterAgentMs = Math.min(1_000, drainWindowMs / 4);
  const agentDrainMs = Math.max(0, Math.min(10_000, drainWindowMs - agentGraceMs - afterAgentMs));
  return { reserveMs, drainWindowMs, agentDrainMs, agentGraceMs, afterAgentMs };
}

/** The embedded agent keeps one token across restarts, stored in the data directory. */
async function embeddedAgentToken(dataDir: string): Promise<string> {
  const file = path.join(dataDir, 'embedded-agent.token');
  const existing = await fs.readFile(file, 'utf8').catch(() => '');
  if (existing.trim() !== '') return existing.trim();
  const token = `triad_agent_${randomBytes(24).toString('hex')}`;
  await fs.mkdir(dataDir, { recursive: true });
  await fs.writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

/**
 * The in-process agent with the `local` executor. Steps run sandboxed; when the sandbox cannot
 * work here (no bwrap, user namespaces refused...), the agent stays off and the log says why,
 * unless TRIAD_AGENT_LOCAL_UNSANDBOXED=true opts out of isolation.
 */
export class EmbeddedAgent {
  private agent: Agent | undefined;

  private readonly executor: LocalExecutor;
  private readonly token: string;
  private readonly agentId: number;
  private readonly unsandboxed: boolean;
  private readonly d: EmbeddedAgentDeps;

  private constructor(
    executor: LocalExecutor,
    token: string,
    agentId: number,
    unsandboxed: boolean,
    d: EmbeddedAgentDeps,
  ) {
    this.executor = executor;
    this.token = token;
    this.agentId = agentId;
    this.unsandboxed = unsandboxed;
    this.d = d;
  }

  /** Tries the sandbox and registers the agent (before listening); undefined: it stays off. */
  static async prepare(d: EmbeddedAgentDeps): Promise<EmbeddedAgent | undefined> {
    const { unsandboxed, ...sandbox } = d.config.sandbox;
    // workspaces are not under the data directory: a step sees their path in its mount table
    const executor = new LocalExecutor({
      ...(d.config.agentWorkDir === undefined ? {} : { workDir: d.config.agentWorkDir }),
      sandbox,
      unsandboxed,
    });
    try {
      await executor.probe();
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      d.log.warn(
        { reason },
        `embedded CI agent not started: steps cannot run sandboxed here (${reason}); install bubblewrap, run a separate agent, or set TRIAD_AGENT_LOCAL_UNSANDBOXED=true (dangerous: steps could read every secret of the server)`,
      );
      return undefined;
    }
    const token = await embeddedAgentToken(d.config.dataDir);
    const row = await RequestContext.create(d.orm.em.fork(), () => d.services.agents.ensure(token, INSTANCE));
    return new EmbeddedAgent(executor, token, row.id, unsandboxed, d);
  }

  async start(port: number): Promise<void> {
    const { config, log } = this.d;
    const plan = shutdownPlan(config.shutdownTimeoutMs);
    const agent = new Agent({
      server: `http://127.0.0.1:${port}`,
      token: this.token,
      instance: INSTANCE,
      capacity: 2,
      executor: this.executor,
      log: log.child({ component: 'agent' }),
      drainMs: plan.agentDrainMs,
      stopGraceMs: plan.agentGraceMs,
      // a step's `resources.memory` replaces the sandbox's memory limit: never above it here
      maxResources: {
        memory: bytesQuantity(this.executor.sandbox?.o.memoryBytes ?? DEFAULT_SANDBOX.memoryBytes),
      },
    });
    await agent.start();
    this.agent = agent;
    const workDir = await this.executor.root();
    if (this.unsandboxed) {
      log.warn(
        { workDir },
        'embedded CI agent started WITHOUT a sandbox (TRIAD_AGENT_LOCAL_UNSANDBOXED=true)',
      );
    } else log.info({ workDir }, 'embedded CI agent started (local executor, sandboxed)');
  }

  /**
   * Drains the agent within `ms` (what is left of the drain window). A pipeline it still holds
   * then (it could not stop it or report it in time, e.g. on a loaded machine) becomes `error`
   * now: it must not stay `running` until the next start's agent or the reaper notices.
   */
  async stop(ms: number): Promise<void> {
    const agent = this.agent;
    if (agent === undefined) return;
    const { config, orm, services, log } = this.d;
    const { afterAgentMs } = shutdownPlan(config.shutdownTimeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      agent.stop().then(
        () => true,
        () => false,
      ),
      new Promise<boolean>(
        (resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms - afterAgentMs))),
      ),
    ]);
    clearTimeout(timer);
    if (!stopped) log.warn('shutdown: the embedded agent did not stop in time');
    const caller = { agentId: this.agentId, instance: INSTANCE, nonce: agent.nonce };
    const message = 'the server stopped while this pipeline ran';
    const errored = await RequestContext.create(orm.em.fork(), () =>
      services.pipelines.agentSide.abandonProcess(caller, message, afterAgentMs),
    ).catch((err: unknown) => {
      log.warn({ err }, "shutdown: the embedded agent's pipelines could not be ended");
      return [];
    });
    if (errored.length > 0) {
      log.warn({ pipelines: errored }, 'shutdown: pipelines the embedded agent left running are error');
    }
  }
}
