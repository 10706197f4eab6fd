import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.ts';
import { migrate, openOrm, startEmbeddedPostgres, type EmbeddedDb, type Orm } from './db/database.ts';
import { createApp, createServices, type Services } from './app.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';
import { Metrics } from './telemetry/metrics.ts';
import { startTracing } from './telemetry/tracing.ts';
import { RequestContext } from '@mikro-orm/core';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Agent } from '../agent/agent.ts';
import { LocalExecutor } from '../agent/executors/local.ts';
import { closeReaderPool } from './vcs/index.ts';

export type Running = {
  url: string;
  port: number;
  orm: Orm;
  services: Services;
  log: Logger;
  /** Stops accepting, lets in-flight requests finish, then closes everything. */
  close: () => Promise<void>;
};

export type StartOptions = { log?: Logger; migrate?: boolean };

/** Runs `fn` with its own entity manager context (for work outside an HTTP request). */
export function inContext<T>(orm: Orm, fn: () => Promise<T>): Promise<T> {
  return RequestContext.create(orm.em.fork(), fn);
}

export async function startServer(config: Config, opts: StartOptions = {}): Promise<Running> {
  const log = opts.log ?? createLogger(config.logLevel);
  const tracing = await startTracing(config.otlpEndpoint, config.serviceName, log);
  let embedded: EmbeddedDb | undefined;
  let dbUrl = config.databaseUrl;
  if (dbUrl === undefined) {
    embedded = await startEmbeddedPostgres(path.join(config.dataDir, 'pg'), log);
    dbUrl = embedded.url;
    log.info({ dataDir: config.dataDir }, 'embedded PostgreSQL started');
  }
  const orm = await openOrm(dbUrl).catch(async (e: unknown) => {
    await embedded?.stop();
    throw e;
  });
  /** Undoes a partial start (e.g. the port is taken), so no PostgreSQL or connection outlives it. */
  const abandon = async (e: unknown, services?: Services): Promise<never> => {
    await services?.pipelines.stop().catch(() => undefined);
    await orm.close().catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    await tracing?.shutdown().catch(() => undefined);
    throw e;
  };
  try {
    if (opts.migrate !== false) {
      const applied = await migrate(dbUrl, orm);
      if (applied.length > 0) log.info({ applied }, 'migrations applied');
    }
  } catch (e) {
    return abandon(e);
  }
  let baseUrl = config.baseUrl ?? `http://localhost:${config.port}`;
  const deps = { config, orm, log, metrics: new Metrics(), baseUrl: () => baseUrl, databaseUrl: dbUrl };
  const services = createServices(deps);
  const { app } = createApp(deps, services);
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  try {
    if (config.admin !== undefined) {
      const admin = config.admin;
      await inContext(orm, () => services.users.ensureAdmin(admin));
    }
    if (config.agentToken !== undefined) {
      const token = config.agentToken;
      await inContext(orm, () => services.agents.ensure(token));
    }
    await services.pipelines.start();
    // pushes a killed process could not record get their events before traffic is taken
    await inContext(orm, () => services.changes.reconcilePending());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => resolve());
    });
  } catch (e) {
    return abandon(e, services);
  }
  const port = (server.address() as AddressInfo).port;
  if (config.baseUrl === undefined) baseUrl = `http://localhost:${port}`;

  let agent: Agent | undefined;
  if (config.embeddedAgent === 'local') {
    const token = await embeddedAgentToken(config.dataDir);
    await inContext(orm, () => services.agents.ensure(token, 'embedded'));
    agent = new Agent({
      server: `http://127.0.0.1:${port}`,
      token,
      instance: 'embedded',
      capacity: 2,
      executor: new LocalExecutor({ workDir: path.join(config.dataDir, 'work') }),
      log: log.child({ component: 'agent' }),
      drainMs: Math.min(config.shutdownTimeoutMs, 10_000),
    });
    await agent.start();
    log.info('embedded CI agent started (local executor)');
  }

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // The embedded agent drains first (it talks to this server), then long polls end
      // (answering 204), so draining does not wait for their timeouts.
      await agent?.stop();
      await services.pipelines.stop();
      const drained = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const timer = setTimeout(() => server.closeAllConnections(), config.shutdownTimeoutMs);
      await drained;
      clearTimeout(timer);
      closeReaderPool(services.repos);
      await orm.close();
      await embedded?.stop();
      await tracing?.shutdown();
    })());
  return { url: baseUrl, port, orm, services, log, close };
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
