import { z } from 'zod';
import { readRawBody, reply, respond, type Api } from '../http/api.ts';
import { ApiError } from '../http/errors.ts';
import { queryInt } from '../http/pagination.ts';
import {
  LOG_APPEND_LIMIT,
  pipelineStatusBody,
  stepStatusBody,
  type PipelinesService,
} from '../pipelines/service.ts';
import {
  heartbeatSchema,
  jobSchema,
  logAckSchema,
  pipelineSchema,
  queueSchema,
  stepReportSchema,
} from '../pipelines/schemas.ts';
import { createAgentBody, type AgentsService } from './service.ts';
import { newAgentSchema } from './schemas.ts';

const pollQuery = z.object({ wait: queryInt(z.int().min(0).max(30)).optional() });
const logQuery = z.object({ offset: queryInt(z.int().min(0)).optional() });
const id = (raw: string | undefined): number =>
  raw !== undefined && /^\d{1,9}$/.test(raw) ? Number(raw) : NaN;

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
    auth: 'admin',
    operationId: 'createAgent',
    summary: 'Register a CI agent; the token is shown once (site admin)',
    body: createAgentBody,
    returns: respond.created(newAgentSchema, 'the new agent with its token'),
    handler: async ({ access, body }) => {
      access.admin();
      return reply.created(await agents.create(body.name));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/ci/poll',
    tag: 'ci',
    auth: 'agent',
    summary:
      'Claim the oldest pending pipeline: 200 with the job, 204 when none; `?wait=N` long-polls (N <= 30)',
    operationId: 'pollJob',
    query: pollQuery,
    returns: respond.bare(jobSchema, 'the claimed pipeline as a job', {
      noContent: 'no pending pipeline (within `wait` seconds)',
    }),
    handler: async ({ access, query, res }) => {
      const agent = access.agent();
      await agents.seen(agent.agentId, agent.instance);
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) gone.abort();
      });
      const job = await pipelines.poll(agent, (query.wait ?? 0) * 1000, gone.signal);
      return job === undefined ? reply.noContent() : reply.bare(job);
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/ci/heartbeat',
    tag: 'ci',
    auth: 'agent',
    operationId: 'heartbeat',
    summary: 'Record that the agent is alive; answers the ids of its pipelines that were cancelled',
    returns: respond.bare(heartbeatSchema, 'pipelines of this agent instance to stop'),
    handler: async ({ access }) => {
      const agent = access.agent();
      await agents.seen(agent.agentId, agent.instance);
      return reply.bare({ cancelled_pipelines: await pipelines.cancelledFor(agent) });
    },
  });
  api.route({
    method: 'put',
    path: '/api/v1/ci/steps/:id/status',
    tag: 'ci',
    auth: 'agent',
    operationId: 'reportStepStatus',
    summary: 'Report a step status; the answer carries `pipeline_status` (cancelled means stop)',
    body: stepStatusBody,
    returns: respond.bare(stepReportSchema, 'the step as stored and the status of its pipeline'),
    errors: { 404: 'no step of a pipeline claimed by this agent has this id' },
    handler: async ({ access, params, body }) => {
      const agent = access.agent();
      return reply.bare(await pipelines.stepStatus(agent.agentId, id(params.id), body));
    },
  });
  api.route({
    method: 'put',
    path: '/api/v1/ci/pipelines/:id/status',
    tag: 'ci',
    auth: 'agent',
    operationId: 'reportPipelineStatus',
    summary: 'Report a pipeline status (sets finished_at and error_message)',
    body: pipelineStatusBody,
    returns: respond.data(pipelineSchema, 'the pipeline with its steps'),
    errors: { 404: 'no pipeline claimed by this agent has this id' },
    handler: async ({ access, params, body }) => {
      const agent = access.agent();
      return reply.ok(await pipelines.pipelineStatus(agent.agentId, id(params.id), body));
    },
  });
  api.route({
    method: 'post',
    path: '/api/v1/ci/steps/:id/log',
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
    },
    body: z.string(),
    rawBody: true,
    handler: async ({ access, params, query, req }) => {
      const agent = access.agent();
      const data = await readRawBody(req, LOG_APPEND_LIMIT);
      return reply.ok(await pipelines.appendLog(agent.agentId, id(params.id), query.offset, data));
    },
  });
  api.route({
    method: 'get',
    path: '/api/v1/ci/queue',
    tag: 'ci',
    auth: 'agent-or-admin',
    operationId: 'getQueue',
    summary: 'Queue depth for autoscalers: `{pending, running, agents}` (agent token or site admin)',
    returns: respond.bare(queueSchema, 'pending and running pipelines and live agent instances'),
    errors: { 403: 'a user token of someone who is not a site administrator' },
    handler: async ({ access }) => {
      if (access.principal.kind !== 'agent') {
        if (access.principal.kind === 'anonymous') throw ApiError.unauthorized('agent token required');
        access.admin();
      }
      return reply.bare(await pipelines.queue(await agents.liveInstances(opts.agentTimeoutMs)));
    },
  });
}
