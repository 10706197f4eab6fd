import type { Request } from 'express';
import { z } from 'zod';
import { reply, respond, type Api } from '../http/api.ts';
import { parseWith, readRawBody } from '../http/input.ts';
import type { Access } from '../http/auth.ts';
import { ApiError } from '../http/errors.ts';
import { clientLeft } from '../http/connections.ts';
import { queryInt } from '../http/pagination.ts';
import { pathInt } from '../http/params.ts';
import { isDbId } from '../db/sql.ts';
import { labelsQueryParam } from '../pipelines/labels.ts';
import { LOG_APPEND_LIMIT, type AgentCaller } from '../pipelines/model.ts';
import { earlierPipelineShape } from '../pipelines/earlier.ts';
import type { PipelinesService } from '../pipelines/service.ts';
import {
  heartbeatBody,
  heartbeatSchema,
  jobSchema,
  logAckSchema,
  pipelineSchema,
  pipelineStatusBody,
  queueSchema,
  stepReportSchema,
  stepStatusBody,
} from '../pipelines/schemas.ts';
import type { AgentsService } from './service.ts';
import { agentSchema, createAgentBody, newAgentSchema } from './schemas.ts';

const pollQuery = z.object({
  wait: queryInt(z.int().min(0).max(30)).optional(),
  labels: labelsQueryParam,
});
const queueQuery = z.object({
  labels: labelsQueryParam,
  wait: queryInt(z.int().min(0).max(60))
    .optional()
    .meta({ description: 'with `since`: hold the request up to N seconds (<= 60) until the figures change' }),
  since: z.string().max(64).optional().meta({ description: 'the `version` of the figures the caller has' }),
});
const logQuery = z.object({ offset: queryInt(z.int().min(0)).optional() });
const ID = { id: pathInt };

/**
 * The calling agent: its id, instance (`X-Svc-Agent-Instance`) and process nonce
 * (`X-Svc-Agent-Nonce`, new in every agent process, so the server can tell a restart apart).
 */
function caller(access: Access, req: Request): AgentCaller & { agentId: number } {
  const agent = access.agent();
  const raw = req.headers['x-svc-agent-nonce'];
  if (raw !== undefined && (typeof raw !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(raw))) {
    throw ApiError.validation('X-Svc-Agent-Nonce must be 1 to 64 letters, digits, "-" or "_"');
  }
  return { agentId: agent.agentId, instance: agent.instance, nonce: raw };
}

export function agentRoutes(
  api: Api,
  agents: AgentsService,
  pipelines: PipelinesService,
  opts: { agentTimeoutMs: number },
): void {
  api.route({
    method: 'post',
    path: '/api/v1/admin/agents',
    tag: 'admin',
    auth: 'agents-admin',
    operationId: 'createAgent',
    summary: 'Register a CI agent; the token is shown once (site admin: `agents:admin` or `admin`)',
    body: createAgentBody,
    returns: respond.created(newAgentSchema, 'the new agent with its token'),
    handler: async ({ body }) => reply.created(await agents.create(body.name)),
  });
  api.route({
    method: 'get',
    path: '/api/v1/admin/agents',
    tag: 'admin',
    auth: 'agents-admin',
    operationId: 'listAgents',
    summary:
      'Registered CI agents with their instances, labels and running pipelines (site admin: `agents:admin` or `admin`)',
    returns: respond.data(z.array(agentSchema), 'every agent, oldest first'),
    handler: async () =>
      reply.ok(await agents.list((ids) => pipelines.agentSide.runningByAgent(ids), opts.agentTimeoutMs)),
  });
  api.route({
    method: 'delete',
    path: '/api/v1/admin/agents/:id',
    params: ID,
    tag: 'admin',
    auth: 'agents-admin',
    operationId: 'deleteAgent',
    summary:
      'Deregister a CI agent: its token stops working and its running pipelines become `error` (site admin: `agents:admin` or `admin`)',
    returns: respond.empty('the agent is deregistered'),
    errors: { 404: 'no agent has this id' },
    handler: async ({ params }) => {
      const name = isDbId(params.id) ? await agents.nameOf(params.id) : undefined;
      if (name === undefined) throw ApiError.notFound('agent');
      await pipelines.agentSide.abandon(params.id, name);
      if (!(await agents.remove(params.id))) throw ApiError.notFound('agent');
      return reply.noContent();
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/ci/poll',
    tag: 'ci',
    auth: 'agent',
    summary:
      'Claim the oldest pending pipeline whose labels are exactly `labels` (none: unlabelled pipelines): 200 with the job, 204 when none; `?wait=N` long-polls (N <= 30)',
    operationId: 'pollJob',
    query: pollQuery,
    returns: respond.bare(jobSchema, 'the claimed pipeline as a job', {
      noContent: 'no pending pipeline (within `wait` seconds)',
    }),
    handler: async ({ access, query, req, res }) => {
      const agent = caller(access, req);
      const labels = query.labels ?? {};
      const gone = clientLeft(req, res);
      await agents.seen(agent.agentId, agent.instance, agent.nonce, labels);
      const job = await pipelines.queue.poll(agent, labels, (query.wait ?? 0) * 1000, gone);
      // at shutdown the connection ends with the answer (no kept-alive socket for the drain)
      if (pipelines.queue.closing) res.setHeader('Connection', 'close');
      return job === undefined ? reply.noContent() : reply.bare(job);
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/ci/heartbeat',
    tag: 'ci',
    auth: 'agent',
    operationId: 'heartbeat',
    summary:
      'Record that the agent process is alive and which pipelines it runs (`{running: [ids]}`); answers `cancelled_pipelines`, the ids it must stop',
    returns: respond.bare(heartbeatSchema, 'pipelines of this agent process to stop'),
    errors: { 400: 'a body that is not `{running: [ids]}` JSON, or a malformed `X-Svc-Agent-Nonce`' },
    // The body is optional (older agents send none), so it is read here rather than required.
    handler: async ({ access, req }) => {
      const agent = caller(access, req);
      const raw = (await readRawBody(req, 256 * 1024)).toString('utf8').trim();
      let json: unknown = {};
      try {
        if (raw !== '') json = JSON.parse(raw);
      } catch {
        throw ApiError.badRequest('the heartbeat body must be JSON');
      }
      const body = parseWith(heartbeatBody, json, 'body');
      await agents.seen(agent.agentId, agent.instance, agent.nonce);
      return reply.bare({ cancelled_pipelines: await pipelines.agentSide.heartbeat(agent, body.running) });
    },
  });
  api.route({
    method: 'put',
    path: '/api/v1/ci/steps/:id/status',
    params: ID,
    tag: 'ci',
    auth: 'agent',
    operationId: 'reportStepStatus',
    summary: 'Report a step status; the answer carries `pipeline_status` (cancelled means stop)',
    body: stepStatusBody,
    returns: respond.bare(stepReportSchema, 'the step as stored and the status of its pipeline'),
    errors: { 404: 'no step of a pipeline claimed by this agent has this id' },
    handler: async ({ access, params, body }) => {
      const agent = access.agent();
      return reply.bare(await pipelines.agentSide.stepStatus(agent.agentId, params.id, body));
    },
  });
  api.route({
    method: 'put',
    path: '/api/v1/ci/pipelines/:id/status',
    params: ID,
    tag: 'ci',
    auth: 'agent',
    operationId: 'reportPipelineStatus',
    summary: 'Report a pipeline status (sets finished_at and error_message)',
    body: pipelineStatusBody,
    returns: respond.data(pipelineSchema, 'the pipeline with its steps'),
    earlier: { returns: earlierPipelineShape },
    errors: { 404: 'no pipeline claimed by this agent has this id' },
    handler: async ({ access, params, body }) => {
      const agent = access.agent();
      return reply.ok(await pipelines.agentSide.pipelineStatus(agent.agentId, params.id, body));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/ci/steps/:id/log',
    params: ID,
    tag: 'ci',
    auth: 'agent',
    operationId: 'appendStepLog',
    summary: 'Append raw text to a step log (<= 1 MiB per request; `offset` makes retries idempotent)',
    query: logQuery,
    returns: respond.data(logAckSchema, 'the stored log size and how much of this chunk was new'),
    errors: {
      404: 'no step of a pipeline claimed by this agent has this id',
      409: '`offset` is past the stored size, which `X-Svc-Log-Size` gives',
      413: 'the chunk is larger than 1 MiB',
      503: 'the blob store failed or cannot be reached (`storage_unavailable`); retry with the same `offset`',
    },
    body: z.string(),
    rawBody: true,
    handler: async ({ access, params, query, req }) => {
      const agent = access.agent();
      const data = await readRawBody(req, LOG_APPEND_LIMIT);
      return reply.ok(await pipelines.agentSide.appendLog(agent.agentId, params.id, query.offset, data));
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/ci/queue',
    tag: 'ci',
    auth: 'agent-or-admin',
    operationId: 'getQueue',
    summary:
      'Queue depth for autoscalers: `{pending, running, agents, version}`, of one label set with `labels`; `since` + `wait` long-poll until the figures change (agent token, or site admin: `agents:admin` or `admin`)',
    query: queueQuery,
    returns: respond.bare(queueSchema, 'pending and running pipelines and live agent instances'),
    errors: {
      403: 'a user token of someone who is not a site administrator, or without the `agents:admin` or `admin` scope',
    },
    handler: async ({ access, query, req, res }) => {
      if (access.principal.kind !== 'agent') {
        if (access.principal.kind === 'anonymous') throw ApiError.unauthorized('agent token required');
        access.agentsAdmin();
      }
      const live = () => agents.liveInstances(opts.agentTimeoutMs, query.labels);
      const waitMs = query.since === undefined ? 0 : (query.wait ?? 0) * 1000;
      const figures = await pipelines.queue.watch(
        query.labels,
        live,
        query.since,
        waitMs,
        clientLeft(req, res),
      );
      if (pipelines.queue.closing) res.setHeader('Connection', 'close');
      return reply.bare(figures);
    },
  });
}
