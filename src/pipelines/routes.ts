import { reply, respond, type Api } from '../http/api.ts';
import { pathInt, pathText } from '../http/params.ts';
import { apiPath } from '../http/responses.ts';
import type { PipelinesService } from './service.ts';
import { listQuery, pipelineListSchema, pipelineSchema } from './schemas.ts';
import { earlierPipelineListShape, earlierPipelineShape } from './earlier.ts';

const READ_403 = 'a private repository and the token lacks ci:read or does not reach it';
const WRITE_403 = 'not a member of the organization, or the token lacks ci:write or reach';

const READ = { scope: 'ci:read' } as const;
const WRITE = { scope: 'ci:write', role: 'member' } as const;
const NUMBER = { number: pathInt };

export function pipelineRoutes(api: Api, pipelines: PipelinesService): void {
  const base = '/pipelines';
  api.repoRoute({
    repo: READ,
    method: 'get',
    path: base,
    tag: 'pipelines',
    auth: 'public',
    operationId: 'listPipelines',
    summary: 'Pipelines, newest first: `{total, page, per_page, pipelines}` (per_page default 20, max 50)',
    query: listQuery,
    returns: respond.bare(pipelineListSchema, 'one page of pipelines (without steps)', {
      paged: (b) => ({ total: b.total, page: b.page, perPage: b.per_page }),
    }),
    earlier: { returns: earlierPipelineListShape },
    errors: { 403: READ_403 },
    handler: async ({ target, query }) => reply.bare(await pipelines.list(target.repo.id, query)),
  });
  api.repoRoute({
    repo: READ,
    params: NUMBER,
    method: 'get',
    path: `${base}/:number`,
    tag: 'pipelines',
    auth: 'public',
    operationId: 'getPipeline',
    summary: 'One pipeline with its steps (bare object)',
    returns: respond.bare(pipelineSchema, 'the pipeline with its steps'),
    earlier: { returns: earlierPipelineShape },
    errors: { 403: READ_403, 404: 'no such repository or pipeline' },
    handler: async ({ target, params }) => reply.bare(await pipelines.get(target.repo.id, params.number)),
  });
  api.repoRoute({
    repo: { ...READ, authenticated: true },
    params: { number: pathInt, step: pathText },
    method: 'get',
    path: `${base}/:number/steps/:step/log`,
    tag: 'pipelines',
    auth: 'token',
    session: true,
    operationId: 'getStepLog',
    earlier: 'absent',
    summary:
      'A step log as text/plain (ci:read, token or web session required); `:step` is a number or an exact name',
    returns: respond.text('text/plain; charset=utf-8', 'the log as stored so far (capped at 16 MiB)', {
      'X-Svc-Step-Name': { description: 'the step name (percent-encoded)', required: true, type: 'string' },
      'X-Svc-Step-Number': { description: 'the step number', required: true, type: 'integer' },
      'X-Svc-Log-Truncated': {
        description: '`true` when the body was capped at 16 MiB',
        required: false,
        type: 'string',
      },
    }),
    errors: {
      403: 'the token lacks ci:read or does not reach the repository',
      404: 'no such repository, pipeline or step, or the step has not started',
      503: 'the blob store holding the log cannot be read (`storage_unavailable`)',
    },
    handler: async ({ target, params }) => {
      const log = await pipelines.log(target.repo.id, params.number, params.step);
      return reply.stream(log.headers, log.body);
    },
  });
  api.repoRoute({
    repo: WRITE,
    params: NUMBER,
    method: 'post',
    path: `${base}/:number/cancel`,
    tag: 'pipelines',
    auth: 'token',
    operationId: 'cancelPipeline',
    summary: 'Cancel a pending or running pipeline and its pending/running steps (ci:write, org member)',
    returns: respond.bare(pipelineSchema, 'the cancelled pipeline with its steps'),
    earlier: { returns: earlierPipelineShape },
    errors: { 403: WRITE_403, 404: 'no such repository or pipeline', 409: 'the pipeline has finished' },
    handler: async ({ target, params }) => reply.bare(await pipelines.cancel(target.repo.id, params.number)),
  });
  api.repoRoute({
    repo: WRITE,
    params: NUMBER,
    method: 'post',
    path: `${base}/:number/rerun`,
    tag: 'pipelines',
    auth: 'token',
    operationId: 'rerunPipeline',
    summary: 'Run the pipeline again from the same commit; returns the new pipeline (ci:write, org member)',
    returns: respond.bare(pipelineSchema, 'the new pipeline', {
      status: 201,
      location: (np, p) => apiPath('repos', p.org!, p.repo!, 'pipelines', np.number),
    }),
    earlier: { returns: earlierPipelineShape },
    errors: {
      403: WRITE_403,
      404: 'no such repository or pipeline',
      422: 'the commit no longer yields a pipeline (`unprocessable`)',
    },
    links: Object.fromEntries(
      ['getPipeline', 'cancelPipeline', 'rerunPipeline'].map((id) => [
        id,
        { org: '$request.path.org', repo: '$request.path.repo', number: '$response.body#/number' },
      ]),
    ),
    handler: async ({ access, target, params }) =>
      reply.bare(await pipelines.rerun(target.repo.id, params.number, access.actor().id), 201),
  });
}
