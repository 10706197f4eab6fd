import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.ts';
import { migrate, openOrm, type Orm } from './db/database.ts';
import { poolOptions, sessionUrl } from './db/settings.ts';
import { ownEmbeddedDatabase, type OwnedDatabase } from './db/datadir.ts';
import { serveConnections } from './http/connections.ts';
import { createApp } from './app.ts';
import { createServices, type Services } from './services.ts';
import { createLogger, type Logger } from './telemetry/logger.ts';
import { Metrics } from './telemetry/metrics.ts';
import { ProbeServer } from './telemetry/probe-server.ts';
import { startTracing } from './telemetry/tracing.ts';
import { traceQueries } from './telemetry/db-spans.ts';
import { IdleCollector } from './telemetry/idle-gc.ts';
import { RequestContext } from '@mikro-orm/core';
import { EmbeddedAgent, shutdownPlan } from './embedded-agent.ts';

/** With storage nodes: how often pushes left unrecorded by a node that died are looked for. */
const RECONCILE_MS = 10_000;

export type Running = {
  url: string;
  port: number;
  /** The port of the `/metrics` listener (TRIAD_METRICS_PORT); undefined: `/metrics` is on `port`. */
  metricsPort: number | undefined;
  orm: Orm;
  services: Services;
  log: Logger;
  /** Stops accepting, lets in-flight requests finish, then closes everything. */
  close: () => Promise<void>;
};

export type StartOptions = {
  log?: Logger;
  migrate?: boolean;
  /** Named in the data directory's lock file (`triad.pid`). */
  command?: string;
  /**
   * `triad serve`: on a database without users (and no TRIAD_ADMIN_* bootstrap), create the
   * administrator and hand its one-time token to this function.
   */
  onFirstAdmin?: (username: string, token: string, passwordUrl: string) => void;
};

/** Runs `fn` with its own entity manager context (for work outside an HTTP request). */
export function inContext<T>(orm: Orm, fn: () => Promise<T>): Promise<T> {
  return RequestContext.create(orm.em.fork(), fn);
}

export async function startServer(config: Config, opts: StartOptions = {}): Promise<Running> {
  const log = opts.log ?? createLogger(config.logLevel, { format: config.logFormat });
  const tracing = await startTracing(config.otlpEndpoint, config.serviceName, log);
  let embedded: OwnedDatabase | undefined;
  let dbUrl = config.databaseUrl;
  if (dbUrl === undefined) {
    embedded = await ownEmbeddedDatabase(config.dataDir, opts.command ?? 'serve', log).catch(
      async (e: unknown) => {
        await tracing?.shutdown().catch(() => undefined);
        throw e;
      },
    );
    dbUrl = embedded.url;
    log.info({ dataDir: config.dataDir, port: embedded.embedded?.port }, 'embedded PostgreSQL started');
  }
  // LISTEN, the migration lock and the push locks need a session: DATABASE_DIRECT_URL when set
  const sessionDb = sessionUrl(dbUrl, config.databaseUrl, config.database);
  const orm = await openOrm(dbUrl, poolOptions(config.database)).catch(async (e: unknown) => {
    await embedded?.close();
    await tracing?.shutdown().catch(() => undefined);
    throw e;
  });
  let metricsServer: ProbeServer | undefined;
  if (tracing !== undefined) traceQueries(orm);
  /** Undoes a partial start (e.g. the port is taken), so no PostgreSQL or connection outlives it. */
  const abandon = async (e: unknown, services?: Services, srv?: http.Server): Promise<never> => {
    srv?.close(() => undefined);
    await metricsServer?.close();
    await services?.pipelines.stop().catch(() => undefined);
    await services?.webhookDispatcher.stop().catch(() => undefined);
    services?.releases.stop();
    services?.vcs.closeProcesses();
    await services?.spool.close().catch(() => undefined);
    await services?.changes.close().catch(() => undefined);
    await orm.close().catch(() => undefined);
    await embedded?.close().catch(() => undefined);
    await tracing?.shutdown().catch(() => undefined);
    throw e;
  };
  try {
    if (opts.migrate !== false) {
      const applied = await migrate(sessionDb, orm);
      if (applied.length > 0) log.info({ applied }, 'migrations applied');
    }
  } catch (e) {
    return abandon(e);
  }
  let baseUrl = config.baseUrl ?? `http://localhost:${config.port}`;
  let agent: EmbeddedAgent | undefined;
  const deps = { config, orm, log, metrics: new Metrics(), baseUrl: () => baseUrl, databaseUrl: sessionDb };
  const services = createServices(deps);
  const { app } = createApp(deps, services);
  // TRIAD_METRICS_PORT: /metrics on a listener of its own (the main port answers 404 there)
  if (config.metricsPort !== undefined) metricsServer = new ProbeServer(deps.metrics.registry);
  const server = http.createServer();
  server.keepAliveTimeout = 65_000;
  // A push upload may take as long as the transport allows (Node's default cuts it at 300 s).
  server.requestTimeout = Math.max(300_000, config.transport.timeoutMs + 60_000);
  const dropped = deps.metrics.counter(
    'triad_http_connections_dropped_total',
    'Connections closed on arrival because TRIAD_MAX_CONNECTIONS and the probe reserve were open',
    [],
  );
  const perClientDropped = deps.metrics.counter(
    'triad_http_client_connections_dropped_total',
    'Connections closed on arrival because their client had TRIAD_MAX_CONNECTIONS_PER_CLIENT open',
    [],
  );
  const idleClosed = deps.metrics.counter(
    'triad_http_connections_first_request_timeouts_total',
    'Connections closed because no request arrived within TRIAD_FIRST_REQUEST_TIMEOUT_SECONDS',
    [],
  );
  // Per-client and global connection caps, a probe reserve above the cap, the first-request
  // timeout (http/connections.ts); trusted proxies as express trusts them (TRIAD_TRUST_PROXY).
  const trusted = app.get('trust proxy fn') as (address: string, hop: number) => boolean;
  const connections = serveConnections(server, app, {
    max: config.connections.max,
    perClient: config.connections.perClient,
    firstRequestMs: config.connections.firstRequestMs,
    isProxy: (address) => trusted(address, 0),
    onDrop: (reason) => {
      if (reason === 'per_client') perClientDropped.inc();
      else if (reason === 'first_request_timeout') idleClosed.inc();
      else dropped.inc();
    },
  });
  server.on('drop', () => dropped.inc());
  // After a burst of requests, the heap V8 grew to is given back once the server is quiet.
  const idleGc = new IdleCollector({ idleMs: config.idleGcMs, log });
  server.on('request', () => idleGc.request());
  try {
    if (config.admin !== undefined) {
      const admin = { ...config.admin, operatorToken: config.operatorToken };
      await inContext(orm, () => services.users.bootstrap.ensureAdmin(admin));
    }
    if (config.agentToken !== undefined) {
      const token = config.agentToken;
      await inContext(orm, () => services.agents.ensure(token));
    }
    await services.pipelines.start();
    await services.webhookDispatcher.start();
    await services.releases.start();
    // the sandbox is tried before listening, so the server is ready once it answers
    if (config.embeddedAgent === 'local') {
      agent = await EmbeddedAgent.prepare({ config, orm, services, log });
    }
    // pushes a killed process could not record get their events before traffic is taken
    await inContext(orm, () => services.changes.reconcilePending());
    // spool directories of dead processes go, this process's own is made (a spool that cannot be
    // made fails the transfers, as it would later, not the API)
    await services.spool
      .open()
      .catch((err: unknown) => log.warn({ err }, 'the transport spool directory could not be made'));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => resolve());
    });
    await metricsServer?.listen(config.metricsPort ?? 0, {}, config.host);
    // After listening, so a start that fails (a taken port) does not use up the one-time token.
    if (config.admin === undefined && opts.onFirstAdmin !== undefined) {
      const first = await inContext(orm, () =>
        services.users.bootstrap.createFirstAdmin('admin', 'admin@localhost'),
      );
      if (first !== undefined) {
        const bound = config.baseUrl ?? `http://localhost:${(server.address() as AddressInfo).port}`;
        const link = `${bound}/-/password/set?token=${first.passwordLink}`;
        opts.onFirstAdmin(first.user.username, first.token, link);
      }
    }
    // The operator's token alone: a token of the first site administrator (on a fresh database the
    // first start's above, whose one-time token is still printed); nobody is promoted for it.
    const operatorToken = config.admin === undefined ? config.operatorToken : undefined;
    if (operatorToken !== undefined)
      await inContext(orm, () => services.users.bootstrap.ensureOperatorToken(operatorToken));
  } catch (e) {
    idleGc.stop();
    return abandon(e, services, server);
  }
  const port = (server.address() as AddressInfo).port;
  if (config.baseUrl === undefined) baseUrl = `http://localhost:${port}`;
  // With storage nodes, a push whose node died before the push was recorded is recorded once the
  // node answers again (its marker stays until then), not only at this server's next start.
  const reconciler =
    services.storage === undefined
      ? undefined
      : setInterval(() => {
          inContext(orm, () => services.changes.reconcilePending()).catch((err: unknown) =>
            log.warn({ err }, 'reconciling interrupted pushes failed'),
          );
        }, RECONCILE_MS);
  reconciler?.unref();

  try {
    await agent?.start(port);
  } catch (e) {
    clearInterval(reconciler);
    idleGc.stop();
    return abandon(e, services, server);
  }

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      // One budget for the whole shutdown: the agent and HTTP drain get all of it but a short
      // reserve for closing the database; at the drain deadline remaining connections are
      // destroyed. PostgreSQL is stopped last, after everything that uses it.
      const { reserveMs: reserve, drainWindowMs } = shutdownPlan(config.shutdownTimeoutMs);
      const drainUntil = Date.now() + drainWindowMs;
      const end = drainUntil + reserve;
      const left = () => Math.max(0, drainUntil - Date.now());
      // The embedded agent drains first (it talks to this server), then long polls end
      // (answering 204), so draining does not wait for their timeouts.
      await agent?.stop(left());
      log.debug('shutdown: embedded agent stopped');
      clearInterval(reconciler);
      await services.pipelines.stop();
      log.debug('shutdown: long polls ended');
      // Deliveries under way finish (each within its deadline); no new ones start.
      await within(services.webhookDispatcher.stop(), left(), () =>
        log.warn('shutdown: webhook deliveries under way did not end in time'),
      );
      const drained = new Promise<void>((resolve) => server.close(() => resolve()));
      connections.closeIdle();
      const hard = setTimeout(() => {
        log.warn('shutdown: drain deadline reached, closing the remaining connections');
        server.closeAllConnections();
      }, left());
      await drained;
      clearTimeout(hard);
      log.debug('shutdown: HTTP connections closed');
      idleGc.stop();
      services.releases.stop();
      services.transports.close();
      // What follows shares what is left of the budget (the reserve, or more when the drain ended
      // early), each step a part of it, so PostgreSQL is stopped before the deadline's exit.
      const rest = () => Math.max(0, end - Date.now());
      // another replica exports the cluster-wide gauges from its next scrape on
      await within(services.clusterLease.release(), Math.min(1_000, rest() / 5), () => undefined);
      // the pooled readers, command servers and workers end on their closed input
      await services.vcs.close(Math.min(5_000, Math.max(200, left(), rest() / 5)));
      // no transfer runs any more: this process's spool directory goes
      await services.spool
        .close()
        .catch((err: unknown) => log.warn({ err }, 'shutdown: the spool directory could not be removed'));
      await within(services.changes.close(), rest() / 4, () =>
        log.warn('shutdown: push locks did not close in time'),
      );
      await within(orm.close(), rest() / 3, () => log.warn('shutdown: database pool did not close in time'));
      await embedded?.close(Math.max(300, rest()));
      await within(tracing?.shutdown(), Math.min(1_000, Math.max(100, rest())), () => undefined);
      // scraped until the end of the drain
      await metricsServer?.close();
    })());
  return { url: baseUrl, port, metricsPort: metricsServer?.port, orm, services, log, close };
}

/** Waits for `p` at most `ms`; on timeout calls `late` and goes on (the promise is abandoned). */
async function within(p: Promise<unknown> | undefined, ms: number, late: () => void): Promise<void> {
  if (p === undefined) return;
  let timer: NodeJS.Timeout | undefined;
  const timedOut = await Promise.race([
    p.then(
      () => false,
      () => false,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), ms);
    }),
  ]);
  clearTimeout(timer);
  if (timedOut) late();
}
