import { randomUUID } from 'node:crypto';
import express, { type Express } from 'express';
import { RequestContext } from '@mikro-orm/core';
import { ping } from './db/database.ts';
import { z } from 'zod';
import { Api, reply, respond } from './http/api.ts';
import { authenticate, type Directory } from './http/auth.ts';
import { ApiError, errorMiddleware, notFoundRoute } from './http/errors.ts';
import { AuthThrottle } from './http/throttle.ts';
import { corsFor } from './http/cors.ts';
import { openapiDocument } from './http/openapi.ts';
import { variantHeader } from './http/variant.ts';
import { API_VARIANTS } from './domain/variant.ts';
import { userRoutes } from './users/routes.ts';
import { orgRoutes } from './orgs/routes.ts';
import { repoRoutes } from './repos/routes.ts';
import { hostingHandler } from './repos/hosting.ts';
import { listRules } from './protection/repository.ts';
import { contentRoutes } from './repos/contents.ts';
import { refRoutes } from './repos/refs.ts';
import { agentRoutes } from './agents/routes.ts';
import { pipelineRoutes } from './pipelines/routes.ts';
import { issueRoutes } from './issues/routes.ts';
import { pullRoutes } from './pulls/routes.ts';
import { webhookRoutes } from './webhooks/routes.ts';
import { protectionRoutes } from './protection/routes.ts';
import { releaseRoutes } from './releases/routes.ts';
import { statusRoutes } from './statuses/routes.ts';
import { searchRoutes } from './search/routes.ts';
import { webRoutes } from './web/routes.ts';
import { sessionAccess } from './web/session-access.ts';
import { redactSecrets } from './telemetry/logger.ts';
import { requestSpan } from './telemetry/http-spans.ts';
import type { AppDeps, Services } from './services.ts';

export const VERSION = '0.1.0';
/** Routes an agent calls all the time; their successful requests are logged at debug. */
const AGENT_ROUTES = new Set(['/api/v1/ci/poll', '/api/v1/ci/heartbeat']);

export function createApp(deps: AppDeps, services: Services): { app: Express; api: Api } {
  const { orm, log, metrics, config } = deps;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // Who counts as the client (failed-authentication throttle): the socket peer unless trusted proxies.
  app.set('trust proxy', config.trustProxy);

  // Request id, access log, duration histogram and a trace span for every request.
  app.use((req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const reqId = typeof incoming === 'string' && /^[\w.:-]{1,128}$/.test(incoming) ? incoming : randomUUID();
    res.setHeader('X-Request-Id', reqId);
    // Set first, so every answer has them, errors included: never sniffed; API answers never stored.
    res.setHeader('X-Content-Type-Options', 'nosniff');
    if (req.path.toLowerCase().startsWith('/api/')) res.setHeader('Cache-Control', 'no-store');
    const started = process.hrtime.bigint();
    const span = requestSpan(req, res);
    res.on('finish', () => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const route = routeLabel(req);
      metrics.httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      span?.end(route, res.statusCode);
      if (config.logRequests) {
        // An agent polls and beats its heart every few seconds: those answered are noise at info.
        const level = res.statusCode < 400 && AGENT_ROUTES.has(route) ? 'debug' : 'info';
        log[level](
          {
            reqId,
            method: req.method,
            url: redactSecrets(req.originalUrl),
            status: res.statusCode,
            ms: Math.round(seconds * 1000),
          },
          'request',
        );
      }
    });
    if (span === undefined) next();
    else span.run(next);
  });

  if (config.corsOrigins.length > 0) app.use('/api/', corsFor(config.corsOrigins));
  // the API variant a request asks for (400 for an unknown one), named in every /api/ answer
  app.use('/api/', variantHeader(config.apiVariant));

  const api = new Api({
    bodyLimit: config.bodyLimit,
    baseUrl: deps.baseUrl,
    // the one API read a web session may make (the step log, DESIGN section 9)
    sessionAccess: sessionAccess({
      sessions: services.sessions,
      dir: directory(services),
      baseUrl: deps.baseUrl,
      sessionMaxMs: config.sessions.maxMs,
    }),
  });
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
  // With TRIAD_METRICS_PORT, /metrics is served only on that port (server.ts), never here.
  if (config.metricsPort !== undefined) app.all('/metrics', notFoundRoute);
  else
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
    summary:
      'This OpenAPI document, of the API variant `variant` names (default: the variant the request is answered in)',
    query: z.object({ variant: z.enum(API_VARIANTS).optional() }),
    returns: respond.bare(
      z.looseObject({ openapi: z.string(), paths: z.record(z.string(), z.unknown()) }),
      'an OpenAPI 3.1 document',
    ),
    handler: ({ query, variant }) =>
      Promise.resolve(reply.bare(openapiDocument(api, VERSION, deps.baseUrl(), query.variant ?? variant))),
  });

  userRoutes(api, services.users);
  orgRoutes(api, services.orgs, services.users);
  repoRoutes(api, services.repos);
  contentRoutes(api, services.contents, services.compare, { socketHandOff: config.rawSocketHandOff });
  refRoutes(api, services.refs);
  pipelineRoutes(api, services.pipelines);
  issueRoutes(api, services.issues);
  pullRoutes(api, services.pulls, services.contents);
  statusRoutes(api, services.statuses);
  webhookRoutes(api, services.webhooks);
  protectionRoutes(api, services.protections);
  releaseRoutes(api, services.releases);
  searchRoutes(api, services.search, services.repos);
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
  app.use(
    webRoutes({
      services,
      dir: directory(services),
      baseUrl: deps.baseUrl,
      log,
      throttle,
      sessionMaxMs: config.sessions.maxMs,
    }),
  );
  const hosting = hostingHandler({
    repos: services.repos,
    dir: directory(services),
    log,
    baseUrl: deps.baseUrl,
    throttle,
    changes: services.changes,
    protections: (repoId) => listRules(deps.orm.em.fork(), repoId),
    spool: services.spool,
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

/** The directory the authentication layer looks users, agents, organizations and repositories up in. */
export function directory(s: Services): Directory {
  return {
    userByTokenHash: (hash) => s.users.userByTokenHash(hash),
    agentByTokenHash: (hash) => s.agents.byTokenHash(hash),
    orgByName: (name) => s.orgs.ref(name),
    repoByNames: (orgName, name) => s.repos.target(orgName, name),
    role: (orgId, userId) => s.orgs.role(orgId, userId),
  };
}
