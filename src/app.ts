import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import { RequestContext } from '@mikro-orm/core';
import { trace, SpanStatusCode } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Config } from './config.ts';
import { ping, type Orm } from './db/database.ts';
import { z } from 'zod';
import { Api, reply, respond } from './http/api.ts';
import { authenticate, type Directory } from './http/auth.ts';
import { ApiError, errorMiddleware, notFoundRoute } from './http/errors.ts';
import { AuthThrottle } from './http/throttle.ts';
import { openapiDocument } from './http/openapi.ts';
import type { Metrics } from './telemetry/metrics.ts';
import { UsersService, type TargetDirectory } from './users/service.ts';
import { userRoutes } from './users/routes.ts';
import { OrgsService } from './orgs/service.ts';
import { orgRoutes } from './orgs/routes.ts';
import { ReposService } from './repos/service.ts';
import { repoRoutes } from './repos/routes.ts';
import { hostingHandler } from './repos/hosting.ts';
import { RepoChanges } from './repos/changes.ts';
import { Spool } from './vcs/spool.ts';
import { contentRoutes } from './repos/contents.ts';
import { driverFor, openReader, VcsOpsSet } from './vcs/index.ts';
import { ReaderPool } from './vcs/pool.ts';
import { TransportServers } from './vcs/transport.ts';
import { AgentsService } from './agents/service.ts';
import { agentRoutes } from './agents/routes.ts';
import { PipelinesService } from './pipelines/service.ts';
import { pipelineRoutes } from './pipelines/routes.ts';
import { IssuesService } from './issues/service.ts';
import { issueRoutes } from './issues/routes.ts';
import { PullsService } from './pulls/service.ts';
import { pullRoutes } from './pulls/routes.ts';
import { Mergeability } from './pulls/mergeability.ts';
import type { Trigger } from './pipelines/model.ts';
import { WebhooksService } from './webhooks/service.ts';
import { webhookRoutes } from './webhooks/routes.ts';
import { Dispatcher } from './webhooks/delivery/dispatcher.ts';
import { webhookLookups } from './webhooks/envelope.ts';
import { FsBlobStore, type BlobStore } from './storage/index.ts';
import path from 'node:path';

export const VERSION = '0.1.0';

export type Services = {
  users: UsersService;
  orgs: OrgsService;
  repos: ReposService;
  agents: AgentsService;
  pipelines: PipelinesService;
  issues: IssuesService;
  webhooks: WebhooksService;
  /** Delivers webhooks from the outbox; started and stopped by the server. */
  webhookDispatcher: Dispatcher;
  changes: RepoChanges;
  /** Pooled contents readers (persistent VCS processes); closed at shutdown. */
  readers: ReaderPool;
  pulls: PullsService;
  /** Merges, dry-run merges, ref deletion (Mercurial's command servers); closed at shutdown. */
  ops: VcsOpsSet;
  /** The clone URLs' concurrency cap and pooled backend workers; closed at shutdown. */
  transports: TransportServers;
};

export type AppDeps = {
  config: Config;
  orm: Orm;
  log: Logger;
  metrics: Metrics;
  baseUrl: () => string;
  databaseUrl: string;
};

export function blobStore(config: Config): BlobStore {
  return new FsBlobStore(path.join(config.dataDir, 'blobs'));
}

/** Wires the services together. Each service takes the request-scoped entity manager through `em`. */
export function createServices(deps: AppDeps): Services {
  const em = () => deps.orm.em;
  const users: UsersService = new UsersService({
    em,
    maxTokensPerUser: deps.config.maxTokensPerUser,
    targets: {
      resolve: (level, target, userId) => resolveTarget(level, target, userId),
      names: (t) => targetNames(t),
    },
  });
  const orgs = new OrgsService({ em, users, maxOrgsPerUser: deps.config.maxOrgsPerUser });
  const repos = new ReposService({ em, orgs, repoDir: deps.config.repoDir, baseUrl: deps.baseUrl });
  const resolveTarget: TargetDirectory['resolve'] = async (level, target, userId) => {
    const [orgName, repoName, ...rest] = target.split('/');
    const wantRepo = level === 'repo';
    if (
      orgName === undefined ||
      rest.length > 0 ||
      (wantRepo ? repoName === undefined : repoName !== undefined)
    ) {
      throw ApiError.validation(
        `body.target: must be ${wantRepo ? '"org/repo"' : '"org"'} for a ${level} token`,
      );
    }
    const org = await orgs.ref(orgName);
    const role = org === undefined ? undefined : await orgs.role(org.id, userId);
    if (org === undefined || role === undefined) throw ApiError.notFound('target organization');
    if (!wantRepo) return { orgId: org.id, repoId: null };
    const repo = await repos.ref(org, repoName ?? '');
    if (repo === undefined) throw ApiError.notFound('target repository');
    return { orgId: org.id, repoId: repo.id };
  };
  // A token's target as `org` or `org/repo` (a target deleted since names nothing: the token went with it).
  const targetNames: TargetDirectory['names'] = async (targets) => {
    const orgNames = await orgs.names(targets.flatMap((t) => (t.orgId === null ? [] : [t.orgId])));
    const repoNames = await repos.names(targets.flatMap((t) => (t.repoId === null ? [] : [t.repoId])));
    return targets.map((t) => {
      if (t.orgId === null) return null;
      const org = orgNames.get(t.orgId) ?? '';
      return t.repoId === null ? org : `${org}/${repoNames.get(t.repoId) ?? ''}`;
    });
  };
  const agents = new AgentsService({ em });
  const pipelines = new PipelinesService({
    em,
    blobs: blobStore(deps.config),
    log: deps.log,
    metrics: deps.metrics,
    databaseUrl: deps.databaseUrl,
    agentTimeoutMs: deps.config.agentTimeoutMs,
    stepTimeoutSeconds: deps.config.stepTimeoutSeconds,
    logMaxBytes: deps.config.stepLogMaxBytes,
    baseUrl: deps.baseUrl,
    readFile: async (repoId, rev, file) => {
      const repo = await repos.get(repoId);
      return driverFor(repo.vcs).fileAt(repos.path(repo), rev, file);
    },
    repoInfo: async (repoId) => {
      const repo = await repos.get(repoId);
      const org = await orgs.byId(repo.orgId);
      return {
        id: repo.id,
        name: repo.name,
        orgId: org.id,
        org: org.name,
        vcs: repo.vcs,
        isPrivate: repo.isPrivate,
      };
    },
    users,
    agents,
  });
  const issues = new IssuesService({ em, users, orgs, maxAssignees: deps.config.issueMaxAssignees });
  const readers = new ReaderPool(openReader, { max: 64, idleMs: 60_000 });
  const { concurrency, queue, hgWorkers } = deps.config.transport;
  const transports = new TransportServers({ concurrency, queue, wsgiWorkers: hgWorkers });
  const lookups = webhookLookups({ orm: deps.orm, users, orgs, repos });
  const webhookDispatcher = new Dispatcher({
    em,
    databaseUrl: deps.databaseUrl,
    log: deps.log.child({ component: 'webhooks' }),
    metrics: deps.metrics,
    settings: deps.config.webhooks,
    lookups,
  });
  const webhooks = new WebhooksService({
    em,
    settings: deps.config.webhooks,
    lookups,
    wake: () => webhookDispatcher.wake(),
  });
  const changes = new RepoChanges({
    em,
    log: deps.log,
    baseUrl: deps.baseUrl,
    markerDir: path.join(deps.config.repoDir, '.triad-pushes'),
    repoById: async (id) => {
      const repo = await repos.get(id).catch((e: unknown) => {
        if (e instanceof ApiError && e.status === 404) return undefined; // deleted since
        throw e;
      });
      if (repo === undefined) return undefined;
      return repos.changed(repo, (await orgs.byId(repo.orgId)).name);
    },
    // the next read after a push starts with fresh reader processes and caches
    onChanged: (repo) => readers.invalidate(repo.path),
    // Pull requests first (source pushes, manual merges; their own savepoint), then one CI
    // trigger call, so a commit reached by a push and a pull request gets one pipeline.
    onRefMoves: async (tx, repo, moves, senderId) => {
      let prTriggers: Trigger[] = [];
      try {
        prTriggers = await tx.transactional((sp) => pulls.sync.refsMoved(sp, repo, moves, senderId));
      } catch (err) {
        deps.log.error({ err, repo: repo.id }, 'pull request updates after a push failed');
      }
      const pushTriggers = moves.map((m): Trigger =>
        m.type === 'tag'
          ? { commit: m.target, event: 'tag', branch: '', tag: m.name, senderId }
          : { commit: m.head, event: 'push', branch: m.name, tag: '', senderId },
      );
      return pipelines.trigger(tx, repo.id, [...pushTriggers, ...prTriggers]);
    },
  });
  const ops = new VcsOpsSet({ tmpDir: path.join(deps.config.dataDir, 'tmp'), readers });
  const pulls: PullsService = new PullsService({
    em,
    log: deps.log,
    users,
    repos,
    changes,
    ops,
    mergeability: new Mergeability({
      ops: (kind) => ops.get(kind),
      budgetMs: deps.config.pullCheckBudgetMs,
      onError: (err) => deps.log.warn({ err }, 'mergeability check failed'),
    }),
    trigger: (tx, repoId, triggers) => pipelines.trigger(tx, repoId, triggers),
  });
  return {
    users,
    orgs,
    repos,
    agents,
    pipelines,
    issues,
    webhooks,
    webhookDispatcher,
    changes,
    readers,
    pulls,
    ops,
    transports,
  };
}

export function directory(s: Services): Directory {
  return {
    userByTokenHash: (hash) => s.users.userByTokenHash(hash),
    agentByTokenHash: (hash) => s.agents.byTokenHash(hash),
    orgByName: (name) => s.orgs.ref(name),
    repoByName: (org, name) => s.repos.ref(org, name),
    role: (orgId, userId) => s.orgs.role(orgId, userId),
  };
}

export function createApp(deps: AppDeps, services: Services): { app: Express; api: Api } {
  const { orm, log, metrics, config } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // Who counts as the client (failed-authentication throttle): the socket peer unless trusted proxies.
  app.set('trust proxy', config.trustProxy);
  const tracer = trace.getTracer('triad', VERSION);

  // Request id, access log, duration histogram and a trace span for every request.
  app.use((req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const reqId = typeof incoming === 'string' && /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', reqId);
    // Set first, so every answer has them, errors included: never sniffed; API answers never stored.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (req.path.toLowerCase().startsWith('/api/')) res.setHeader('Cache-Control', 'no-store');
    const started = process.hrtime.bigint();
    const span = tracer.startSpan(`${req.method} ${req.path}`);
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeLabel(req);
      metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      span.updateName(`${req.method} ${route}`);
      span.setAttributes({
        'http.method': req.method,
        'http.route': route,
        'http.status_code': res.statusCode,
      });
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      if (config.logRequests) {
        log.info(
          {
            reqId,
            method: req.method,
            url: req.originalUrl,
            status: res.statusCode,
            ms: Math.round(seconds * 1000),
          },
          'request',
        );
      }
    });
    next();
  });

  const api = new Api({ bodyLimit: config.bodyLimit, baseUrl: deps.baseUrl });
  api.route({
    method: 'get',
    path: '/healthz',
    tag: 'ops',
    auth: 'public',
    operationId: 'healthz',
    summary: 'Process is up',
    returns: respond.bare(z.object({ status: z.literal('ok') }), 'the process is up'),
    handler: () => Promise.resolve(reply.bare({ status: 'ok' as const })),
  });
  api.route({
    method: 'get',
    path: '/readyz',
    tag: 'ops',
    auth: 'public',
    operationId: 'readyz',
    summary: 'Database reachable with a free pool connection (503 otherwise)',
    returns: respond.bare(z.object({ status: z.literal('ready') }), 'the database answers'),
    errors: { 503: 'the database is unreachable or no pool connection is free (`service_unavailable`)' },
    handler: async () => {
      // A pool with no free connection is as unready as an unreachable database: give up quickly.
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<'busy'>((resolve) => (timer = setTimeout(() => resolve('busy'), 2000)));
      const probe = ping(orm).then(() => 'ok' as const);
      try {
        const r = await Promise.race([probe, gaveUp]);
        if (r === 'busy') throw new ApiError(503, 'service_unavailable', 'no free database connection');
        return reply.bare({ status: 'ready' as const });
      } catch (e) {
        probe.catch(() => undefined);
        if (e instanceof ApiError) throw e;
        throw new ApiError(503, 'service_unavailable', 'database unreachable');
      } finally {
        clearTimeout(timer);
      }
    },
  });
  api.route({
    method: 'get',
    path: '/metrics',
    tag: 'ops',
    auth: 'public',
    operationId: 'metrics',
    summary: 'Prometheus metrics (text exposition format)',
    returns: respond.text(metrics.registry.contentType, 'the metrics'),
    handler: async ({ res }) => {
      const text = await metrics.registry.metrics();
      res.setHeader('Content-Type', metrics.registry.contentType);
      res.send(text);
      return reply.handled();
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/openapi.json',
    tag: 'ops',
    auth: 'public',
    operationId: 'openapi',
    summary: 'This OpenAPI document',
    returns: respond.bare(
      z.looseObject({ openapi: z.string(), paths: z.record(z.string(), z.unknown()) }),
      'an OpenAPI 3.0 document',
    ),
    handler: () => Promise.resolve(reply.bare(openapiDocument(api, VERSION, deps.baseUrl()))),
  });

  userRoutes(api, services.users);
  orgRoutes(api, services.orgs, services.users);
  repoRoutes(api, services.repos);
  contentRoutes(api, services.repos, services.readers, config.limits);
  pipelineRoutes(api, services.pipelines);
  issueRoutes(api, services.issues);
  pullRoutes(api, services.pulls);
  webhookRoutes(api, services.webhooks);
  agentRoutes(api, services.agents, services.pipelines, { agentTimeoutMs: config.agentTimeoutMs });

  app.use((_req, _res, next) => RequestContext.create(orm.em, next));
  const throttle = new AuthThrottle(config.authFailures);
  app.use(
    authenticate(
      directory(services),
      (id) => {
        services.users
          .touchToken(id)
          .catch((err: unknown) => log.warn({ err }, 'token last_used_at update failed'));
      },
      throttle,
    ),
  );
  app.use(api.router);
  const hosting = hostingHandler({
    repos: services.repos,
    dir: directory(services),
    log,
    baseUrl: deps.baseUrl,
    throttle,
    changes: services.changes,
    spool: new Spool(config.transport.spoolDir),
    limits: { ...config.transport, servers: services.transports },
  });
  app.all('/:org/:repo', hosting);
  app.all('/:org/:repo/*rest', hosting);
  app.use(notFoundRoute);
  app.use(errorMiddleware(log));
  return { app, api };
}

function routeLabel(req: express.Request): string {
  const r = req.route as { path?: unknown } | undefined;
  if (r !== undefined && typeof r.path === 'string') return `${req.baseUrl}${r.path}`;
  return 'unmatched';
}
